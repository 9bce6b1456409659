"""Record identity of existing versions: index them, diff them record by record, check leakage.

``index_version`` (``recordkeeper index REF``) reads every shard of a committed version through
the client's read path (fsspec, CRC-checked records), writes one record index per shard
(:mod:`recordkeeper.core.record_index`) *beside the shard*::

    <shard directory>/.recordkeeper/index/<shard file name>.rkidx

and registers the version's split digests with the service (``PUT
/versions/{ref}/record-sets``).  It is resumable: a shard whose index already exists and whose
header names the same identity (kind, width), record count and ``records_sha256`` is skipped
without reading the shard; an interrupted run leaves only whole indexes (each is written in one
object).  Two versions that register the same shard in place share its index, which is
determined by the shard's records alone.  Publish never picks an index up as a shard (names
under ``.recordkeeper/`` and ``*.rkidx`` are ignored).

``record_diff`` and ``check_leakage`` stream the indexes (never the shards) through the core's
bounded-memory merge, run in C when the extension is built (``_speedups.record_diff_stream``,
``_speedups.record_leakage_stream``).

The per-record hook for writers, publish and deep verify is
:class:`recordkeeper.core.record_index.RecordIndexBuilder` (``add(record)``, ``finish()``);
:func:`write_index` stores what it built where this module looks for it.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from recordkeeper.core.digests import format_digest
from recordkeeper.core.errors import (
    InvalidIndex,
    InvalidRequest,
    NotStoredWarning,
    RecordkeeperError,
    StorageError,
)
from recordkeeper.core.leakage_policy import leakage_pairs
from recordkeeper.core.record_diff import (
    DEFAULT_SAMPLE,
    Emit,
    LeakPair,
    RecordDiff,
    diff_records,
    is_training_split,
    leakage,
    validate_sample,
)
from recordkeeper.core.record_identity import (
    DEFAULT_WIDTH,
    MAX_RECORD_SET_SPLITS,
    IdentityKind,
    validate_identity,
)
from recordkeeper.core.record_index import (
    FORMAT_VERSION,
    IndexHeader,
    RecordIndexBuilder,
    SetDigest,
    held_index_chunks,
    index_chunks,
    merge_sorted,
)
from recordkeeper.core.record_lookup import LookupShard, write_lookup
from recordkeeper.http import HttpCore, quote_segment
from recordkeeper.progress import byte_progress
from recordkeeper.record_ids import INDEX_DIR, INDEX_SUFFIX, index_uri, write_index
from recordkeeper.storage import open_read, open_write, profile_of, stat_object
from recordkeeper.values import DatasetVersion, Shard

if TYPE_CHECKING:
    from recordkeeper.progress import ProgressLike

__all__ = [
    "INDEX_DIR",
    "INDEX_SUFFIX",
    "LOOKUP_NAME",
    "build_version_lookup",
    "check_leakage",
    "index_streams",
    "index_uri",
    "index_version",
    "is_registered",
    "lookup_uri",
    "record_diff",
    "record_sets",
    "register_committed",
    "register_record_set",
    "split_digests",
    "staged_leakage",
    "write_index",
]

INDEX_LOCATION = "{shard_dir}/" + INDEX_DIR + "/{shard_name}" + INDEX_SUFFIX
_CHUNK_BUDGET = 16 * 2**20  # bytes of index chunks held at once by a merge, over all shards


LOOKUP_NAME = ".recordkeeper/records.rklookup"


def lookup_uri(version: DatasetVersion) -> str:
    """Where the record lookup of ``version`` is stored."""
    return f"{version.storage_prefix.rstrip('/')}/{LOOKUP_NAME}"


def build_version_lookup(
    version: DatasetVersion,
    kind: IdentityKind,
    width: int,
    storage_options: Mapping[str, Any] | None = None,
    *,
    indexes: Mapping[str, bytes] | None = None,
) -> str:
    """Write the record lookup of an indexed version from its shard indexes; its URI
    (``storage_options``: those of the call, else the version's own).  ``indexes`` (shard URI
    -> index bytes): those the caller holds and has stored, read from memory instead of
    storage (checked alike)."""
    options = dict(version.storage_options if storage_options is None else storage_options)
    shards = list(version.shards)
    per = max(256, (4 * 2**20) // max(1, len(shards) * width))
    held = indexes or {}

    def body(shard_uri: str) -> Any:
        data = held.get(shard_uri)
        if data is not None:
            yield from held_index_chunks(data, per)
            return
        with open_read(index_uri(shard_uri), options) as fh:
            yield from index_chunks(fh.read, per)[1]

    sources = [(LookupShard(s.sha256, s.records_sha256), body(s.uri)) for s in shards]
    from recordkeeper import _native

    fast = getattr(_native.speedups, "record_lookup_stream", None)
    uri = lookup_uri(version)
    with open_write(uri, options) as sink:
        total = sum(s.record_count for s in shards)
        write_lookup(sources, total, kind, width, sink.write, native=fast)
    return uri


def _header(uri: str, storage_options: Mapping[str, Any] | None) -> IndexHeader | None:
    try:
        with open_read(uri, storage_options) as fh:
            return IndexHeader.from_bytes(fh.read(64))
    except (StorageError, InvalidIndex, OSError):
        return None


def _matches(header: IndexHeader | None, shard: Shard, kind: str, width: int) -> bool:
    return (
        header is not None
        and (header.kind, header.width) == (kind, width)
        and header.count == shard.record_count
        and header.records_sha256 == shard.records_sha256
    )


def _index_shard(
    shard: Shard,
    kind: IdentityKind,
    width: int,
    storage_options: Mapping[str, Any] | None,
    advance: Callable[[int], None],
) -> None:
    from recordkeeper import formats
    from recordkeeper.progress import ProgressReader
    from recordkeeper.tfrecord import source_size

    builder = RecordIndexBuilder(kind, width)
    raw = open_read(shard.uri, storage_options)
    reader = ProgressReader(raw, advance)
    try:
        records = formats.get(shard.format).iter_records(
            reader, shard.compression, size=source_size(raw)
        )
        builder.add_many(records)
    finally:
        reader.close()
    if builder.count != shard.record_count:
        raise InvalidIndex(
            f"{shard.uri} holds {builder.count} records, registered {shard.record_count}"
        )
    write_index(shard.uri, builder.finish(shard.records_sha256), storage_options)


def _chunks(
    shard: Shard, kind: str, width: int, chunk_records: int, storage_options: Mapping[str, Any]
) -> Iterator[bytes]:
    """The body of a shard's index, streamed (opened on first use, closed when done)."""
    uri = index_uri(shard.uri)
    with open_read(uri, storage_options) as fh:
        header, chunks = index_chunks(fh.read, chunk_records)
        if not _matches(header, shard, kind, width):
            raise InvalidIndex(
                f"{uri} is not the {kind}/{width} index of {shard.uri} (run recordkeeper index)"
            )
        yield from chunks


def _lazy(make: Callable[[], Iterator[bytes]]) -> Iterator[bytes]:
    yield from make()


def chunk_records(streams: int, width: int) -> int:
    """Identities per chunk when ``streams`` index streams are merged at once: the merge's
    chunk budget shared out, at least 256 (a chunk per stream is what a merge holds)."""
    return max(256, _CHUNK_BUDGET // max(1, streams * width))


def _streams(
    version: DatasetVersion,
    kind: str,
    width: int,
    splits: Iterable[str] | None = None,
    shard_count: int | None = None,
) -> list[tuple[str, Iterator[bytes]]]:
    wanted = None if splits is None else set(splits)
    shards = [s for s in version.shards if wanted is None or s.split in wanted]
    return index_streams(shards, kind, width, version.storage_options, shard_count)


def index_streams(
    shards: Sequence[Shard],
    kind: str,
    width: int,
    storage_options: Mapping[str, Any] | None,
    shard_count: int | None = None,
) -> list[tuple[str, Iterator[bytes]]]:
    """``(split, chunks)`` of each shard's stored index, streamed (opened as a merge asks;
    :class:`InvalidIndex` when one is not the ``kind``/``width`` index of its shard)."""
    per = chunk_records(shard_count or len(shards), width)
    options = dict(storage_options or {})
    streams = [
        (s.split, _lazy(lambda s=s: _chunks(s, kind, width, per, options)))  # type: ignore[misc]
        for s in shards
    ]
    return _opened_together(streams, [s.uri for s in shards])


_OPENERS = 16  # index objects opened at once on an object store


def _opened_together(
    streams: list[tuple[str, Iterator[bytes]]], uris: Sequence[str]
) -> list[tuple[str, Iterator[bytes]]]:
    """Open the streams of indexes on object stores and read their first chunk concurrently.

    A merge starts by pulling every stream's first chunk; one by one, that is a round trip
    (open, first ranged read) per shard index — 2,000 round trips for two versions of 1,000
    shards.  Here they overlap, ``_OPENERS`` at a time (an index under the store's 8 MiB read
    block then arrives whole with its first read).  Local files are opened as the merge asks.
    """
    remote = [i for i, uri in enumerate(uris) if not profile_of(uri).local]
    if len(remote) < 2:
        return streams
    with ThreadPoolExecutor(max_workers=min(_OPENERS, len(remote))) as pool:
        firsts = list(pool.map(lambda i: next(streams[i][1], None), remote))
    out = list(streams)
    for i, first in zip(remote, firsts, strict=True):
        tag, rest = out[i]
        out[i] = (tag, itertools.chain(() if first is None else (first,), rest))
    return out


def index_version(
    http: HttpCore,
    version: DatasetVersion,
    *,
    kind: IdentityKind = "bytes",
    width: int = DEFAULT_WIDTH,
    progress: bool | ProgressLike | None = None,
    register: bool = True,
) -> dict[str, Any]:
    """Index every shard of ``version`` (skipping shards indexed already), compute its split
    set digests from the indexes and register them; returns the service's answer (the
    ``records_digest``), or with ``register=False`` the split digests only."""
    kind, width = validate_identity(kind, width)
    version.ensure_readable()
    _check_split_count(version)  # before any shard is read
    options = dict(version.storage_options)
    todo = [
        s
        for s in version.shards
        if not _matches(_header(index_uri(s.uri), options), s, kind, width)
    ]
    total = sum(s.size for s in todo)
    with byte_progress(f"indexing {version.name}", total, progress) as advance:
        for shard in todo:
            _index_shard(shard, kind, width, options, advance)
    digests = split_digests(version, kind, width)
    return register_record_set(http, version, digests, register=register)


def split_digests(
    version: DatasetVersion,
    kind: IdentityKind = "bytes",
    width: int = DEFAULT_WIDTH,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, SetDigest]:
    """The set digest of each split of ``version`` from its shards' stored indexes (a
    streaming merge: no shard read, memory one chunk per shard), merged in C when built
    (``_speedups.record_merge_stream``).  :class:`StorageError` when a shard's index is
    missing, :class:`InvalidIndex` when it is not the ``kind``/``width`` index of that shard
    (or is damaged)."""
    from recordkeeper import _native

    fast = getattr(_native.speedups, "record_merge_stream", None)
    if storage_options is not None:
        version = version.with_storage_options(storage_options or None)
    digests: dict[str, SetDigest] = {s: SetDigest(kind, width) for s in version.splits}
    if fast is None:
        for batch in merge_sorted(_streams(version, kind, width), width):
            for split, items in batch.items():
                digests[split].update_sorted(items)
        return digests
    for split, digest in digests.items():
        streams = [chunks for _, chunks in _streams(version, kind, width, [split])]
        fast(streams, width, digest.update_sorted_body, 2**20)
    return digests


def _check_split_count(version: DatasetVersion) -> None:
    if len(version.splits) > MAX_RECORD_SET_SPLITS:
        raise InvalidRequest(
            f"{version.name} has {len(version.splits):,} splits: record identity covers "
            f"versions of at most {MAX_RECORD_SET_SPLITS:,} splits"
        )


def register_record_set(
    http: HttpCore,
    version: DatasetVersion,
    digests: Mapping[str, SetDigest],
    *,
    register: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    indexes: Mapping[str, bytes] | None = None,
) -> dict[str, Any]:
    """Register a version's split set digests (``PUT /versions/{ref}/record-sets``) once each
    of its shards has its index stored beside it: what ``recordkeeper index`` does last, and
    the writer, publish and deep verify do after indexing inline.  With ``register=False``
    the body only.  ``indexes``: the stored indexes the caller still holds (shard URI ->
    bytes), which the version's lookup is built from without reading them back."""
    _check_split_count(version)  # before the lookup is built
    first = next(iter(digests.values()), None)
    kind, width = (first.kind, first.width) if first else ("bytes", DEFAULT_WIDTH)
    splits = [
        {"split": s, "records": d.count, "digest": format_digest(d.hexdigest())}
        for s, d in sorted(digests.items())
    ]
    # record → shards (which-checkpoints)
    build_version_lookup(version, kind, width, storage_options, indexes=indexes)
    body = {
        "kind": kind,
        "width": width,
        "index_format": FORMAT_VERSION,
        "splits": splits,
        "index_location": INDEX_LOCATION,
    }
    if not register:
        return body
    path = f"/versions/{quote_segment(version.name)}/record-sets"
    answer: dict[str, Any] = http.api("PUT", path, json=body)
    return answer


def register_committed(
    http: HttpCore,
    version: DatasetVersion,
    digests: Mapping[str, SetDigest],
    *,
    storage_options: Mapping[str, Any] | None = None,
    indexes: Mapping[str, bytes] | None = None,
) -> dict[str, Any] | None:
    """:func:`register_record_set` right after a commit that has succeeded (the writer,
    ``derive``, ``publish``, a distributed commit): best effort, as the sample records are.  A
    refusal warns (:class:`~recordkeeper.core.errors.NotStoredWarning`) and answers None, so
    the committed version is still returned; ``recordkeeper index`` registers it later.
    ``indexes``: as :func:`register_record_set` takes them."""
    try:
        return register_record_set(
            http, version, digests, storage_options=storage_options, indexes=indexes
        )
    except RecordkeeperError as exc:
        warnings.warn(
            f"{version.name} is committed, but its record identity was not registered: {exc}",
            NotStoredWarning,
            stacklevel=3,
        )
        return None


def record_sets(http: HttpCore, ref: str) -> list[dict[str, Any]]:
    """The record identities registered for a version (empty: not indexed yet)."""
    answer = http.api("GET", f"/versions/{quote_segment(ref)}/record-sets")
    data: list[dict[str, Any]] = answer["data"]
    return data


def is_registered(
    http: HttpCore,
    version: DatasetVersion,
    storage_options: Mapping[str, Any] | None = None,
    kind: IdentityKind = "bytes",
    width: int = DEFAULT_WIDTH,
) -> bool:
    """Whether ``version``'s record identity (``kind``/``width``) is registered and its record
    lookup stored: a deep verify that found every shard index matching its records then has
    nothing to register again (the digests and the lookup were built from those indexes)."""
    if not any((e["kind"], e["width"]) == (kind, width) for e in record_sets(http, version.name)):
        return False
    options = dict(version.storage_options if storage_options is None else storage_options)
    try:
        stat_object(lookup_uri(version), options)
    except StorageError:
        return False
    return True


def _require_indexed(http: HttpCore, version: DatasetVersion, kind: str, width: int) -> None:
    for entry in record_sets(http, version.name):
        if (entry["kind"], entry["width"]) == (kind, width):
            return
    raise InvalidRequest(
        f"{version.name} has no {kind}/{width} record identity yet: run "
        f"`recordkeeper index {version.name}` first"
    )


def record_diff(
    http: HttpCore,
    a: DatasetVersion,
    b: DatasetVersion,
    *,
    kind: IdentityKind = "bytes",
    width: int = DEFAULT_WIDTH,
    sample: int = DEFAULT_SAMPLE,
    emit: Emit | None = None,
) -> RecordDiff:
    """The record-level diff of ``a`` → ``b`` from their indexes (both must be indexed)."""
    validate_sample(sample)  # before any index is opened
    for v in (a, b):
        _require_indexed(http, v, kind, width)
    from recordkeeper import _native

    count = len(a.shards) + len(b.shards)
    fast = getattr(_native.speedups, "record_diff_stream", None)
    return diff_records(
        _streams(a, kind, width, shard_count=count),
        _streams(b, kind, width, shard_count=count),
        width,
        sample=sample,
        emit=emit,
        native=fast,
    )


def check_leakage(
    http: HttpCore,
    version: DatasetVersion,
    against: Sequence[DatasetVersion] = (),
    *,
    kind: IdentityKind = "bytes",
    width: int = DEFAULT_WIDTH,
    training: Callable[[str], bool] = is_training_split,
    sample: int = DEFAULT_SAMPLE,
) -> list[LeakPair]:
    """Records of ``version``'s evaluation splits found in its other splits and in the
    training splits of each version of ``against`` (see
    :func:`recordkeeper.core.record_diff.leakage`).  Splits are training splits when
    ``training(name)`` is true (default: ``train`` and ``train…``)."""
    validate_sample(sample)  # before any index is opened
    for v in (version, *against):
        _require_indexed(http, v, kind, width)
    pairs = leakage_pairs(
        version.name,
        version.splits,
        [(other.name, other.splits) for other in against],
        training=training,
    )
    needed: dict[str, set[str]] = {}
    for (r1, s1), (r2, s2) in pairs:
        needed.setdefault(r1, set()).add(s1)
        needed.setdefault(r2, set()).add(s2)
    by_name = {v.name: v for v in (version, *against)}
    count = sum(len(by_name[r].shards) for r in needed)
    sources: list[tuple[tuple[str, str], Iterator[bytes]]] = []
    for ref, splits in needed.items():
        for split, chunks in _streams(by_name[ref], kind, width, splits, count):
            sources.append(((ref, split), chunks))
    from recordkeeper import _native

    fast = getattr(_native.speedups, "record_leakage_stream", None)
    return leakage(sources, pairs, width, sample=sample, native=fast)


def staged_leakage(
    name: str,
    sources: Sequence[tuple[str, Iterator[bytes]]],
    width: int = DEFAULT_WIDTH,
    *,
    training: Callable[[str], bool] = is_training_split,
    sample: int = DEFAULT_SAMPLE,
) -> list[LeakPair]:
    """The leakage check of one version's own splits (each evaluation split against each
    other split, the pairs :func:`check_leakage` checks) from ``(split, chunks)`` sources of
    sorted identities: the indexes a writer or publish holds in memory, or the stored indexes
    (:func:`index_streams`) before a commit — no shard read."""
    splits = list(dict.fromkeys(split for split, _ in sources))
    pairs = leakage_pairs(name, splits, training=training)
    from recordkeeper import _native

    fast = getattr(_native.speedups, "record_leakage_stream", None)
    tagged = [((name, split), chunks) for split, chunks in sources]
    return leakage(tagged, pairs, width, sample=sample, native=fast)

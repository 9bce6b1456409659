"""Publishing shards that already exist as a new version.

Steps: check the shard URIs against the service's allowed roots (before any reading), stage a
version, read every shard once — in parallel across shards, hashing, counting records,
checking every record CRC and inferring the schema in the same pass
(the format's scan, :mod:`recordkeeper.formats`: TFRecord, ArrayRecord and Riegeli files are
told apart by their first bytes) — then register the shards with their storage identity and
commit.  Any failure abandons the staged version and deletes copies already made.

Copying (``copy_to``) reads every shard twice: a first pass hashes, which gives the content
digest before anything is staged; the version is then staged with that digest
(``content_digest=``, the number reserved), so a committed duplicate is found before a byte is
copied and takes no number, and the copies go under the committed name,
``{root}/{dataset}/{dataset}_{date}_v{N}[_{desc}]/{split}-NNNNN-of-NNNNN.tfrecord[.gz]``, hashed
again while they are copied (files that changed in between are refused, reason ``changed``).

Identical content (same ``content_digest``) returns the existing version with a
:class:`~recordkeeper.client.DuplicateWarning` unless ``force_new=True``.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, cast

from recordkeeper import formats, local_files
from recordkeeper._collector import older_objects_frozen
from recordkeeper._parallel import parallel_map, use_processes
from recordkeeper.backends.local import stat_file
from recordkeeper.core.errors import (
    CorruptShard,
    InvalidShard,
    NotStoredWarning,
    RecordkeeperError,
    StorageError,
    StorageRootNotAllowed,
)
from recordkeeper.core.manifest import ManifestEntry, content_digest
from recordkeeper.core.record_sample import SAMPLE_RECORDS
from recordkeeper.core.roots import AllowedRoots
from recordkeeper.core.shards import Compression, ShardRecord
from recordkeeper.dataset import Dataset, ShardFile
from recordkeeper.file_kinds import describe_bytes
from recordkeeper.leakage import Sources, commit_check, memory_sources
from recordkeeper.object_batches import (
    can_write_small_many,
    listing_or_nothing,
    read_small_many,
    stat_many,
    write_small_many,
)
from recordkeeper.progress import ProgressLike, ProgressReader, byte_progress
from recordkeeper.provenance import build_provenance
from recordkeeper.record_ids import RecordIds, index_uri, split_digest, write_indexes
from recordkeeper.record_sets import register_committed
from recordkeeper.samples import sample_committed
from recordkeeper.shard_names import final_shard_uri
from recordkeeper.storage import (
    ObjectStat,
    discard_upload,
    open_read,
    open_write,
    profile_of,
    remove,
    stat_object,
    storage_errors,
    to_uri,
    url_to_fs,
)
from recordkeeper.values import DatasetVersion

if TYPE_CHECKING:
    from recordkeeper.registry import Registry
    from recordkeeper.streaming import ShardStats

__all__ = [
    "check_allowed",
    "copy_target",
    "detect_file_compression",
    "detect_file_format",
    "publish",
    "scan_bytes",
    "scan_file",
]


class _Prefixed:
    """A reader that yields ``head`` (already read) before the rest of ``raw``.

    The first ``read(size)`` answers ``head`` and what follows it in one piece (up to
    ``size``), not ``head`` alone: a shard the scan reads in one piece is hashed in the
    calling thread (:class:`~recordkeeper.streaming.Worker` starts its thread with a second
    piece), where a separate 64-byte head made every small shard start and stop a thread.
    """

    def __init__(self, head: bytes, raw: IO[bytes]) -> None:
        self._head = head
        self._raw = raw

    def read(self, size: int = -1) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            if size < 0:
                return head + self._raw.read()
            if size <= len(head):
                data, self._head = head[:size], head[size:]
                return data
            return head + self._raw.read(size - len(head))
        return self._raw.read(size)

    def close(self) -> None:
        self._raw.close()


_HEAD = 64  # first bytes read to tell the format (the Riegeli signature is 64 bytes)


def detect_file_format(uri: str, storage_options: Mapping[str, Any] | None) -> tuple[str, str]:
    """``(format, compression)`` of a record file from its first 64 bytes (``CorruptShard``
    naming what it looks like if no format claims it)."""
    with open_read(uri, storage_options) as fh, storage_errors(uri):
        head = fh.read(_HEAD)
    return _format_of(uri, head)


def detect_file_compression(uri: str, storage_options: Mapping[str, Any] | None) -> str:
    """The compression of a record file, from its first 64 bytes (``CorruptShard`` if none)."""
    return detect_file_format(uri, storage_options)[1]


def _format_of(uri: str, head: bytes) -> tuple[str, str]:
    found = formats.detect(head)
    if found is None:
        kind = describe_bytes(head)
        raise CorruptShard(
            f"{uri} is not a TFRecord file: it looks like {kind.description} (neither a valid "
            "record header nor a gzip/zlib stream at its start, nor a Riegeli/ArrayRecord "
            "file signature)",
            uri=uri,
            offset=0,
            looks_like=kind.kind,
        )
    return found


def scan_file(
    shard: ShardFile,
    storage_options: Mapping[str, Any] | None,
    *,
    dest: str | None = None,
    dest_options: Mapping[str, Any] | None = None,
    advance: Callable[[int], None] | None = None,
    before: ObjectStat | None = None,
    record_ids: RecordIds | None = None,
) -> dict[str, Any]:
    """Read one shard once: stats + schema, optionally copied to ``dest``; with
    ``record_ids``, every record's identity as the scan checks it.

    Returns the REST shard registration (URI is ``dest`` when copying).
    """
    if before is None:
        before = stat_object(shard.uri, storage_options)
    raw: Any = open_read(shard.uri, storage_options, size=before.size)
    compression, fmt = shard.compression, shard.format
    if compression is None or fmt is None:  # detect from the first bytes of the one read
        with storage_errors(shard.uri):
            head = raw.read(_HEAD)
        fmt, detected = _format_of(shard.uri, head)
        compression = compression if fmt == "tfrecord" and compression else detected
        raw = _Prefixed(head, raw)
    sink = open_write(dest, dest_options) if dest else None
    try:
        with storage_errors(shard.uri):
            reader = ProgressReader(raw, advance, sink)
            stats = formats.get(fmt).scan(
                reader, compression, size=before.size, record_ids=record_ids
            )
        if sink is not None:
            with storage_errors(dest or ""):
                sink.close()
    except BaseException:
        if sink is not None:
            discard_upload(sink)
            with contextlib.suppress(Exception):
                remove(dest or "", dest_options)
        raise
    finally:
        raw.close()
    _check_expected(shard, stats)
    if dest is None:
        after = stat_object(shard.uri, storage_options)
        if after.identity != before.identity or after.size != stats.size:
            raise StorageError(
                f"{shard.uri} changed while it was being read; publish again when writers "
                "have finished",
                uri=shard.uri,
                reason="changed",
            )
        uri, identity = shard.uri, after.identity
    else:
        copied = stat_object(dest, dest_options)
        uri, identity = dest, copied.identity
    return _registration(shard, stats, compression, uri, identity)


def scan_bytes(
    shard: ShardFile, data: bytes, stat: ObjectStat, record_ids: RecordIds | None = None
) -> dict[str, Any]:
    """:func:`scan_file` for a shard already read whole, with the identity of what was read."""
    stats, compression = _scan_whole(shard, data, record_ids)
    return _registration(shard, stats, compression, shard.uri, stat.identity)


def _scan_whole(
    shard: ShardFile, data: bytes, record_ids: RecordIds | None = None
) -> tuple[ShardStats, str]:
    """The stats and compression of a shard read whole (in one piece: hashed in this thread;
    with ``record_ids``, every record's identity too)."""
    compression, fmt = shard.compression, shard.format
    if compression is None or fmt is None:
        fmt, detected = _format_of(shard.uri, data[:_HEAD])
        compression = compression if fmt == "tfrecord" and compression else detected
    with storage_errors(shard.uri):
        stats = formats.get(fmt).scan_whole(data, compression, record_ids=record_ids)
    _check_expected(shard, stats)
    return stats, compression


def _check_expected(shard: ShardFile, stats: ShardStats) -> None:
    if shard.expected_records is not None and stats.record_count != shard.expected_records:
        raise InvalidShard(
            f"{shard.uri}: the dataset's manifest says {shard.name} holds "
            f"{shard.expected_records} records, the file holds {stats.record_count}",
            uri=shard.uri,
        )


def _registration(
    shard: ShardFile, stats: ShardStats, compression: str, uri: str, identity: dict[str, Any]
) -> dict[str, Any]:
    """The REST shard registration of a scanned shard stored at ``uri``."""
    record = ShardRecord(
        split=shard.split,
        index=shard.index,
        count=shard.count,
        uri=uri,
        compression=cast(Compression, compression),  # the service checks it (invalid_shard)
        size=stats.size,
        sha256=stats.sha256,
        crc32c=stats.crc32c,
        records_sha256=stats.records_sha256,
        record_count=stats.record_count,
        format=stats.format,
        storage_identity=identity,
    )
    return record.to_wire(schema=stats.schema.to_dict() if stats.schema is not None else None)


@dataclass(frozen=True)
class _Failure:
    """A recordkeeper error carried back from a worker process with its code and extras."""

    cls: type[RecordkeeperError]
    detail: str
    extra: dict[str, Any]


def _scan_in_worker(
    shard: ShardFile,
    storage_options: Mapping[str, Any] | None,
    dest: str | None,
    before: ObjectStat,
    advance: Callable[[int], None] | None,
    record_index: bool = False,
) -> dict[str, Any] | _Failure:
    try:
        ids = RecordIds() if record_index else None
        registration = scan_file(
            shard,
            storage_options,
            dest=dest,
            dest_options=storage_options,
            advance=advance,
            before=before,
            record_ids=ids,
        )
        return _with_index(registration, ids)
    except RecordkeeperError as exc:
        # Pickling would drop ``extra`` (offset, reason): send the parts instead.
        return _Failure(type(exc), exc.detail, dict(exc.extra))


#: where a scan's registration carries the shard's record index until publish stores it
_RECORD_INDEX = "_record_index"


def _with_index(registration: dict[str, Any], ids: RecordIds | None) -> dict[str, Any]:
    if ids is not None:
        registration[_RECORD_INDEX] = ids.finish(str(registration["records_sha256"]))
    return registration


def _store_record_identity(
    registry: Registry,
    version: DatasetVersion,
    indexes: Mapping[str, bytes],
    splits: Mapping[str, str],
    options: Mapping[str, Any] | None,
) -> None:
    """After commit: each shard's index (``indexes`` by shard URI) beside it, then the split
    set digests registered (``splits``: shard URI -> split) as ``recordkeeper index`` does.

    Best effort, as the sample is: files published in place may lie where nothing can be
    written; the version is committed, so that warns instead of failing the publish that
    committed it (``recordkeeper index`` gives it record identity once they can be written)."""
    try:
        _write_indexes(indexes, options)
    except StorageError as exc:
        warnings.warn(
            f"{version.name} is committed, but its record indexes could not be stored beside "
            f"its shards, so its record identity was not registered: {exc}",
            NotStoredWarning,
            stacklevel=3,
        )
        return
    by_split: dict[str, list[bytes]] = {}
    for uri, data in indexes.items():
        by_split.setdefault(splits[uri], []).append(data)
    digests = {split: split_digest(found) for split, found in by_split.items()}
    # the lookup is built from the indexes held here, not read back one file each
    register_committed(registry.http, version, digests, storage_options=options, indexes=indexes)


#: index objects written at once on an object store (the client's small-object concurrency)
_INDEX_WRITES = 16


def _write_indexes(indexes: Mapping[str, bytes], options: Mapping[str, Any] | None) -> None:
    """:func:`~recordkeeper.record_ids.write_indexes`, except that indexes on a backend that
    writes an object in one request (S3) are written concurrently on the filesystem's event
    loop (:func:`~recordkeeper.object_batches.write_small_many`: one ``PUT`` each, 16 at a
    time, the request an upload stream sends for a small object) instead of one upload
    stream after another (1,000 indexes: 3.9 s of a 7.5 s publish to S3); the first failure
    is raised once all have been tried."""
    items = [(index_uri(uri), data) for uri, data in indexes.items()]
    if len(items) > 1 and can_write_small_many([u for u, _ in items], options):
        for written in write_small_many(items, options, concurrency=_INDEX_WRITES):
            if isinstance(written, StorageError):
                raise written
        return
    write_indexes(indexes, options)


def check_allowed(uris: list[str], allowed_roots: list[str]) -> None:
    """Raise :class:`StorageRootNotAllowed` early for URIs outside the service's roots.

    The same check the service makes (:meth:`~recordkeeper.core.roots.AllowedRoots.allows`):
    a URI with ``..`` segments, or otherwise malformed, is outside every root.
    """
    allowed = AllowedRoots.of(allowed_roots)
    roots = list(allowed.roots)
    outside = [u for u in uris if not allowed.allows(u)]
    if outside and roots:
        raise StorageRootNotAllowed(
            f"{len(outside)} shard(s) live outside the service's allowed roots "
            f"({', '.join(roots)}), e.g. {outside[0]}; publish with copy_to=True (CLI: --copy) "
            "to copy them under the service's storage root, copy_to=<an allowed root>, "
            "or ask the operator to add the location to RECORDKEEPER_ALLOWED_ROOTS",
            allowed_roots=roots,
        )


def copy_target(info: Mapping[str, Any], uris: list[str], copy_to: str | bool | None) -> str | None:
    """Where publishing puts the shards at ``uris``, given the service's ``/info``: None to
    register them in place (each must lie in an allowed root, else
    :class:`StorageRootNotAllowed` before anything is read), or the root to copy them under
    (``copy_to=True``: the service's storage root)."""
    if copy_to is True:
        return str(info["storage_root"])
    if copy_to is None or copy_to is False:
        roots = list(info.get("allowed_roots") or [])
        check_allowed(uris, roots)
        real = local_files.real_roots(roots)
        real_dirs: dict[str, str] = {}  # each directory resolved once
        for uri in uris:  # in place on local disk: the file itself, no link out of the roots
            if profile_of(uri).local:
                local_files.check_in_place(local_files.local_path(to_uri(uri)), real, real_dirs)
        return None
    return to_uri(copy_to)


#: shards up to this size, published in place from S3, are read whole in one request
SMALL_SHARD_BYTES = 2**20
_SMALL_BATCH_BYTES = 32 * 2**20  # read this much (at most) while the previous batch is scanned
_SMALL_BATCH_SHARDS = 256


def _small_shards(shards: list[ShardFile], options: Mapping[str, Any] | None) -> dict[int, int]:
    """Index → listed size of the shards small enough to read whole, when they all live on one
    backend whose profile lists prefixes and reads an object with its identity in one request
    (S3); else none."""
    uris = [to_uri(s.uri) for s in shards]
    profile = profile_of(uris[0])
    if (
        len(uris) < profile.listing_min_objects
        or not (profile.lists_prefixes and profile.batch_reads)
        or any(profile_of(u) is not profile for u in uris)
    ):
        return {}
    listed = listing_or_nothing(uris, options)
    return {
        i: listed[u].size
        for i, u in enumerate(uris)
        if u in listed and listed[u].size <= SMALL_SHARD_BYTES
    }


def _read_small(
    shards: list[ShardFile],
    small: Mapping[int, int],
    options: Mapping[str, Any] | None,
    advance: Callable[[int], None],
    concurrency: int,
    record_index: bool = False,
) -> dict[int, dict[str, Any]]:
    """Registrations of the small shards: each read whole by one request that also answers
    its identity (S3: one ``GET``), so bytes and identity are of one object version, then
    scanned in memory.  The next batch downloads (on the filesystem's event loop) while this
    one is scanned."""
    batches = _batches(small)

    def fetch(batch: list[int]) -> list[tuple[bytes, ObjectStat] | StorageError]:
        return read_small_many([shards[i].uri for i in batch], options, concurrency=concurrency)

    out: dict[int, dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="recordkeeper-fetch") as reader:
        pending = reader.submit(fetch, batches[0])
        for n, batch in enumerate(batches):
            fetched = pending.result()
            if n + 1 < len(batches):
                pending = reader.submit(fetch, batches[n + 1])
            for i, got in zip(batch, fetched, strict=True):
                if isinstance(got, StorageError):
                    raise got
                data, stat = got
                ids = RecordIds() if record_index else None
                out[i] = _with_index(scan_bytes(shards[i], data, stat, ids), ids)
                advance(len(data))
    return out


#: local shards up to this size, published in place, are read whole and scanned in the calling
#: thread: for a few KiB, a thread pool's hand-offs and fsspec's per-file work cost more than
#: reading and hashing the file
LOCAL_INLINE_BYTES = 64 * 2**10


def _read_local_inline(
    shards: list[ShardFile],
    small: list[int],
    befores: Mapping[int, ObjectStat],
    advance: Callable[[int], None],
    record_index: bool = False,
) -> dict[int, dict[str, Any]]:
    """Registrations of small local shards published in place: each file read whole in one
    ``read``, scanned in memory (one piece: hashed in this thread, no worker thread), its
    identity taken again after the read (a change in between is ``changed``)."""
    out: dict[int, dict[str, Any]] = {}
    for i in small:
        shard, before = shards[i], befores[i]
        uri = to_uri(shard.uri)
        path = local_files.local_path(uri)
        with storage_errors(shard.uri):
            with open(path, "rb") as fh:
                data = fh.read()
            after = stat_file(uri, path)
        if after.identity != before.identity or after.size != len(data):
            raise StorageError(
                f"{shard.uri} changed while it was being read; publish again when writers "
                "have finished",
                uri=shard.uri,
                reason="changed",
            )
        ids = RecordIds() if record_index else None
        out[i] = _with_index(scan_bytes(shard, data, after, ids), ids)
        advance(len(data))
    return out


def _small_copies(
    shards: list[ShardFile],
    sizes: Mapping[int, int],
    dests: list[str | None],
    options: Mapping[str, Any] | None,
) -> dict[int, int]:
    """Index → size of the shards to copy whole, one request each (:func:`_copy_small`): small
    ones going to a backend that writes an object in one request answering its identity
    (S3), read from local files or from a backend with one-request reads."""
    small = {
        i: size for i, size in sizes.items() if size <= SMALL_SHARD_BYTES and dests[i] is not None
    }
    if not small:
        return {}
    if not can_write_small_many([str(dests[i]) for i in small], options):
        return {}
    return {
        i: size
        for i, size in small.items()
        if profile_of(to_uri(shards[i].uri)).local or profile_of(to_uri(shards[i].uri)).batch_reads
    }


def _copy_small(
    shards: list[ShardFile],
    small: Mapping[int, int],
    dests: list[str | None],
    options: Mapping[str, Any] | None,
    advance: Callable[[int], None],
    concurrency: int,
    record_index: bool = False,
) -> dict[int, dict[str, Any]]:
    """Registrations of small shards copied whole: each source read whole (a local file in
    one ``read``, a remote one in one request), scanned in memory in this thread (one piece:
    no hashing thread), then written in one request per object on the destination's event
    loop (S3: one ``PUT`` whose answer is the identity registered: no ``HEAD`` after it)."""
    out: dict[int, dict[str, Any]] = {}
    for batch in _batches(small):
        local = [i for i in batch if profile_of(to_uri(shards[i].uri)).local]
        remote = [i for i in batch if not profile_of(to_uri(shards[i].uri)).local]
        data: dict[int, bytes] = {}
        for i in local:
            path = local_files.local_path(to_uri(shards[i].uri))
            with storage_errors(shards[i].uri), open(path, "rb") as fh:
                data[i] = fh.read()
        if remote:
            fetched = read_small_many([shards[i].uri for i in remote], options)
            for i, got in zip(remote, fetched, strict=True):
                if isinstance(got, StorageError):
                    raise got
                data[i] = got[0]
        ids = {i: RecordIds() if record_index else None for i in batch}
        scanned = {i: _scan_whole(shards[i], data[i], ids[i]) for i in batch}
        written = write_small_many(
            [(str(dests[i]), data[i]) for i in batch], options, concurrency=concurrency
        )
        for i, stat in zip(batch, written, strict=True):
            if isinstance(stat, StorageError):
                raise stat
            stats, compression = scanned[i]
            registration = _registration(
                shards[i], stats, compression, str(dests[i]), stat.identity
            )
            out[i] = _with_index(registration, ids[i])
            advance(len(data[i]))
    return out


def _batches(sizes: Mapping[int, int]) -> list[list[int]]:
    """The indexes of ``sizes`` in order, in batches of at most 32 MiB or 256 shards."""
    batches: list[list[int]] = [[]]
    size = 0
    for i in sorted(sizes):
        if batches[-1] and (
            size + sizes[i] > _SMALL_BATCH_BYTES or len(batches[-1]) >= _SMALL_BATCH_SHARDS
        ):
            batches.append([])
            size = 0
        batches[-1].append(i)
        size += sizes[i]
    return batches


def _digest_of(registrations: list[dict[str, Any]]) -> str:
    """The content digest the service will compute for these shard registrations."""
    return content_digest(
        ManifestEntry(
            str(r["split"]),
            int(r["index"]),
            int(r["count"]),
            str(r["records_sha256"]),
            int(r["record_count"]),
        )
        for r in registrations
    )


@older_objects_frozen()  # thousands of small shards: collections skip the older objects
def publish(
    registry: Registry,
    dataset: Dataset,
    *,
    desc: str | None = None,
    copy_to: str | bool | None = None,
    force_new: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    date: str | datetime.date | None = None,
    max_workers: int | None = None,
    progress: bool | ProgressLike | None = None,
    parents: Iterable[Any] | Mapping[str, str] | None = None,
    sources: Iterable[Any] | None = None,
    params: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    code: Any = "auto",
    note: str | None = None,
    hash_sources: bool = False,
    provenance: Mapping[str, Any] | None = None,
    record_index: bool = True,
    sample_records: int = SAMPLE_RECORDS,
) -> DatasetVersion:
    """Register ``dataset``'s shards in place, or copied under ``copy_to``, as a new version.

    ``copy_to=True`` copies under the service's default storage root.  ``parents``,
    ``sources`` (``hash_sources``: read whole for a sha256 identity), ``params``, ``code`` and
    ``note`` record where the version came from (see
    :func:`recordkeeper.provenance.build_provenance`; or pass a whole ``provenance``
    document); they are checked before any shard is read.  When the content equals an
    existing version's, that version is kept with its own provenance.
    ``record_index``: each record's identity is computed by the scan that hashes and checks
    it, each shard's record index stored beside it and the version's record identity
    registered after commit (docs/record-identity.md), as ``recordkeeper index`` would.
    ``sample_records``: the first records of each split (read from its first shard) are sent
    decoded as the version's sample after commit (:mod:`recordkeeper.samples`; 0: none).
    """
    options = (
        storage_options
        if storage_options is not None
        else dataset.storage_options
        if dataset.storage_options is not None
        else registry.storage_options
    )
    shards = dataset.shards
    if not shards:
        raise InvalidShard(f"dataset {dataset.name!r} has no shards")
    document = (
        dict(provenance)
        if provenance is not None
        else build_provenance(
            dataset=dataset.name,
            parents=parents,
            sources=sources,
            params=params,
            code=code,
            note=note,
            storage_options=options,
            hash_sources=hash_sources,
        )
    )
    copy_to = copy_target(registry.info(), [s.uri for s in shards], copy_to)
    url_to_fs(shards[0].uri, options)  # create the filesystem once, outside the threads
    # Small S3 shards published in place are read whole, one request each (see _read_small).
    small = _small_shards(shards, options) if copy_to is None else {}
    streamed = [i for i in range(len(shards)) if i not in small]
    befores: dict[int, ObjectStat] = {}
    stats = stat_many([shards[i].uri for i in streamed], options, concurrency=32)
    for i, stat in zip(streamed, stats, strict=True):
        if isinstance(stat, StorageError):
            raise stat
        befores[i] = stat
    total = sum(small.values()) + sum(b.size for b in befores.values())
    processes = use_processes(total - sum(small.values()), len(streamed))
    cores = max(2, os.cpu_count() or 2)
    remote = any(not profile_of(s.uri).local for s in shards) or (
        copy_to is not None and not profile_of(copy_to).local
    )
    # Threads wait on the network for remote objects: use many; CPU-bound local work: cores.
    workers = max_workers or min(
        max(1, len(streamed)), cores if processes else 32 if remote else cores
    )

    plain_options = dict(options) if options is not None else None

    def scan_all(action: str, dests: list[str | None], index: bool = False) -> list[dict[str, Any]]:
        """Every shard read once (copied to ``dests[i]`` when set): their registrations
        (with ``index``, each carrying its record index)."""
        results: dict[int, dict[str, Any] | _Failure] = {}
        copied_whole = _small_copies(shards, {i: befores[i].size for i in streamed}, dests, options)
        inline = [
            i
            for i in streamed
            if dests[i] is None
            and befores[i].size <= LOCAL_INLINE_BYTES
            and profile_of(to_uri(shards[i].uri)).local
        ]
        elsewhere = set(inline) | set(copied_whole)
        rest = [i for i in streamed if i not in elsewhere]
        with byte_progress(f"{action} {dataset.name}", total, progress) as advance:
            if small:
                results.update(
                    _read_small(shards, small, options, advance, max_workers or 16, index)
                )
            if inline:
                results.update(_read_local_inline(shards, inline, befores, advance, index))
            if copied_whole:
                results.update(
                    _copy_small(
                        shards, copied_whole, dests, options, advance, max_workers or 16, index
                    )
                )
            scanned = (
                []
                if not rest
                else parallel_map(
                    _scan_in_worker,
                    [
                        (
                            shards[i],
                            plain_options,
                            dests[i],
                            befores[i],
                            None if processes else advance,
                            index,
                        )
                        for i in rest
                    ],
                    workers=min(workers, max(1, len(rest))),
                    processes=processes,
                    on_result=(
                        (lambda k, r: advance(befores[rest[k]].size)) if processes else None
                    ),
                )
            )
            results.update(zip(rest, scanned, strict=True))
        registrations: list[dict[str, Any]] = []
        for i in range(len(shards)):
            result = results[i]
            if isinstance(result, _Failure):
                raise result.cls(result.detail, **result.extra)
            registrations.append(result)
        return registrations

    declared: str | None = None
    if copy_to is not None:
        # Hash first, copy after the duplicate check: the copies go under the committed name
        # (the number is reserved with the content it is for), and a duplicate takes no number
        # and is not copied at all.  The price is a second read of each source when it is new.
        hashed = scan_all("hash", [None] * len(shards))
        declared = _digest_of(hashed)
        staged = registry.stage(
            dataset.name,
            desc=desc,
            date=date,
            root=copy_to,
            content_digest=declared,
            on_duplicate="commit" if force_new else "use_existing",
            provenance=document,
        )
        if staged.duplicate_of is not None:
            from recordkeeper.registry import DuplicateWarning

            warnings.warn(
                f"the content is identical to {staged.duplicate_of}; keeping that version "
                "(pass force_new=True to publish a new version anyway)",
                DuplicateWarning,
                stacklevel=2,
            )
            return registry.resolve(staged.duplicate_of).with_storage_options(options or None)
    else:
        staged = registry.stage(dataset.name, desc=desc, date=date, provenance=document)
    copies: list[str] = []
    indexes: dict[str, bytes] = {}  # shard URI -> its record index (record_index)
    try:
        dests: list[str | None] = [None] * len(shards)
        if copy_to is not None:
            prefix = staged.storage_prefix
            for i, shard in enumerate(shards):
                # what the first pass found (no second look at each file's first bytes): an
                # ArrayRecord file given as Riegeli is copied as what it is
                comp, fmt = str(hashed[i]["compression"]), str(hashed[i]["format"])
                if (comp, fmt) != (shard.compression, shard.format):
                    shards[i] = ShardFile(
                        shard.split,
                        shard.index,
                        shard.count,
                        shard.uri,
                        comp,
                        shard.expected_records,
                        fmt,
                    )
                dests[i] = final_shard_uri(
                    prefix, shard.split, shard.index, shard.count, compression=comp, format=fmt
                )
            copies = [d for d in dests if d]
        registrations = scan_all("copy" if copy_to else "hash", dests, record_index)
        indexes = {str(r["uri"]): r.pop(_RECORD_INDEX) for r in registrations if _RECORD_INDEX in r}
        if declared is not None and _digest_of(registrations) != declared:
            raise InvalidShard(
                f"the files of {dataset.name} changed while they were published: they hashed "
                f"to {declared} and were copied as {_digest_of(registrations)}; publish again",
                reason="changed",
            )
        registry.register_shards(staged, registrations)
        identities: Callable[[], Sources] | None = None
        if indexes and len(indexes) == len(registrations):  # record identity of every shard
            by_split: dict[str, list[bytes]] = {}
            for r in registrations:
                by_split.setdefault(str(r["split"]), []).append(indexes[str(r["uri"])])
            identities = functools.partial(memory_sources, by_split)
        check = commit_check(registry.http, staged.dataset, staged.name, identities)
        version = registry.finish(staged, force_new=force_new, leakage=check)
    except BaseException:
        with contextlib.suppress(Exception):
            registry.abandon(staged)
        for uri in copies:
            with contextlib.suppress(Exception):
                remove(uri, options)
        raise
    if not version.was_staged_as(staged.name):
        for uri in copies:  # the existing version was kept; the copies are orphans
            with contextlib.suppress(Exception):
                remove(uri, options)
    else:
        if indexes:
            splits = {str(r["uri"]): str(r["split"]) for r in registrations}
            _store_record_identity(registry, version, indexes, splits, options)
        sample_committed(registry, version, records=sample_records, storage_options=options)
    # the version reads storage the way it was published (the registry's options otherwise)
    return version.with_storage_options(options or None)

"""The records behind sampled identities: found in a version's shards and decoded like ``head``.

A record diff or leakage check names records by identity (:mod:`recordkeeper.core.record_diff`
samples them as hex).  :func:`find_records` turns a few identities back into the records, with
bounded work:

1. **Which shard.**  The version's record lookup (``<prefix>/.recordkeeper/records.rklookup``,
   four small reads per identity) names candidate shards when it is of the same kind and width;
   each candidate is confirmed by a binary search of that shard's own index
   (:func:`recordkeeper.core.record_lookup.count_in_index`, range reads).  Without a usable
   lookup, each shard of the split is asked through its index the same way (no shard read).
2. **Read only those shards**, computing every record's identity of the same kind and width
   (:func:`recordkeeper.core.record_identity.record_hasher`) and stopping a shard as soon as
   all the identities it was asked for were seen; progress on stderr as ``index`` shows it.
3. **Decode** each record as ``recordkeeper head`` does
   (:func:`recordkeeper.core.record_sample.record_row`: Example and SequenceExample features,
   other records as a hex prefix).

Each identity gets one row, never an exception: ``{"record": hex, "shard": uri, "position": i,
"size", "kind", "features"}`` when found (``position``: the record's place in its shard, from
0), else ``{"record": hex, "error": why}`` (data deleted, shard or index missing or unreadable,
not in the shard any more).  :func:`decode_diff` and :func:`decode_leakage` fill the samples of
a :class:`~recordkeeper.core.record_diff.RecordDiff` and of
:class:`~recordkeeper.core.record_diff.LeakPair` results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from recordkeeper.core.errors import RecordkeeperError
from recordkeeper.core.record_diff import LeakPair, RecordDiff
from recordkeeper.core.record_identity import DEFAULT_WIDTH, IdentityKind, record_hasher
from recordkeeper.core.record_lookup import HEADER_SIZE as LOOKUP_HEADER_SIZE
from recordkeeper.core.record_lookup import LookupHeader, count_in_index, lookup_candidates
from recordkeeper.core.record_sample import SAMPLE_WIDTH, record_row
from recordkeeper.progress import ProgressReader, byte_progress
from recordkeeper.record_sets import index_uri, lookup_uri
from recordkeeper.storage import open_read, storage_errors
from recordkeeper.values import DatasetVersion, Shard

if TYPE_CHECKING:
    from recordkeeper.progress import ProgressLike

__all__ = ["decode_diff", "decode_leakage", "find_records"]

#: What a failed read of an index, lookup or shard raises on the way here.
_READ_ERRORS = (RecordkeeperError, OSError, ValueError)


def _read_range(fh: Any) -> Callable[[int, int], bytes]:
    def read(offset: int, size: int) -> bytes:
        fh.seek(offset)
        data: bytes = fh.read(size)
        return data

    return read


def _via_lookup(
    version: DatasetVersion,
    shards: Sequence[Shard],
    wanted: Iterable[bytes],
    kind: str,
    width: int,
    options: Mapping[str, Any],
) -> dict[bytes, list[Shard]] | None:
    """Candidate shards (of ``shards``) per identity from the version's record lookup; None
    when it has none of this kind and width (or it cannot be read)."""
    by_sha: dict[str, list[Shard]] = {}
    for shard in shards:
        by_sha.setdefault(shard.sha256, []).append(shard)
    try:
        with open_read(lookup_uri(version), dict(options)) as fh:
            read = _read_range(fh)
            header = LookupHeader.from_bytes(read(0, LOOKUP_HEADER_SIZE))
            if (header.kind, header.width) != (kind, width):
                return None
            return {
                h: [
                    s
                    for _, row in lookup_candidates(read, h)[1]
                    for s in by_sha.get(row.sha256, [])
                ]
                for h in wanted
            }
    except _READ_ERRORS:
        return None


def _locate(
    version: DatasetVersion,
    shards: Sequence[Shard],
    wanted: set[bytes],
    kind: str,
    width: int,
    options: Mapping[str, Any],
) -> tuple[dict[bytes, Shard], dict[bytes, str]]:
    """The shard holding each identity, confirmed in that shard's index (each index opened
    once, closed before the next); the reason for each identity no index confirmed."""
    candidates = _via_lookup(version, shards, wanted, kind, width, options)
    asked: dict[str, tuple[Shard, list[bytes]]] = {}  # shard URI → identities, in shard order
    for shard in shards:
        ids = [h for h in sorted(wanted) if candidates is None or shard in candidates[h]]
        if ids:
            asked.setdefault(shard.uri, (shard, []))[1].extend(ids)
    found: dict[bytes, Shard] = {}
    problems: list[str] = []
    for shard, ids in asked.values():
        todo = [h for h in ids if h not in found]
        if not todo:
            continue
        try:
            with open_read(index_uri(shard.uri), dict(options)) as fh:
                read = _read_range(fh)
                for h in todo:
                    if count_in_index(read, h):
                        found[h] = shard
        except _READ_ERRORS as exc:
            problems.append(f"the index of {shard.uri} cannot be read ({exc})")
        if len(found) == len(wanted):
            break
    why = "; ".join(problems[:2]) or "no shard index of the split holds it"
    return found, {h: why for h in wanted if h not in found}


def find_records(
    version: DatasetVersion,
    split: str,
    identities: Sequence[str | bytes],
    *,
    kind: IdentityKind = "bytes",
    width: int = DEFAULT_WIDTH,
    text_width: int = SAMPLE_WIDTH,
    progress: bool | ProgressLike | None = None,
) -> dict[str, dict[str, Any]]:
    """The records of ``version``'s ``split`` with these identities (hex or bytes, of
    ``kind``/``width``), decoded: hex identity → row (see the module docstring).  Reads the
    shards holding them and nothing else; a record that cannot be read gets an ``error``."""
    wanted = {bytes.fromhex(h) if isinstance(h, str) else bytes(h) for h in identities}
    rows: dict[bytes, dict[str, Any]] = {}
    if not wanted:
        return {}

    def failed(h: bytes, why: str) -> None:
        rows.setdefault(h, {"record": h.hex(), "error": why})

    try:
        version.ensure_readable()
        shards = [s for s in version.split(split).shards if s.record_count]
    except RecordkeeperError as exc:
        return {h.hex(): {"record": h.hex(), "error": str(exc)} for h in sorted(wanted)}
    options = dict(version.storage_options)
    located, missing = _locate(version, shards, wanted, kind, width, options)
    for h, why in missing.items():
        failed(h, why)
    per_shard: dict[str, tuple[Shard, set[bytes]]] = {}
    for h, shard in located.items():
        per_shard.setdefault(shard.uri, (shard, set()))[1].add(h)
    hasher = record_hasher(kind, width)
    total = sum(shard.size for shard, _ in per_shard.values())
    with byte_progress(f"reading sampled records of {version.name}", total, progress) as advance:
        for shard, ids in per_shard.values():
            try:
                _read_shard(shard, ids, hasher, options, advance, text_width, rows)
            except _READ_ERRORS as exc:
                for h in ids:
                    failed(h, f"{shard.uri} cannot be read ({exc})")
            for h in ids:
                failed(h, f"not found in {shard.uri} (the shard changed since it was indexed?)")
    return {h.hex(): rows[h] for h in sorted(wanted)}


def _read_shard(
    shard: Shard,
    ids: set[bytes],
    hasher: Callable[[bytes], bytes],
    options: Mapping[str, Any],
    advance: Callable[[int], None],
    text_width: int,
    rows: dict[bytes, dict[str, Any]],
) -> None:
    """Read ``shard`` until every identity of ``ids`` was seen, decoding each into ``rows``."""
    from recordkeeper import formats

    todo = set(ids)
    with storage_errors(shard.uri):
        raw = open_read(shard.uri, dict(options), size=shard.size)
    reader = ProgressReader(raw, advance)
    try:
        with storage_errors(shard.uri):
            records = formats.get(shard.format).iter_records(
                reader, shard.compression, size=shard.size
            )
            for position, record in enumerate(records):
                h = hasher(bytes(record))
                if h in todo:
                    todo.discard(h)
                    row = record_row(position, bytes(record), width=text_width)
                    rows[h] = {
                        "record": h.hex(),
                        "shard": shard.uri,
                        "position": row.pop("index"),
                        **row,
                    }
                    if not todo:
                        return
    finally:
        reader.close()


def decode_diff(
    result: RecordDiff,
    a: DatasetVersion,
    b: DatasetVersion,
    *,
    kind: IdentityKind = "bytes",
    width: int = DEFAULT_WIDTH,
    progress: bool | ProgressLike | None = None,
) -> RecordDiff:
    """``result`` with each split's sampled records decoded: removed ones read from ``a``,
    added ones from ``b`` (``decoded_removed``, ``decoded_added``, in sample order)."""
    for name, split in sorted(result.splits.items()):
        for version, sample, out in (
            (a, split.sample_removed, split.decoded_removed),
            (b, split.sample_added, split.decoded_added),
        ):
            if sample:
                rows = find_records(
                    version, name, sample, kind=kind, width=width, progress=progress
                )
                out[:] = [rows[h] for h in sample]
    return result


def decode_leakage(
    pairs: Sequence[LeakPair],
    versions: Mapping[str, DatasetVersion],
    *,
    kind: IdentityKind = "bytes",
    width: int = DEFAULT_WIDTH,
    progress: bool | ProgressLike | None = None,
) -> Sequence[LeakPair]:
    """``pairs`` with each sampled leaked record decoded from the evaluation split (``decoded``,
    in sample order); the samples of pairs sharing an evaluation split are read together.
    ``versions``: by name, every version the pairs' ``ref`` names."""
    wanted: dict[tuple[str, str], list[str]] = {}
    for p in pairs:
        wanted.setdefault((p.ref, p.split), []).extend(p.sample)
    rows: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for (ref, split), ids in wanted.items():
        if ids:
            rows[(ref, split)] = find_records(
                versions[ref], split, list(dict.fromkeys(ids)), kind=kind, width=width,
                progress=progress,
            )  # fmt: skip
    for p in pairs:
        p.decoded[:] = [rows[(p.ref, p.split)][h] for h in p.sample]
    return pairs

"""Verification of a version's stored shards against what was registered.

**Fast** (default) compares each object's current identity with the one recorded at
registration, without downloading anything:

* GCS: generation, and the server-side CRC32C against the shard's registered ``crc32c``;
* S3: ETag, VersionId and the server-side ``ChecksumSHA256`` (against the shard's ``sha256``
  when it is a full-object checksum);
* local disk: size, modification time (``mtime_ns``) and inode;
* any other fsspec backend: size and whatever ``info()`` recorded of a version, time or
  checksum (``etag``, ``mtime``, ``created``, ``md5``…).  When it recorded none, the report
  says so in its ``notes`` (and a warning is logged): only deep verification can tell a
  same-size rewrite there.

Each backend's comparison is its profile's
(:meth:`~recordkeeper.backends.StorageProfile.compare`, :mod:`recordkeeper.backends`).

**Deep** re-reads every shard (in parallel across shards), re-hashes it and checks every
record's CRC: it reports the first bad offset of a corrupted or truncated shard, and a changed
``sha256`` / ``records_sha256`` / record count.  Only deep verification finds a bit flip that
kept the file's size and mtime on local disk (or on a store without server-side checksums).

Problems are reported per shard with a reason: ``missing``, ``size_changed``,
``identity_changed``, ``checksum_mismatch``, ``corrupt`` (with ``offset``), ``records_changed``.
Refused credentials or an unreachable endpoint raise :class:`~recordkeeper.errors.StorageError`
instead: they say nothing about the shards.  So do answers damaged in transit: before deep
verification reports a shard's bytes as bad, it reads them again (:data:`REREADS` times at
most); reads that disagree raise ``StorageError`` with reason ``transport``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from recordkeeper._parallel import parallel_map, use_processes
from recordkeeper.backends import StorageProfile
from recordkeeper.core.errors import CorruptShard, StorageError, UnsupportedFormat
from recordkeeper.object_batches import (
    DEFAULT_CONCURRENCY,
    listing_or_nothing,
    stat_many,
)
from recordkeeper.progress import ProgressReader, byte_progress
from recordkeeper.record_ids import RecordIds, index_uri, write_index
from recordkeeper.storage import (
    ObjectStat,
    open_read,
    profile_of,
    storage_errors,
    to_uri,
    url_to_fs,
)
from recordkeeper.values import DatasetVersion, Reason, Shard, ShardProblem, VerifyReport

log = logging.getLogger(__name__)

__all__ = [
    "REREADS",
    "Reason",
    "ShardProblem",
    "VerifyReport",
    "verify_pages",
    "verify_shards",
    "verify_version",
]


def _fast_problems(
    shards: Sequence[Shard], storage_options: Mapping[str, Any] | None, concurrency: int
) -> tuple[list[ShardProblem], list[str]]:
    """Fast verification of ``shards``: their problems in shard order, and notes on what it
    could not tell.

    Current identities come from :func:`~recordkeeper.object_batches.stat_many` (concurrent
    requests).  Many shards on a backend with listings are first looked up in a listing of
    their common prefix: a shard the listing proves unchanged
    (:meth:`~recordkeeper.backends.StorageProfile.listing_proves`) needs no request of its
    own.  Every other shard gets the per-object check of its profile.
    """
    unchanged: set[int] = set()
    by_profile: dict[int, tuple[StorageProfile, list[int]]] = {}
    for i, s in enumerate(shards):
        profile = profile_of(s.uri)
        by_profile.setdefault(id(profile), (profile, []))[1].append(i)
    for profile, indexes in by_profile.values():
        if profile.lists_prefixes and len(indexes) >= profile.listing_min_objects:
            listed = listing_or_nothing([shards[i].uri for i in indexes], storage_options)
            for i in indexes:
                entry = listed.get(to_uri(shards[i].uri))
                registered = shards[i].storage_identity or {}
                if entry is not None and profile.listing_proves(
                    registered, shards[i].sha256, shards[i].size, entry
                ):
                    unchanged.add(i)
    rest = [i for i in range(len(shards)) if i not in unchanged]
    stats = stat_many([shards[i].uri for i in rest], storage_options, concurrency=concurrency)
    problems: list[ShardProblem] = []
    blind: dict[str, tuple[str, int]] = {}
    for i, current in zip(rest, stats, strict=True):
        problem = _fast_check(shards[i], current)
        if problem is not None:
            problems.append(problem)
        elif (note := _blind_spot(shards[i])) is not None:
            seen = blind.get(note)
            blind[note] = (shards[i].uri, (seen[1] if seen else 0) + 1)
    notes = [f"{count} shard(s), e.g. {uri}: {note}" for note, (uri, count) in blind.items()]
    for note in notes:
        log.warning("fast verify: %s", note)
    return problems, notes


def _blind_spot(shard: Shard) -> str | None:
    return profile_of(shard.uri).blind_spot(dict(shard.storage_identity or {}))


def _fast_check(shard: Shard, current: ObjectStat | StorageError) -> ShardProblem | None:
    if isinstance(current, StorageError):
        if current.extra.get("reason") == "missing":
            return ShardProblem(shard, "missing", f"object not found: {current.detail}")
        raise current
    if current.size != shard.size:
        return ShardProblem(
            shard, "size_changed", f"size is {current.size} bytes, registered {shard.size}"
        )
    registered = dict(shard.storage_identity or {})
    mismatch = profile_of(shard.uri).compare(
        registered, current, sha256=shard.sha256, crc32c=shard.crc32c
    )
    if mismatch is None:
        return None
    return ShardProblem(shard, mismatch.reason, mismatch.detail)


#: problems of a shard's bytes as one read saw them: read again before blaming the store
_CONTENT_REASONS = frozenset({"corrupt", "records_changed", "checksum_mismatch", "size_changed"})
#: further reads of a shard whose first read found damage
REREADS = 2


def _deep_check(
    shard: Shard,
    storage_options: Mapping[str, Any] | None,
    advance: Callable[[int], None] | None = None,
    hash_in_background: bool = True,
    record_index: bool = False,
) -> tuple[ShardProblem | None, int, str | None]:
    """Deep check of one shard; damage one read found is confirmed by reading it again.
    With ``record_index``, also the shard's record index from the same read (see
    :func:`_check_index`): the third value says what became of it.

    A byte flipped on the way (no TCP or HTTP check catches every one) looks exactly like a
    corrupt shard.  The same problem on the next read is the stored bytes'; a clean read
    means the first was damaged in transit (logged, the shard is intact); reads that keep
    disagreeing raise :class:`~recordkeeper.errors.StorageError` with reason ``transport``.
    """
    ids = RecordIds() if record_index else None
    problem, count = _deep_read(shard, storage_options, advance, hash_in_background, ids)
    if problem is None and ids is not None:
        return None, count, _check_index(shard, ids, storage_options)
    for _ in range(REREADS):
        if problem is None or problem.reason not in _CONTENT_REASONS:
            return problem, count, None
        again, read = _deep_read(shard, storage_options, None, hash_in_background)
        count += read
        if again is None:
            log.warning(
                "%s: a read found %s (%s), the next read none: damaged in transit, the stored "
                "shard is intact",
                shard.uri,
                problem.reason,
                problem.detail,
            )
            return None, count, None  # (the index is checked by the next deep verify)
        if _same_damage(again, problem):
            return problem, count, None
        problem = again
    if problem is None or problem.reason not in _CONTENT_REASONS:
        return problem, count, None
    raise StorageError(
        f"{shard.uri}: {REREADS + 1} reads of the object gave different bytes (last: "
        f"{problem.reason}: {problem.detail}); the answers are being damaged in transit, "
        "the stored shard was not judged",
        uri=shard.uri,
        reason="transport",
    )


def _check_index(shard: Shard, ids: RecordIds, storage_options: Mapping[str, Any] | None) -> str:
    """Compare the shard's stored record index with the one its records just gave: ``matched``,
    or the right one stored (``written`` where there was none, ``rewritten`` over a wrong
    one: a stale or damaged index, which ``recordkeeper index`` would skip when its header
    still matches)."""
    built = ids.finish(shard.records_sha256)
    uri = index_uri(shard.uri)
    try:
        with open_read(uri, storage_options) as fh:
            stored: bytes | None = fh.read()
    except StorageError as exc:
        if exc.extra.get("reason") != "missing":
            raise
        stored = None
    if stored == built:
        return "matched"
    write_index(shard.uri, built, storage_options)
    if stored is None:
        return "written"
    log.warning("%s: its record index did not match its records; rewritten from them", uri)
    return "rewritten"


def _same_damage(a: ShardProblem, b: ShardProblem) -> bool:
    return (a.reason, a.detail, a.offset, a.compressed_offset) == (
        b.reason,
        b.detail,
        b.offset,
        b.compressed_offset,
    )


def _deep_read(
    shard: Shard,
    storage_options: Mapping[str, Any] | None,
    advance: Callable[[int], None] | None = None,
    hash_in_background: bool = True,
    record_ids: RecordIds | None = None,
) -> tuple[ShardProblem | None, int]:
    """One read of the shard: its problem as these bytes show it, and the bytes read
    (``record_ids``: the records' identities, from the same scan)."""
    from recordkeeper import formats
    from recordkeeper.streaming import source_size

    try:
        raw = open_read(shard.uri, storage_options)
    except StorageError as exc:
        if exc.extra.get("reason") == "missing":
            return ShardProblem(shard, "missing", f"object not found: {exc.detail}"), 0
        raise
    reader = ProgressReader(raw, advance)
    try:
        with storage_errors(shard.uri):
            try:
                stats = formats.get(shard.format).scan(
                    reader,
                    shard.compression,
                    infer_schema=False,
                    size=source_size(raw),  # bounds what a corrupt frame header may claim
                    stored_crc32c=False,
                    hash_in_background=hash_in_background,
                    record_ids=record_ids,
                )
            except (CorruptShard, UnsupportedFormat) as exc:
                # (a shard now holding what its format's reader cannot decode has changed)
                corrupt = ShardProblem(
                    shard,
                    "corrupt",
                    exc.detail,
                    offset=exc.extra.get("offset"),
                    compressed_offset=exc.extra.get("compressed_offset"),
                )
                return corrupt, reader.count
    finally:
        reader.close()
    if stats.size != shard.size:
        problem = ShardProblem(
            shard, "size_changed", f"size is {stats.size} bytes, registered {shard.size}"
        )
    elif stats.records_sha256 != shard.records_sha256 or stats.record_count != shard.record_count:
        problem = ShardProblem(
            shard,
            "records_changed",
            f"records differ: {stats.record_count} records with records_sha256 "
            f"{stats.records_sha256[:16]}…, registered {shard.record_count} with "
            f"{shard.records_sha256[:16]}…",
        )
    elif stats.sha256 != shard.sha256:
        problem = ShardProblem(
            shard,
            "checksum_mismatch",
            f"sha256 of the stored bytes is {stats.sha256}, registered {shard.sha256} "
            "(same records, different bytes: re-compressed?)",
        )
    else:
        problem = None
    return problem, reader.count


def verify_shards(
    shards: Sequence[Shard],
    *,
    deep: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    max_workers: int | None = None,
    progress: bool | None = None,
    label: str = "shards",
    record_index: bool = False,
) -> VerifyReport:
    """Verify any list of registered shards (see the module docstring); with ``deep`` and
    ``record_index``, each shard's record index is checked in the same read
    (:func:`_check_index`; counts in the report's ``record_index``)."""
    start = time.perf_counter()
    if shards:
        # Create the filesystem once, before threads race to do it.
        url_to_fs(shards[0].uri, storage_options)
    problems: list[ShardProblem] = []
    notes: list[str] = []
    total_read = 0
    indexes: dict[str, int] = {}
    if deep:
        workers = max_workers or min(len(shards) or 1, max(2, os.cpu_count() or 2))
        total = sum(s.size for s in shards)
        processes = use_processes(total, len(shards))
        options = dict(storage_options) if storage_options is not None else None
        # One shard per core already keeps every core busy: hash in the scanning thread.
        background = workers < (os.cpu_count() or 1)
        with byte_progress(f"deep verify {label}", total, progress) as advance:
            results = parallel_map(
                _deep_check,
                [
                    (s, options, None if processes else advance, background, record_index)
                    for s in shards
                ],
                workers=workers,
                processes=processes,
                on_result=(lambda i, r: advance(r[1])) if processes else None,
            )
        for problem, nread, index in results:
            total_read += nread
            if problem is not None:
                problems.append(problem)
            if index is not None:
                indexes[index] = indexes.get(index, 0) + 1
    else:
        problems, notes = _fast_problems(
            shards, storage_options, max_workers or DEFAULT_CONCURRENCY
        )
    return VerifyReport(
        version=label,
        deep=deep,
        checked=len(shards),
        problems=tuple(problems),
        bytes_read=total_read,
        seconds=time.perf_counter() - start,
        notes=tuple(notes),
        record_index=indexes,
    )


def verify_version(
    version: DatasetVersion,
    *,
    deep: bool = False,
    splits: Sequence[str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    max_workers: int | None = None,
    progress: bool | None = None,
    record_index: bool = False,
) -> VerifyReport:
    """Verify the shards of ``version`` (all splits, or only ``splits``); a version whose
    data was deleted raises :class:`~recordkeeper.errors.VersionDataDeleted`.
    ``record_index`` (deep only): see :func:`verify_shards`."""
    version.ensure_readable()
    if splits is None:
        shards: list[Shard] = version.shards
    else:
        shards = [s for name in splits for s in version.split(name).shards]
    return verify_shards(
        shards,
        deep=deep,
        storage_options=storage_options,
        max_workers=max_workers,
        progress=progress,
        label=version.name,
        record_index=record_index,
    )


def verify_pages(
    pages: Iterable[Sequence[Shard]],
    *,
    label: str,
    deep: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    max_workers: int | None = None,
    progress: bool | None = None,
    record_index: bool = False,
) -> VerifyReport:
    """Verify shards arriving page by page (:meth:`Registry.shard_pages`), one page at a time.

    Memory stays bounded by a page (plus the problems found) whatever the version's size; the
    report is the one :func:`verify_shards` would give for all the shards at once.
    """
    start = time.perf_counter()
    checked = total_read = 0
    problems: list[ShardProblem] = []
    notes: list[str] = []
    indexes: dict[str, int] = {}
    for page in pages:
        report = verify_shards(
            page,
            deep=deep,
            storage_options=storage_options,
            max_workers=max_workers,
            progress=progress,
            label=label,
            record_index=record_index,
        )
        for key, n in report.record_index.items():
            indexes[key] = indexes.get(key, 0) + n
        checked += report.checked
        total_read += report.bytes_read
        problems.extend(report.problems)
        notes.extend(n for n in report.notes if n not in notes)
    return VerifyReport(
        version=label,
        deep=deep,
        checked=checked,
        problems=tuple(problems),
        bytes_read=total_read,
        seconds=time.perf_counter() - start,
        notes=tuple(notes),
        record_index=indexes,
    )

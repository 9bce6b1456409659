"""Verification of a version's stored shards against what was registered.

**Fast** (default) compares each object's current identity with the one recorded at
registration, without downloading anything:

* GCS: generation, and the server-side CRC32C against the shard's registered ``crc32c``;
* S3: ETag, VersionId and the server-side ``ChecksumSHA256`` (against the shard's ``sha256``
  when it is a full-object checksum);
* local disk: size and modification time (``mtime_ns``).

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

import base64
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from recordkeeper._parallel import parallel_map, use_processes
from recordkeeper.core.errors import CorruptShard, StorageError
from recordkeeper.models import DatasetVersion, Reason, Shard, ShardProblem, VerifyReport
from recordkeeper.object_batches import (
    DEFAULT_CONCURRENCY,
    ListedObject,
    listing_or_nothing,
    stat_many,
)
from recordkeeper.progress import ProgressReader, byte_progress
from recordkeeper.storage import (
    ObjectStat,
    backend_of,
    open_read,
    storage_errors,
    to_uri,
    url_to_fs,
)

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


def _b64_to_hex(value: str | None) -> str | None:
    if not value or "-" in value:
        return None
    try:
        return base64.b64decode(value).hex()
    except ValueError:
        return None


def _fast_problems(
    shards: Sequence[Shard], storage_options: Mapping[str, Any] | None, concurrency: int
) -> list[ShardProblem]:
    """Fast verification of ``shards``: their problems in shard order.

    Current identities come from :func:`~recordkeeper.object_batches.stat_many` (concurrent
    requests).  Many S3 shards are first looked up in a listing of their common prefix: a shard
    the listing shows with its registered size and ETag is the very object that was registered
    (see :func:`_listing_shows_unchanged`), so it needs no request of its own.  Every other
    shard gets the same per-object check as before.
    """
    unchanged: set[int] = set()
    on_s3 = [i for i, s in enumerate(shards) if backend_of(s.uri) == "s3"]
    if len(on_s3) >= LISTING_MIN_SHARDS:
        listed = listing_or_nothing([shards[i].uri for i in on_s3], storage_options)
        unchanged = {
            i
            for i in on_s3
            if _listing_shows_unchanged(shards[i], listed.get(to_uri(shards[i].uri)))
        }
    rest = [i for i in range(len(shards)) if i not in unchanged]
    stats = stat_many([shards[i].uri for i in rest], storage_options, concurrency=concurrency)
    problems: list[ShardProblem] = []
    for i, current in zip(rest, stats, strict=True):
        problem = _fast_check(shards[i], current)
        if problem is not None:
            problems.append(problem)
    return problems


#: from this many S3 shards on, fast verification lists their prefix first
LISTING_MIN_SHARDS = 8


def _listing_shows_unchanged(shard: Shard, listed: ListedObject | None) -> bool:
    """True when a listing entry proves the shard's object is the one registered.

    The ETag changes whenever an object is written with different bytes (S3 computes it from
    the content, or anew for each upload), and a listing names the current version.  So with
    the registered size and ETag, no registered VersionId (versioned objects are checked by
    request), and a registered checksum that matched the shard's sha256 (or none), a request
    for the object would find nothing either: its checksum and ETag are those registered.
    """
    if listed is None:
        return False
    registered = shard.storage_identity or {}
    if registered.get("backend") != "s3" or registered.get("version_id"):
        return False
    etag = registered.get("etag")
    checksum = registered.get("checksum_sha256")
    full = _b64_to_hex(checksum)
    if checksum and "-" not in str(checksum) and full != shard.sha256:
        return False
    return bool(etag) and listed.etag == etag and listed.size == shard.size


def _fast_check(shard: Shard, current: ObjectStat | StorageError) -> ShardProblem | None:
    if isinstance(current, StorageError):
        if current.extra.get("reason") == "missing":
            return ShardProblem(shard, "missing", f"object not found: {current.detail}")
        raise current
    registered = dict(shard.storage_identity or {})
    ident = current.identity
    if current.size != shard.size:
        return ShardProblem(
            shard, "size_changed", f"size is {current.size} bytes, registered {shard.size}"
        )
    backend = ident.get("backend")
    if backend == "gcs":
        crc_now = _b64_to_hex(ident.get("crc32c"))
        if crc_now is not None and crc_now != shard.crc32c:
            return ShardProblem(
                shard,
                "checksum_mismatch",
                f"server-side crc32c is {crc_now}, registered {shard.crc32c}",
            )
        if registered.get("generation") and registered["generation"] != ident.get("generation"):
            return ShardProblem(
                shard,
                "identity_changed",
                f"object generation is {ident.get('generation')}, registered "
                f"{registered['generation']} (the object was rewritten)",
            )
    elif backend == "s3":
        sha_now = ident.get("checksum_sha256")
        full = _b64_to_hex(sha_now)
        if full is not None and full != shard.sha256:
            return ShardProblem(
                shard,
                "checksum_mismatch",
                f"server-side sha256 is {full}, registered {shard.sha256}",
            )
        before = registered.get("checksum_sha256")
        if before and sha_now and before != sha_now:
            return ShardProblem(
                shard,
                "checksum_mismatch",
                f"server-side ChecksumSHA256 is {sha_now}, registered "
                f"{registered['checksum_sha256']}",
            )
        for key, label in (("etag", "ETag"), ("version_id", "VersionId")):
            if registered.get(key) and registered[key] != ident.get(key):
                return ShardProblem(
                    shard,
                    "identity_changed",
                    f"{label} is {ident.get(key)}, registered {registered[key]} "
                    "(the object was rewritten)",
                )
    elif backend == "file":
        if registered.get("mtime_ns") is not None and registered["mtime_ns"] != ident["mtime_ns"]:
            return ShardProblem(
                shard,
                "identity_changed",
                f"file modified after registration (mtime_ns {ident['mtime_ns']}, registered "
                f"{registered['mtime_ns']}); run a deep verify to compare content",
            )
    else:
        for key in ("mtime", "etag"):
            if registered.get(key) is not None and registered[key] != ident.get(key):
                return ShardProblem(
                    shard,
                    "identity_changed",
                    f"{key} is {ident.get(key)}, registered {registered[key]}",
                )
    return None


#: problems of a shard's bytes as one read saw them: read again before blaming the store
_CONTENT_REASONS = frozenset({"corrupt", "records_changed", "checksum_mismatch", "size_changed"})
#: further reads of a shard whose first read found damage
REREADS = 2


def _deep_check(
    shard: Shard,
    storage_options: Mapping[str, Any] | None,
    advance: Callable[[int], None] | None = None,
    hash_in_background: bool = True,
) -> tuple[ShardProblem | None, int]:
    """Deep check of one shard; damage one read found is confirmed by reading it again.

    A byte flipped on the way (no TCP or HTTP check catches every one) looks exactly like a
    corrupt shard.  The same problem on the next read is the stored bytes'; a clean read
    means the first was damaged in transit (logged, the shard is intact); reads that keep
    disagreeing raise :class:`~recordkeeper.errors.StorageError` with reason ``transport``.
    """
    problem, count = _deep_read(shard, storage_options, advance, hash_in_background)
    for _ in range(REREADS):
        if problem is None or problem.reason not in _CONTENT_REASONS:
            return problem, count
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
            return None, count
        if _same_damage(again, problem):
            return problem, count
        problem = again
    if problem is None or problem.reason not in _CONTENT_REASONS:
        return problem, count
    raise StorageError(
        f"{shard.uri}: {REREADS + 1} reads of the object gave different bytes (last: "
        f"{problem.reason}: {problem.detail}); the answers are being damaged in transit, "
        "the stored shard was not judged",
        uri=shard.uri,
        reason="transport",
    )


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
) -> tuple[ShardProblem | None, int]:
    """One read of the shard: its problem as these bytes show it, and the bytes read."""
    from recordkeeper.tfrecord import scan_shard, source_size

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
                stats = scan_shard(
                    reader,
                    shard.compression,
                    infer_schema=False,
                    size=source_size(raw),  # bounds what a corrupt frame header may claim
                    stored_crc32c=False,
                    hash_in_background=hash_in_background,
                )
            except CorruptShard as exc:
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
) -> VerifyReport:
    """Verify any list of registered shards (see the module docstring)."""
    start = time.perf_counter()
    if shards:
        # Create the filesystem once, before threads race to do it.
        url_to_fs(shards[0].uri, storage_options)
    problems: list[ShardProblem] = []
    total_read = 0
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
                [(s, options, None if processes else advance, background) for s in shards],
                workers=workers,
                processes=processes,
                on_result=(lambda i, r: advance(r[1])) if processes else None,
            )
        for problem, nread in results:
            total_read += nread
            if problem is not None:
                problems.append(problem)
    else:
        problems = _fast_problems(shards, storage_options, max_workers or DEFAULT_CONCURRENCY)
    return VerifyReport(
        version=label,
        deep=deep,
        checked=len(shards),
        problems=tuple(problems),
        bytes_read=total_read,
        seconds=time.perf_counter() - start,
    )


def verify_version(
    version: DatasetVersion,
    *,
    deep: bool = False,
    splits: Sequence[str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    max_workers: int | None = None,
    progress: bool | None = None,
) -> VerifyReport:
    """Verify the shards of ``version`` (all splits, or only ``splits``); a version whose
    data was deleted raises :class:`~recordkeeper.errors.VersionDataDeleted`."""
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
    )


def verify_pages(
    pages: Iterable[Sequence[Shard]],
    *,
    label: str,
    deep: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    max_workers: int | None = None,
    progress: bool | None = None,
) -> VerifyReport:
    """Verify shards arriving page by page (:meth:`Registry.shard_pages`), one page at a time.

    Memory stays bounded by a page (plus the problems found) whatever the version's size; the
    report is the one :func:`verify_shards` would give for all the shards at once.
    """
    start = time.perf_counter()
    checked = total_read = 0
    problems: list[ShardProblem] = []
    for page in pages:
        report = verify_shards(
            page,
            deep=deep,
            storage_options=storage_options,
            max_workers=max_workers,
            progress=progress,
            label=label,
        )
        checked += report.checked
        total_read += report.bytes_read
        problems.extend(report.problems)
    return VerifyReport(
        version=label,
        deep=deep,
        checked=checked,
        problems=tuple(problems),
        bytes_read=total_read,
        seconds=time.perf_counter() - start,
    )

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
instead: they say nothing about the shards.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from recordkeeper._parallel import parallel_map, use_processes
from recordkeeper.core.errors import CorruptShard, StorageError
from recordkeeper.models import DatasetVersion, Reason, Shard, ShardProblem, VerifyReport
from recordkeeper.progress import ProgressReader, byte_progress
from recordkeeper.storage import open_read, stat_object, storage_errors, url_to_fs

__all__ = ["Reason", "ShardProblem", "VerifyReport", "verify_shards", "verify_version"]


def _b64_to_hex(value: str | None) -> str | None:
    if not value or "-" in value:
        return None
    try:
        return base64.b64decode(value).hex()
    except ValueError:
        return None


def _fast_check(shard: Shard, storage_options: Mapping[str, Any] | None) -> ShardProblem | None:
    try:
        current = stat_object(shard.uri, storage_options)
    except StorageError as exc:
        if exc.extra.get("reason") == "missing":
            return ShardProblem(shard, "missing", f"object not found: {exc.detail}")
        raise
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


def _deep_check(
    shard: Shard,
    storage_options: Mapping[str, Any] | None,
    advance: Callable[[int], None] | None = None,
) -> tuple[ShardProblem | None, int]:
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
                size = source_size(raw)  # bounds what a corrupt frame header may claim
                stats = scan_shard(reader, shard.compression, infer_schema=False, size=size)
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
        with byte_progress(f"deep verify {label}", total, progress) as advance:
            results = parallel_map(
                _deep_check,
                [(s, options, None if processes else advance) for s in shards],
                workers=workers,
                processes=processes,
                on_result=(lambda i, r: advance(r[1])) if processes else None,
            )
        for problem, nread in results:
            total_read += nread
            if problem is not None:
                problems.append(problem)
    else:
        workers = max_workers or min(len(shards) or 1, 32)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for fast_problem in pool.map(lambda s: _fast_check(s, storage_options), shards):
                if fast_problem is not None:
                    problems.append(fast_problem)
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
    """Verify the shards of ``version`` (all splits, or only ``splits``)."""
    if splits is None:
        shards = version.shards
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

"""The per-worker version cache is bounded by (approximate) bytes, not only by count."""

from __future__ import annotations

import dataclasses
import datetime

from recordkeeper_service.domain import ShardRecord, VersionRecord
from recordkeeper_service.repository.cache import VersionCache, approximate_bytes

NOW = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


def _version(
    version_id: int, shards: int, metadata: dict[str, object] | None = None
) -> VersionRecord:
    records = tuple(
        ShardRecord(
            split="train",
            index=i,
            count=shards,
            uri=f"file:///data/v{version_id}/train-{i:05d}.tfrecord",
            compression="none",
            size=1,
            sha256="0" * 64,
            crc32c="0" * 8,
            records_sha256="0" * 64,
            record_count=1,
        )
        for i in range(shards)
    )
    return VersionRecord(
        id=version_id,
        name=f"ds_20240101_v{version_id}",
        dataset="ds",
        number=version_id,
        date=NOW.date(),
        desc=None,
        convention="rk1",
        state="committed",
        storage_prefix=f"file:///data/v{version_id}/",
        content_digest=None,
        schema_digest=None,
        record_count=shards,
        shard_count=shards,
        size=shards,
        created_at=NOW,
        created_by="test",
        committed_at=NOW,
        deprecated_at=None,
        deprecated_reason=None,
        metadata=metadata or {},
        duplicate_of=None,
        shards=records,
    )


def test_the_estimate_grows_with_shards_and_metadata() -> None:
    small = approximate_bytes(_version(1, 1))
    assert approximate_bytes(_version(1, 100)) > small + 99 * 1000
    assert approximate_bytes(_version(1, 1, {"blob": "x" * 10_000})) > small + 10_000


def test_the_cache_holds_no_more_than_its_byte_budget() -> None:
    one = approximate_bytes(_version(50, 100))  # ids 10-50: all the same size
    cache = VersionCache(max_versions=1000, max_bytes=10 * one)
    for version_id in range(1, 51):
        cache.put(_version(version_id, 100))
        assert cache.bytes <= cache.max_bytes
    assert len(cache) == 10
    # least recently used went first: the last ten are there
    assert [cache.get(v) is not None for v in (40, 41, 50)] == [False, True, True]


def test_a_record_larger_than_a_quarter_of_the_budget_is_not_kept() -> None:
    cache = VersionCache(max_bytes=4 * approximate_bytes(_version(1, 10)))
    cache.put(_version(2, 100))
    assert cache.get(2) is None and cache.bytes == 0
    cache.put(_version(1, 10))
    assert cache.get(1) is not None


def test_replacing_an_entry_keeps_the_count_exact() -> None:
    cache = VersionCache(max_bytes=10**9)
    record = _version(1, 10)
    cache.put(record)
    cache.put(dataclasses.replace(record, metadata={"k": "v"}))
    assert len(cache) == 1
    assert cache.bytes == approximate_bytes(dataclasses.replace(record, metadata={"k": "v"}))

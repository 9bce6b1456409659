"""The distributed-write protocol without Beam: real worker processes, a real service.

``recordkeeper.distributed`` is what a Spark, Ray or multiprocessing job calls.  Here the
engine is ``concurrent.futures.ProcessPoolExecutor`` (spawned processes: nothing is shared with
the driver but what pickles), the service runs over a socket, the store is local disk or
SeaweedFS (S3).  The job has a worker that failed mid-shard and was retried, a key that ran
twice, and a commit that is retried.
"""

from __future__ import annotations

import io
import multiprocessing
import pickle
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import fsspec
import pytest

import recordkeeper as rk
from recordkeeper import distributed
from recordkeeper.record_ids import index_uri
from tests.client._records import frame, sample_examples
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService

RECORDS = {"train": sample_examples(240), "test": sample_examples(60, 1000)}
KEYS = {"train": 3, "test": 2}


class WorkerFailed(Exception):
    pass


def keyed(split: str) -> Iterator[tuple[int, list[bytes]]]:
    """The engine's shuffle: each key's records fixed (round-robin here)."""
    records = RECORDS[split]
    for key in range(KEYS[split]):
        yield key, records[key :: KEYS[split]]


def write_task(
    plan: distributed.WritePlan, split: str, key: int, records: list[bytes], fail_at: int | None
) -> list[distributed.WrittenShard]:
    """What a worker runs: write one key (failing after ``fail_at`` records, a crash)."""

    def stream() -> Iterator[bytes]:
        for i, record in enumerate(records):
            if i == fail_at:
                raise WorkerFailed(f"{split}/{key} lost its worker at record {i}")
            yield record

    return plan.write_shard(split, key, stream())


def scan_task(plan: distributed.PublishPlan, item: Any) -> dict[str, Any]:
    return plan.scan(item)


def pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))


def run_job(plan: distributed.WritePlan, *, crash: bool) -> list[distributed.WrittenShard]:
    """Every key once on the pool; with ``crash`` key 1 of train dies mid-shard first (retried,
    as an engine would) and key 0 of test runs twice (a speculative duplicate)."""
    written: list[distributed.WrittenShard] = []
    with pool() as workers:
        futures = []
        for split in RECORDS:
            for key, records in keyed(split):
                fail = 70 if crash and (split, key) == ("train", 1) else None
                futures.append(
                    (
                        split,
                        key,
                        records,
                        workers.submit(write_task, plan, split, key, records, fail),
                    )
                )
        if crash:
            futures.append(
                (
                    "test",
                    0,
                    None,
                    workers.submit(write_task, plan, "test", 0, dict(keyed("test"))[0], None),
                )
            )
        for split, key, records, future in futures:
            try:
                written += future.result()
            except WorkerFailed:
                written += workers.submit(write_task, plan, split, key, records, None).result()
    return written


def objects(prefix: str, opts: dict[str, Any]) -> list[str]:
    protocol, _, path = prefix.partition("://")
    fs = fsspec.filesystem(protocol, skip_instance_cache=True, **opts)
    found = [p for p in fs.find(path) if p.rstrip("/") != path.rstrip("/")]
    return sorted(f"{protocol}://{p}" for p in found)


def stored_records(version: rk.DatasetVersion, split: str, opts: dict[str, Any]) -> list[bytes]:
    out: list[bytes] = []
    for shard in version.splits[split].shards:
        data = io.BytesIO(sc.get_bytes(shard.uri, opts))
        out += [bytes(r) for r in rk.tfrecord.iter_records(data, shard.compression)]
    return out


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store(
    request: pytest.FixtureRequest,
    live_service: LiveService,
    live_service_factory: Callable[..., LiveService],
) -> tuple[LiveService, dict[str, Any]]:
    if request.param == "local":
        return live_service, {}
    bucket = request.getfixturevalue("s3_bucket")
    opts = dict(request.getfixturevalue("s3_server").storage_options)
    service = live_service_factory(storage_root=f"{bucket}/datasets", allowed_roots=[bucket])
    return service, opts


def test_a_process_pool_job_writes_one_version_with_a_retried_worker_and_commit(
    store: tuple[LiveService, dict[str, Any]],
) -> None:
    service, opts = store
    client = service.client(storage_options=opts)
    plan = distributed.plan_write(client, "coco", desc="pool", shard_size="4KB")
    assert pickle.loads(pickle.dumps(plan)) == plan
    assert plan.staged_version is not None and plan.staged_version.state == "staged"

    written = run_job(plan, crash=True)
    assert len({(w.split, w.key, w.part) for w in written}) < len(written)  # a key ran twice
    assert any("/_incomplete/" in u for u in objects(plan.prefix, opts))

    version = plan.commit(client, written)
    again = plan.commit(client, written)  # the driver retried the commit step
    assert again.name == version.name and again.content_digest == version.content_digest
    assert version.was_staged_as(plan.staged)
    assert client.resolve("coco@latest").name == version.name

    for split in RECORDS:  # every record once, in key order: none lost, none twice
        assert Counter(stored_records(version, split, opts)) == Counter(RECORDS[split])
        expected = [r for _, records in keyed(split) for r in records]
        assert stored_records(version, split, opts) == expected
        shards = version.splits[split].shards
        assert [s.name for s in shards] == [
            f"{split}-{i:05d}-of-{len(shards):05d}" for i in range(len(shards))
        ]
    assert version.splits["train"].shards[0].count > KEYS["train"]  # keys rolled over parts
    # the shards, and beside them the record identity the workers computed while writing
    indexes = sorted(index_uri(s.uri) for s in version.shards)
    lookup = f"{version.storage_prefix.rstrip('/')}/.recordkeeper/records.rklookup"
    assert objects(version.storage_prefix, opts) == sorted(
        [*(s.uri for s in version.shards), *indexes, lookup]
    )
    (identity,) = client.record_sets(version.name)
    assert {s["split"]: s["records"] for s in identity["splits"]} == {
        split: len(records) for split, records in RECORDS.items()
    }
    assert version.verify(deep=True).ok

    # the same content from a second job keeps the first version; its shards are deleted
    second = distributed.plan_write(client, "coco", shard_size="4KB")
    written = run_job(second, crash=False)
    kept = second.commit(client, written)
    assert kept.name == version.name and not kept.was_staged_as(second.staged)
    assert objects(second.prefix, opts) == []
    assert second.commit(client, written).name == version.name  # retried after the delete


def test_a_commit_of_nothing_is_refused_and_the_plan_stays_staged(
    live_service: LiveService,
) -> None:
    client = live_service.client()
    plan = distributed.plan_write(client, "coco", shard_size="4KB")
    written = run_job(plan, crash=False)
    with pytest.raises(rk.InvalidShard):
        plan.commit(client, [])
    version = plan.commit(client, written)
    assert version.record_count == sum(len(r) for r in RECORDS.values())


def test_a_process_pool_publishes_existing_files(live_service: LiveService, data_dir: Path) -> None:
    raw = data_dir / "raw"
    raw.mkdir()
    shards = [sample_examples(30, 30 * i) for i in range(4)]
    for i, records in enumerate(shards):
        (raw / f"train-{i:05d}-of-00004.tfrecord").write_bytes(frame(records))
    client = live_service.client()
    plan = distributed.plan_publish(client, rk.Dataset.from_directory(raw, name="raw"))
    assert not plan.copies and len(plan.files) == 4
    with pool() as workers:
        registrations = list(workers.map(scan_task, [plan] * len(plan.files), plan.files))
    version = plan.commit(client, registrations)
    assert plan.commit(client, registrations).name == version.name
    assert [s.uri for s in version.shards] == [
        (raw / f"train-{i:05d}-of-00004.tfrecord").as_uri() for i in range(4)
    ]
    assert version.record_count == 120 and version.verify(deep=True).ok
    # as client.publish: the workers' scans computed the record identity, the commit
    # registered it, and the version has its sample
    (identity,) = client.record_sets(version.name)
    assert [(s["split"], s["records"]) for s in identity["splits"]] == [("train", 120)]
    sample = client.sample(version.name)
    assert sample is not None and sample["source"] == "publish", sample


def test_a_distributed_publish_is_judged_by_the_leakage_policy(
    live_service: LiveService, data_dir: Path
) -> None:
    """The dataset's leakage policy judges a distributed publish from the indexes its workers
    stored: a test split holding training records is refused under ``refuse``."""
    raw = data_dir / "leaky"
    raw.mkdir()
    train = sample_examples(40)
    (raw / "train-00000-of-00001.tfrecord").write_bytes(frame(train))
    (raw / "test-00000-of-00001.tfrecord").write_bytes(frame(sample_examples(10, 500) + train[:3]))
    client = live_service.client()
    client.set_leakage_policy("leaky", "refuse")

    def publish() -> rk.DatasetVersion:
        plan = distributed.plan_publish(client, rk.Dataset.from_directory(raw, name="leaky"))
        with pool() as workers:
            scans = list(workers.map(scan_task, [plan] * len(plan.files), plan.files))
        return plan.commit(client, scans)

    with pytest.raises(rk.SplitOverlap) as refused:
        publish()
    (pair,) = refused.value.extra["pairs"]
    assert (pair["split"], pair["other_split"], pair["records"], pair["leaked"]) == (
        "test",
        "train",
        13,
        3,
    )
    client.set_leakage_policy("leaky", "warn")
    with pytest.warns(rk.LeakageWarning, match="3/13"):
        version = publish()
    assert client.version_leakage(version.name)[0]["leaked"] == 3

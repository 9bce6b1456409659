"""Apache Beam transforms on the DirectRunner against real object stores and a live service.

Two SDK worker processes (``--direct_num_workers=2 --direct_running_mode=multi_processing``)
write to SeaweedFS (S3) and fake-gcs-server (GCS) and talk to the service over a real socket;
real TensorFlow reads the committed version back.  The retried bundle runs on the
``BundleBasedDirectRunner``, the DirectRunner's executor that retries failed bundles (the
multi-processing runner fails the job instead, which is the failed-pipeline case).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import apache_beam as beam
import fsspec
import pytest

import recordkeeper as rk
from recordkeeper.beam import PublishExisting, ReadVersion, VerifyVersion, WriteVersionedTFRecords
from recordkeeper.record_ids import index_uri
from tests.client._records import frame, sample_examples
from tests.integration import _beam as tb
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _workers_import_this_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", tb.worker_pythonpath())


@pytest.fixture
def s3_opts(s3_server: Any) -> dict[str, Any]:
    return dict(s3_server.storage_options)


@pytest.fixture
def s3_service(live_service_factory: Callable[..., LiveService], s3_bucket: str) -> LiveService:
    return live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])


@pytest.fixture
def gcs_opts(gcs_server: Any) -> dict[str, Any]:
    return dict(gcs_server.storage_options)


@pytest.fixture
def gcs_service(live_service_factory: Callable[..., LiveService], gcs_bucket: str) -> LiveService:
    return live_service_factory(storage_root=f"{gcs_bucket}/datasets", allowed_roots=[gcs_bucket])


def _objects(prefix: str, opts: dict[str, Any]) -> list[str]:
    """Every object under ``prefix``, listed by a fresh filesystem (no cached listing)."""
    protocol, _, path = prefix.partition("://")
    fs = fsspec.filesystem(protocol, skip_instance_cache=True, **opts)
    # SeaweedFS keeps the emptied "directory" as an entry named like the prefix: not an object
    found = [p for p in fs.find(path) if p.rstrip("/") != path.rstrip("/")]
    return sorted(f"{protocol}://{p}" for p in found)


def write_read_verify(
    service: LiveService, opts: dict[str, Any], out: Path, compression: str, corrupt: bool
) -> None:
    """Write with 2 workers, read back with TensorFlow and ReadVersion, verify (and corrupt)."""
    client = service.client(storage_options=opts)
    records = sample_examples(600)
    write = WriteVersionedTFRecords(
        "coco",
        desc="beam",
        split="train",
        shard_size="5KB",
        compression=compression,
        num_shards=4,
        client=client,
    )
    with beam.Pipeline(options=tb.options(tb.MULTI_PROCESS)) as p:
        versions = p | beam.Create(records, reshuffle=False) | write
        tb.write_json_lines(versions, out / "versions", "Versions")
    assert write.staged is not None
    [emitted] = tb.read_lines(out / "versions")
    assert emitted["staged_name"] == write.staged.staged_name  # committed the staged version
    assert emitted["name"] == write.staged.name  # under the name reserved when it was staged

    version = client.resolve("coco@latest")
    assert version.name == emitted["name"] and version.state == "committed"
    assert version.was_staged_as(write.staged.name)
    assert version.storage_prefix == write.staged.storage_prefix  # the shards stayed there
    assert version.storage_prefix.endswith(f"/coco/{version.name}/")  # the committed name
    assert version.record_count == len(records)
    train = version.splits["train"]
    if compression == "none":
        assert train.shard_count > 4  # keys rolled over at shard_size
    suffix = ".tfrecord.gz" if compression == "gzip" else ".tfrecord"
    assert [s.index for s in train.shards] == list(range(train.shard_count))
    assert all(s.uri.endswith(f"-of-{train.shard_count:05d}{suffix}") for s in train.shards)
    assert not [u for u in _objects(version.storage_prefix, opts) if "_incomplete" in u]
    assert {f.name for f in version.schema.features} == {"image", "label", "score"}

    # real TensorFlow reads the version back: the same records, each exactly once
    read_back = [bytes(r) for r in version.tf_dataset("train").as_numpy_iterator()]
    assert Counter(read_back) == Counter(records)

    read = ReadVersion("coco@latest", "train", client=client)
    with beam.Pipeline(options=tb.options(tb.MULTI_PROCESS)) as p:
        digests = p | read | beam.Map(tb.digest)
        tb.write_json_lines(digests, out / "read", "Read")
        reports = p | VerifyVersion(version.name, deep=True, client=client)
        tb.write_json_lines(reports, out / "report", "Report")
    assert read.version is not None and read.version.content_digest == version.content_digest
    assert Counter(tb.read_lines(out / "read")) == Counter(tb.digest(r) for r in records)
    [report] = tb.read_lines(out / "report")
    assert report["ok"] and report["checked"] == train.shard_count and report["mode"] == "deep"

    if corrupt:
        corrupt_and_verify(client, version, opts, out)


def corrupt_and_verify(
    client: rk.Client, version: rk.DatasetVersion, opts: dict[str, Any], out: Path
) -> None:
    """A shard rewritten behind the registry's back: reported, and fail=True fails the job."""
    bad = version.splits["train"].shards[1]
    data = bytearray(sc.get_bytes(bad.uri, opts))
    data[len(data) // 2] ^= 0xFF
    sc.put_bytes(bad.uri, bytes(data), opts)
    with beam.Pipeline(options=tb.options(tb.MULTI_PROCESS)) as p:
        reports = p | VerifyVersion(version.name, deep=True, client=client)
        tb.write_json_lines(reports, out / "bad", "Bad")
    [report] = tb.read_lines(out / "bad")
    assert not report["ok"]
    assert [(q["index"], q["reason"]) for q in report["problems"]] == [(1, "corrupt")]
    with (
        pytest.raises(Exception, match="bad shard"),
        beam.Pipeline(options=tb.options(["--runner=DirectRunner"])) as p,  # in-process
    ):
        _ = p | VerifyVersion(version.name, deep=True, fail=True, client=client)
    # ReadVersion verifies before reading, as tf_dataset does
    with pytest.raises(rk.CorruptShard), beam.Pipeline() as p:
        _ = p | ReadVersion(version.name, "train", client=client)


@pytest.mark.s3
def test_write_read_verify_s3(
    s3_service: LiveService, s3_opts: dict, tensorflow: ModuleType, tmp_path: Path
) -> None:
    write_read_verify(s3_service, s3_opts, tmp_path, "none", corrupt=True)


@pytest.mark.gcs
def test_write_read_verify_gcs(
    gcs_service: LiveService, gcs_opts: dict, tensorflow: ModuleType, tmp_path: Path
) -> None:
    write_read_verify(gcs_service, gcs_opts, tmp_path, "gzip", corrupt=False)


@pytest.mark.s3
def test_retried_bundle_leaves_no_duplicate_or_partial_shard(
    s3_service: LiveService, s3_opts: dict, tmp_path: Path
) -> None:
    client = s3_service.client(storage_options=s3_opts)
    payloads = sample_examples(300)
    # Two records fail on their first serialization, mid-shard, in the writing worker.
    markers = [tmp_path / "fail-a", tmp_path / "fail-b"]
    elements: list[Any] = list(payloads)
    elements[150] = tb.FailsOnce(payloads[150], str(markers[0]))
    elements[251] = tb.FailsOnce(payloads[251], str(markers[1]))
    write = WriteVersionedTFRecords("coco", num_shards=3, shard_size="8KB", client=client)
    with beam.Pipeline(options=tb.options(tb.RETRYING)) as p:
        versions = p | beam.Create(elements, reshuffle=False) | write
        tb.write_json_lines(versions, tmp_path / "versions", "Versions")
    assert all(m.exists() for m in markers)  # both failures happened, then were retried

    version = client.resolve("coco@latest")
    [emitted] = tb.read_lines(tmp_path / "versions")
    assert emitted["name"] == version.name
    assert version.was_staged_as(write.staged.name)  # type: ignore[union-attr]
    assert version.record_count == len(payloads)
    uris = [s.uri for s in version.shards]
    assert len(uris) == len(set(uris))
    # every record once: nothing duplicated, nothing lost, no shard from a failed attempt
    stored = [
        r
        for s in version.shards
        for r in rk.tfrecord.iter_records(
            __import__("io").BytesIO(sc.get_bytes(s.uri, s3_opts)), s.compression
        )
    ]
    assert Counter(stored) == Counter(payloads)
    objects = _objects(version.storage_prefix, s3_opts)
    shards = [u for u in objects if "/.recordkeeper/" not in u]
    assert sorted(shards) == sorted(uris)  # no _incomplete leftovers, no extra objects
    # beside them the record identity the workers computed while writing, nothing else
    lookup = f"{version.storage_prefix.rstrip('/')}/.recordkeeper/records.rklookup"
    assert sorted(set(objects) - set(shards)) == sorted([lookup, *map(index_uri, uris)])
    assert client.record_sets(version.name)
    assert version.verify(deep=True).ok


@pytest.mark.s3
def test_failed_pipeline_commits_nothing_and_gc_collects_it(
    s3_service: LiveService, s3_opts: dict, tmp_path: Path
) -> None:
    client = s3_service.client(storage_options=s3_opts)
    records: list[Any] = list(sample_examples(200))
    records[120] = 12345  # not a record: the worker writing its shard fails, every attempt
    write = WriteVersionedTFRecords("coco", num_shards=4, shard_size="8KB", client=client)
    pipeline = beam.Pipeline(options=tb.options(tb.MULTI_PROCESS))
    _ = pipeline | beam.Create(records, reshuffle=False) | write
    with pytest.raises(Exception, match="SerializeToString"):
        pipeline.run().wait_until_finish()
    staged = write.staged
    assert staged is not None
    with pytest.raises(rk.VersionNotFound):
        client.resolve("coco@latest")
    [listed] = client.versions("coco", state="staged")
    assert listed.name == staged.name  # staged, invisible to resolution
    written = _objects(staged.storage_prefix, s3_opts)
    assert written and all("/_incomplete/" in u for u in written)  # other keys' shards

    # what the failed job wrote is reachable by gc: abandon it, collect the prefix
    client.abandon(staged.name)
    assert [c.name for c in client.gc_candidates()] == [staged.name]
    report = client.collect_garbage(dry_run=False, allowed_roots=[client.info()["storage_root"]])
    assert [i.name for i in report.items if i.action == "deleted"] == [staged.name]
    assert _objects(staged.storage_prefix, s3_opts) == []


@pytest.mark.gcs
def test_publish_existing_gcs(
    gcs_service: LiveService, gcs_bucket: str, gcs_opts: dict, tmp_path: Path
) -> None:
    client = gcs_service.client(storage_options=gcs_opts)
    raw = f"{gcs_bucket}/raw"
    expected = []
    for i in range(3):
        recs = sample_examples(40, i * 40)
        expected += recs
        sc.put_bytes(f"{raw}/coco-train.tfrecord-{i:05d}-of-00003", frame(recs), gcs_opts)
    in_place = PublishExisting(raw, name="coco", force_new=True, client=client)
    copied = PublishExisting(
        rk.Dataset.from_directory(raw, "coco", storage_options=gcs_opts),
        copy_to=True,
        force_new=True,
        client=client,
    )
    with beam.Pipeline(options=tb.options(tb.MULTI_PROCESS)) as p:  # two jobs in one pipeline
        tb.write_json_lines(p | "InPlace" >> in_place, tmp_path / "a", "A")
        tb.write_json_lines(p | "Copied" >> copied, tmp_path / "b", "B")
    [a], [b] = tb.read_lines(tmp_path / "a"), tb.read_lines(tmp_path / "b")
    va, vb = client.resolve(a["name"]), client.resolve(b["name"])
    assert va.record_count == vb.record_count == len(expected)
    assert va.content_digest == vb.content_digest and va.name != vb.name
    assert [s.uri for s in va.shards] == [
        f"{raw}/coco-train.tfrecord-{i:05d}-of-00003" for i in range(3)
    ]
    assert all(s.uri.startswith(vb.storage_prefix) for s in vb.shards)
    assert vb.verify(deep=True).ok and va.verify().ok
    assert json.dumps(b["splits"]["train"]["shard_count"]) == "3"

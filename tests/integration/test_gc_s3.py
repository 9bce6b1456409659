"""``recordkeeper gc`` over a real S3 server: a crashed writer's objects go, committed ones stay."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import fsspec
import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from tests.client._records import frame, sample_examples
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService
from tests.service.test_gc import age

pytestmark = pytest.mark.s3


def _objects(uri: str, opts: dict[str, Any]) -> dict[str, int]:
    """Every key under ``uri`` with its size, straight from ListObjectsV2 (no fsspec cache)."""
    fs, path = fsspec.core.url_to_fs(uri, **opts)
    bucket, _, key = path.partition("/")
    prefix = key.rstrip("/") + "/"
    found: dict[str, int] = {}
    token: dict[str, str] = {}
    while True:
        page = fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, **token)
        found.update({o["Key"]: int(o["Size"]) for o in page.get("Contents", [])})
        if not page.get("IsTruncated"):
            return found
        token = {"ContinuationToken": page["NextContinuationToken"]}


def _option_args(opts: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for key, value in opts.items():
        if isinstance(value, dict):
            args += [arg for sub, v in value.items() for arg in ("-o", f"{key}.{sub}={v}")]
        else:
            args += ["-o", f"{key}={value}"]
    return args


def test_gc_deletes_a_crashed_writers_objects_only(
    live_service_factory: Callable[..., LiveService], s3_bucket: str, s3_server: Any
) -> None:
    opts = dict(s3_server.storage_options)
    service = live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])
    client = service.client(storage_options=opts)

    # A committed version written under the storage root, which trained a checkpoint ...
    with client.writer("coco", storage_options=opts) as w:
        for record in sample_examples(30):
            w.write(record, split="train")
    trained = w.version
    client.register_checkpoint(model="det", checkpoint="ckpt-1", step=1, data={"train": trained})
    # ... and one registered in place elsewhere in the same bucket.
    raw = f"{s3_bucket}/raw/coco"
    sc.make_raw_dataset(raw, opts, shards=2, per_shard=5)
    in_place = client.publish(
        rk.Dataset.from_directory(raw, name="coco", storage_options=opts), progress=False
    )
    before_committed = _objects(trained.storage_prefix, opts)
    before_raw = _objects(raw, opts)
    assert before_committed and before_raw

    # A crashed writer: staged two hours ago (its number reserved, as the writer stages, so its
    # prefix carries that name), objects written under its prefix, never committed.
    crashed = client.stage("coco", reserve=True)
    assert crashed.number is not None and crashed.name.endswith(f"_v{crashed.number}")
    age(service.database_url, crashed.name, 2 * 3600)
    prefix = crashed.storage_prefix
    assert prefix.startswith(f"{s3_bucket}/datasets/coco/{crashed.name}/")
    sc.put_bytes(f"{prefix}train-00000-of-00002.tfrecord", frame(sample_examples(5)), opts)
    sc.put_bytes(f"{prefix}_incomplete/train-00001-of-00002.tfrecord", b"partial", opts)
    written = _objects(prefix, opts)
    assert len(written) == 2
    # Another writer at work right now: the service never releases its prefix.
    busy = client.stage("coco")
    sc.put_bytes(f"{busy.storage_prefix}train-00000-of-00001.tfrecord", b"in flight", opts)

    runner = CliRunner()
    base = ["--url", service.url, "gc", "--older-than", "0", *_option_args(opts), "--json"]
    dry = runner.invoke(app, base)
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.stdout)
    assert report["dry_run"] and [i["name"] for i in report["items"]] == [crashed.name]
    assert report["objects"] == 2 and report["bytes"] == sum(written.values())
    assert len(_objects(prefix, opts)) == 2

    done = runner.invoke(app, [*base, "--delete", "--root", s3_bucket])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert not report["dry_run"] and report["ok"] and report["objects"] == 2
    assert report["bytes"] == sum(written.values())
    assert [(i["name"], i["action"]) for i in report["items"]] == [(crashed.name, "deleted")]
    assert _objects(prefix, opts) == {}
    assert client.resolve(crashed.name).state == "abandoned"
    assert client.gc_candidates(staged_older_than=0) == []
    assert len(_objects(busy.storage_prefix, opts)) == 1
    assert client.resolve(busy.name).state == "staged"

    # Committed objects in the same bucket are untouched and still verify.
    assert _objects(trained.storage_prefix, opts) == before_committed
    assert _objects(raw, opts) == before_raw
    for version in (trained, in_place):
        assert client.resolve(version.name).verify(deep=True).ok


def test_gc_keeps_an_object_another_staged_version_registered(
    live_service_factory: Callable[..., LiveService], s3_bucket: str, s3_server: Any
) -> None:
    """Issue 22, hole 2 on S3: a staged version's shard under an abandoned version's prefix
    survives gc, and the version then commits and verifies."""
    from recordkeeper.dataset import ShardFile
    from recordkeeper.publish import scan_file

    opts = dict(s3_server.storage_options)
    service = live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])
    client = service.client(storage_options=opts)
    dropped = client.stage("coco")
    shard = f"{dropped.storage_prefix}train-00000-of-00001.tfrecord"
    sc.put_bytes(shard, frame(sample_examples(5)), opts)
    sc.put_bytes(f"{dropped.storage_prefix}_incomplete/train-00001.tfrecord", b"junk", opts)
    client.abandon(dropped.name)
    other = client.stage("coco")
    client.registry.register_shards(other.name, [scan_file(ShardFile("train", 0, 1, shard), opts)])

    base = ["--url", service.url, "gc", "--older-than", "0", *_option_args(opts), "--json"]
    done = CliRunner().invoke(app, [*base, "--delete", "--root", s3_bucket])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert (report["objects"], report["kept"]) == (1, 1)
    assert list(_objects(dropped.storage_prefix, opts)) == [shard.split("/", 3)[3]]
    assert client.commit(other.name).verify(deep=True).ok

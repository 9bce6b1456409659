"""``client.derive`` end to end over a real socket: SQLite and PostgreSQL, local disk and S3
(SeaweedFS).  A derived version references its base's kept shards (no object is copied: the
new prefix holds only what was written), reads and verifies deeply, records its base as a
provenance parent; retention of the base and gc of an abandoned derivation keep every object a
live version lists; bad changes are refused with a code and nothing is staged."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from recordkeeper.core.record_identity import record_hash
from recordkeeper.record_sets import LOOKUP_NAME, lookup_uri
from tests.client._records import frame, sample_examples
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService
from tests.integration.test_gc_s3 import _option_args, age


def _exists(uri: str, opts: dict[str, Any]) -> bool:
    fs, path = fsspec.core.url_to_fs(uri, **({} if uri.startswith("file://") else opts))
    fs.invalidate_cache()
    return bool(fs.exists(path))


def _objects(prefix: str, opts: dict[str, Any]) -> list[str]:
    """The shard objects under ``prefix`` (not the record indexes stored beside them)."""
    fs, path = fsspec.core.url_to_fs(prefix, **({} if prefix.startswith("file://") else opts))
    fs.invalidate_cache()
    found = fs.find(path) if fs.exists(path) else []
    shards = (p for p in found if "/.recordkeeper/" not in p)
    return sorted(p for p in shards if p.rstrip("/") != path.rstrip("/"))  # not the "directory"


@pytest.fixture(
    params=[("sqlite", "local"), ("postgresql", "local"), ("sqlite", "s3"), ("postgresql", "s3")],
    ids=lambda p: "-".join(p),
)
def setup(
    request: pytest.FixtureRequest,
    live_service_factory: Callable[..., LiveService],
    tmp_path: Path,
) -> tuple[LiveService, str, dict[str, Any]]:
    database, storage = request.param
    url = request.getfixturevalue("postgres_database_url") if database == "postgresql" else None
    if storage == "s3":
        bucket: str = request.getfixturevalue("s3_bucket")
        opts = dict(request.getfixturevalue("s3_server").storage_options)
        service = live_service_factory(
            storage_root=f"{bucket}/datasets", allowed_roots=[bucket], database_url=url
        )
        return service, bucket, opts
    root = (tmp_path / "data").as_uri()
    (tmp_path / "data").mkdir()
    service = live_service_factory(
        storage_root=f"{root}/datasets", allowed_roots=[root], database_url=url
    )
    return service, root, {}


def _base(client: rk.Client, opts: dict[str, Any]) -> rk.DatasetVersion:
    with client.writer("coco", storage_options=opts, shard_size="4KB", desc="first") as w:
        for i, record in enumerate(sample_examples(300)):
            w.write(record, split="train" if i % 5 else ("test" if i % 2 else "validation"))
    return w.version


def test_derive_references_the_base(setup: tuple[LiveService, str, dict[str, Any]]) -> None:
    service, root, opts = setup
    client = service.client(storage_options=opts)
    v1 = _base(client, opts)
    train1 = v1.splits["train"].shards
    assert len(train1) > 3
    extra = f"{root}/raw/extra-train.tfrecord"
    sc.put_bytes(extra, frame(sample_examples(7, 5000)), opts)
    added = sample_examples(20, 9000) + sample_examples(7, 5000)
    with client.derive(f"coco@v{v1.number}", desc="add_person") as d:
        for record in added[:20]:
            d.write(record, split="train")
        d.add_files("train", [extra])
        d.remove_split("test")
        d.rename_split("validation", "val")
    v2 = d.version
    # record identity: the written shard and the added file indexed as they were written or
    # scanned, the base's indexes reused; the record diff shows exactly the added records
    assert d.record_set is not None and client.record_sets(v2.name)
    records = client.diff(v1.name, v2.name, records=True, sample=30)
    t = records.splits["train"]
    assert (t.added, t.removed, t.common) == (27, 0, v1.splits["train"].record_count)
    assert sorted(t.sample_added) == sorted(record_hash(r).hex() for r in added)
    assert records.splits["test"].removed == v1.splits["test"].record_count
    assert records.moved == {("validation", "val"): v1.splits["validation"].record_count}
    assert v2.name.endswith(f"_v{v1.number + 1}_add_person")
    assert [(p.name, p.role) for p in v2.provenance.parents] == [(v1.name, "base")]
    assert sorted(v2.splits) == ["train", "val"]
    train2 = v2.splits["train"].shards
    # the base's shards, the same objects, then the written one and the file in place
    assert [(s.uri, s.sha256) for s in train2[: len(train1)]] == [(s.uri, s.sha256) for s in train1]
    assert train2[-1].uri == extra
    assert train2[len(train1)].uri.startswith(v2.storage_prefix)
    assert [s.index for s in train2] == list(range(len(train2)))
    assert [s.uri for s in v2.splits["val"].shards] == [
        s.uri for s in v1.splits["validation"].shards
    ]
    # nothing of the base was copied: the new prefix holds the written shard only
    assert len(_objects(v2.storage_prefix, opts)) == 1
    assert v2.record_count == v1.record_count - v1.splits["test"].record_count + 27
    assert client.resolve(v2.name).with_storage_options(opts).verify(deep=True).ok
    diff = client.diff(v1.name, v2.name)
    assert {(c.split, c.change) for c in diff.shards} == {("train", "added")} | {
        ("test", "removed")
    } | {("val", "added")} | {("validation", "removed")}
    assert len(diff.added) == 2 + len(v1.splits["validation"].shards)
    assert diff.basis == "shards"  # this client holds both versions' shards: compared here
    # a client holding neither has the service diff them from the derivation: the same answer
    fresh = service.client(storage_options=opts)
    derived = fresh.diff(v1.name, v2.name)
    assert derived.basis == "derivation"
    assert dataclasses.replace(derived, basis="shards") == diff
    assert fresh.diff(v2.name, v1.name) == dataclasses.replace(
        client.diff(v2, v1), basis="derivation"
    )

    # retention of the base keeps every object the child lists
    client.set_retention_policy("coco", keep_last=1)
    report = client.apply_retention("coco", allowed_roots=[root])
    assert report.ok, report.to_dict()
    assert [i.name for i in report.items] == [v1.name]
    assert not any(_exists(s.uri, opts) for s in v1.splits["test"].shards)
    assert all(_exists(s.uri, opts) for s in v2.shards)
    assert client.resolve(v2.name).with_storage_options(opts).verify(deep=True).ok
    with pytest.raises(rk.VersionDataDeleted):
        client.derive(v1.name, desc="again").remove_split("train").commit()


def test_gc_of_an_abandoned_derivation_keeps_the_base(
    setup: tuple[LiveService, str, dict[str, Any]],
) -> None:
    service, root, opts = setup
    client = service.client(storage_options=opts)
    v1 = _base(client, opts)
    d = client.derive(v1.name, desc="crashed")
    for record in sample_examples(10, 7000):
        d.write(record, split="train")
    staged = d._writer.staged
    assert staged is not None
    # the process dies: the staging is left, with a written temporary shard
    d._writer.finish_shards()
    written = _objects(staged.storage_prefix, opts)
    assert written
    age(service.database_url, staged.name, 2 * 3600)
    report = client.collect_garbage(staged_older_than=3600, dry_run=False, allowed_roots=[root])
    assert report.ok and [i.name for i in report.items] == [staged.name]
    assert _objects(staged.storage_prefix, opts) == []
    assert all(_exists(s.uri, opts) for s in v1.shards)
    assert client.resolve(v1.name).with_storage_options(opts).verify(deep=True).ok


def test_bad_changes_stage_nothing(setup: tuple[LiveService, str, dict[str, Any]]) -> None:
    service, _root, opts = setup
    client = service.client(storage_options=opts)
    v1 = _base(client, opts)
    with pytest.raises(rk.ParentNotFound):
        client.derive("coco@v9")
    staged = client.stage("coco")
    with pytest.raises(rk.ParentNotCommitted):
        client.derive(staged.name)
    d = client.derive(v1.name)
    with pytest.raises(rk.RecordkeeperError) as missing:
        d.remove_split("nope")
    assert missing.value.code == "split_not_found"
    with pytest.raises(rk.RecordkeeperError) as exists:
        d.rename_split("train", "test")
    assert exists.value.code == "split_exists"
    with pytest.raises(rk.RecordkeeperError) as shard:
        d.remove_shards("train:100000")
    assert shard.value.code == "shard_not_found"
    # values of the wrong type: invalid_request, not a TypeError/AttributeError
    for wrong in (
        lambda: d.remove_shards(5),  # type: ignore[arg-type]
        lambda: d.remove_shards(["train:0", 4]),  # type: ignore[list-item]
        lambda: d.remove_split(None),  # type: ignore[arg-type]
        lambda: d.rename_split("train", 3),  # type: ignore[arg-type]
        lambda: d.add_files("train", "file:///one/string"),
        lambda: d.add_files("train", [b"file:///bytes"]),  # type: ignore[list-item]
    ):
        with pytest.raises(rk.InvalidRequest):
            wrong()
    # a list of positions is as good as positions as arguments
    assert client.derive(v1.name).remove_shards(["train:0", "train:1"]) is not None
    uri = v1.splits["train"].shards[0].uri
    with pytest.raises(rk.ShardConflict):
        client.derive(v1.name).add_files("train", [uri]).commit()  # already the base's
    with pytest.raises(rk.ShardConflict):
        client.derive(v1.name).add_files("extra", [uri, uri])
    listed = client.versions("coco")
    assert [v.name for v in listed if v.state == "committed"] == [v1.name]
    assert {v.state for v in listed if v.name != v1.name} <= {"staged", "abandoned"}


def test_cli_derive(setup: tuple[LiveService, str, dict[str, Any]]) -> None:
    service, root, opts = setup
    client = service.client(storage_options=opts)
    v1 = _base(client, opts)
    extra = f"{root}/raw/more.tfrecord"
    sc.put_bytes(extra, frame(sample_examples(4, 100)), opts)
    args = ["--url", service.url, "derive", f"coco@v{v1.number}", "--desc", "cli_change"]
    args += ["--add-shard", f"train={extra}", "--remove-split", "test", "--json"]
    args += _option_args(opts)
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)
    assert answer["name"].endswith("_cli_change") and answer["state"] == "committed"
    v2 = client.resolve(answer["name"])
    assert v2.splits["train"].shards[-1].uri == extra
    assert "test" not in v2.splits
    # nothing written, the number given at commit: the version's own objects (its record
    # lookup) are stored under its committed name, none under the staged one
    assert v2.storage_prefix.endswith(f"/coco/{v2.name}/")
    assert _exists(lookup_uri(v2), opts)
    staged_prefix = v2.storage_prefix.replace(v2.name, answer["staged_name"])
    assert not _exists(staged_prefix + LOOKUP_NAME, opts)
    bad = CliRunner().invoke(
        app, ["--url", service.url, "derive", v1.name, "--remove-split", "nope"]
    )
    assert bad.exit_code != 0 and "split_not_found" in bad.output

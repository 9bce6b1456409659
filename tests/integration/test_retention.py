"""Retention plan and apply over a real socket, on local disk, S3 (SeaweedFS) and GCS
(fake-gcs-server), with SQLite and PostgreSQL: every keep rule, a shared object, a forced
deletion of trained data, a crashed apply finished by the next, history kept."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import httpx
import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from tests.client._records import frame, sample_examples
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService


def _exists(uri: str, opts: dict[str, Any]) -> bool:
    fs, path = fsspec.core.url_to_fs(uri, **({} if uri.startswith("file://") else opts))
    fs.invalidate_cache()
    return bool(fs.exists(path))


def _write(client: rk.Client, opts: dict[str, Any], start: int) -> rk.DatasetVersion:
    with client.writer("coco", storage_options=opts, shard_size=1) as w:
        for record in sample_examples(4, start):
            w.write(record, split="train")
    return w.version


def _scenario(service: LiveService, root: str, opts: dict[str, Any]) -> None:
    client = service.client(storage_options=opts)
    versions = [_write(client, opts, 100 * k) for k in range(3)]  # v1, v2, v3
    v1, v2, v3 = versions
    # Two versions registering the same object in place: s0 is shared by v4 and v5.
    s0, s1, t1 = (f"{root}/raw/{n}-train.tfrecord" for n in ("s0", "s1", "t1"))
    for k, uri in enumerate((s0, s1, t1)):
        sc.put_bytes(uri, frame(sample_examples(3, 1000 + 10 * k)), opts)
    v4 = client.publish(rk.Dataset.from_files("coco", [s0, s1], storage_options=opts))
    v5 = client.publish(rk.Dataset.from_files("coco", [s0, t1], storage_options=opts))
    assert (v4.number, v5.number) == (4, 5)
    client.register_checkpoint(model="det", checkpoint="ckpt-1", step=1, data={"train": v1})
    client.pin_versions("release-1", ["coco@v2"])
    client.set_retention_policy("coco", keep_last=1)

    plan = client.retention_plan("coco")
    actions = {i.number: i.action for i in plan.items}
    assert actions == {1: "keep", 2: "keep", 3: "delete", 4: "delete", 5: "keep"}
    rules = {i.number: {r for r, _ in i.kept_by} for i in plan.items}
    assert rules[1] == {"trained"} and rules[2] == {"pinned"} and rules[5] == {"last", "alias"}
    item4 = next(i for i in plan.items if i.number == 4)
    assert (item4.objects, item4.shared) == (1, 1)  # s1 is freed, s0 stays (v5 is live)
    assert plan.objects == v3.shard_count + 1
    assert plan.bytes == v3.size + next(s.size for s in v4.shards if s.uri == s1)
    assert all(_exists(s.uri, opts) for s in v3.shards)  # the plan changed nothing

    # A crashed apply: v3 was claimed and one of its objects deleted, then the run died.
    claimed = client.http.api("POST", "/retention/claims", json={"dataset": "coco", "limit": 1})
    assert [c["name"] for c in claimed["data"]] == [v3.name]
    fs, path = fsspec.core.url_to_fs(
        v3.shards[0].uri, **({} if root.startswith("file://") else opts)
    )
    fs.rm_file(path)

    roots = [root]
    report = client.apply_retention("coco", allowed_roots=roots)
    assert report.ok, report.to_dict()
    by_name = {i.name: i for i in report.items}
    assert set(by_name) == {v3.name, v4.name}
    assert by_name[v3.name].resumed and by_name[v3.name].objects == v3.shard_count
    assert (by_name[v4.name].objects, by_name[v4.name].kept) == (1, 1)
    assert not any(_exists(s.uri, opts) for s in v3.shards)
    assert not _exists(s1, opts) and _exists(s0, opts) and _exists(t1, opts)
    for kept in (v1, v2, v5):
        assert all(_exists(s.uri, opts) for s in kept.shards)
    assert client.apply_retention("coco", allowed_roots=roots).items == []  # nothing left

    # History is kept: the row, digests and shards answer; reading is refused, typed.
    gone = client.resolve(v3.name)
    assert gone.data_state == "deleted" and gone.content_digest == v3.content_digest
    assert gone.data_status().startswith("data deleted 20") and "(retention)" in gone.data_status()
    assert gone.shard_count == v3.shard_count and gone.schema.features
    with pytest.raises(rk.VersionDataDeleted) as caught:
        gone.verify()
    assert caught.value.code == "version_data_deleted" and caught.value.extra["deleted_at"]

    # Trained data goes only with force and a reason, recorded; lineage still answers.
    client.set_retention_policy("coco", keep_last=1, keep_trained=False)
    plan = client.retention_plan("coco")
    assert {i.number: i.action for i in plan.items}[1] == "needs_force"
    assert client.apply_retention("coco", allowed_roots=roots).items == []
    forced = client.apply_retention(
        "coco", force=True, reason="labels were wrong", allowed_roots=roots
    )
    assert forced.ok and [i.name for i in forced.items] == [v1.name] and forced.items[0].forced
    assert not any(_exists(s.uri, opts) for s in v1.shards)
    lineage = client.lineage("det/ckpt-1")
    assert v1.name in lineage.versions
    (entry,) = lineage.data
    assert entry.version == v1.name and entry.data_state == "deleted"
    assert entry.data_status() == gone_status(client, v1.name)
    events = client.http.api("GET", "/events", params={"action": "version.retention_claimed"})
    reasons = [e["detail"].get("force_reason") for e in events["data"] if e["version"] == v1.name]
    assert reasons == ["labels were wrong"]


def gone_status(client: rk.Client, name: str) -> str:
    """How the version itself says its data was deleted (``data deleted <date> (retention)``)."""
    status = client.resolve(name).data_status()
    assert status.startswith("data deleted 20") and status.endswith("(retention)")
    return status


@pytest.mark.postgres
def test_retention_local_postgres(
    live_service_factory: Callable[..., LiveService],
    postgres_database_factory: Callable[[], str],
    tmp_path: Path,
) -> None:
    root = (tmp_path / "data").as_uri()
    (tmp_path / "data").mkdir()
    service = live_service_factory(
        storage_root=f"{root}/datasets",
        allowed_roots=[root],
        database_url=postgres_database_factory(),
    )
    _scenario(service, root, {})


def test_retention_local_sqlite(
    live_service_factory: Callable[..., LiveService], tmp_path: Path
) -> None:
    root = (tmp_path / "data").as_uri()
    (tmp_path / "data").mkdir()
    service = live_service_factory(storage_root=f"{root}/datasets", allowed_roots=[root])
    _scenario(service, root, {})


@pytest.mark.s3
@pytest.mark.postgres
def test_retention_s3_postgres(
    live_service_factory: Callable[..., LiveService],
    postgres_database_factory: Callable[[], str],
    s3_bucket: str,
    s3_server: Any,
) -> None:
    service = live_service_factory(
        storage_root=f"{s3_bucket}/datasets",
        allowed_roots=[s3_bucket],
        database_url=postgres_database_factory(),
    )
    _scenario(service, s3_bucket, dict(s3_server.storage_options))


@pytest.mark.gcs
def test_retention_gcs_sqlite(
    live_service_factory: Callable[..., LiveService], gcs_bucket: str, gcs_server: Any
) -> None:
    service = live_service_factory(
        storage_root=f"{gcs_bucket}/datasets", allowed_roots=[gcs_bucket]
    )
    _scenario(service, gcs_bucket, dict(gcs_server.storage_options))


def test_apply_never_deletes_through_a_symlink_and_the_cli_reports_it(
    live_service_factory: Callable[..., LiveService], tmp_path: Path
) -> None:
    root = tmp_path / "data"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    service = live_service_factory(
        storage_root=f"{root.as_uri()}/datasets", allowed_roots=[root.as_uri()]
    )
    client = service.client()
    old = _write(client, {}, 0)
    _write(client, {}, 100)
    client.set_retention_policy("coco", keep_last=1)
    # Someone replaced a committed shard by a link to a file outside the roots, and the
    # version's directory of another shard by a link to a folder outside.
    victim = outside / "precious.tfrecord"
    victim.write_bytes(b"precious")
    link = Path(old.shards[0].uri[len("file://") :])
    link.unlink()
    os.symlink(victim, link)

    runner = CliRunner()
    env = {**service.env, "RECORDKEEPER_ALLOWED_ROOTS": root.as_uri()}
    shown = runner.invoke(app, ["retention", "plan", "coco"], env=env)
    assert shown.exit_code == 0, shown.output
    assert "would delete 1 version(s)" in shown.output
    # Without roots of its own, apply refuses before claiming anything.
    refused = runner.invoke(app, ["retention", "apply", "coco"], env=service.env)
    assert refused.exit_code != 0 and "storage_root_not_allowed" in refused.output
    assert client.resolve(old.name).data_state == "stored"
    applied = runner.invoke(app, ["retention", "apply", "coco"], env=env)
    assert applied.exit_code == 0, applied.output
    # The link was removed as itself; what it pointed at is untouched.
    assert victim.read_bytes() == b"precious" and not link.is_symlink()
    assert not any(Path(s.uri[len("file://") :]).exists() for s in old.shards)
    listed = runner.invoke(app, ["ls", "coco"], env=env)
    assert "data deleted" in listed.output and "(retention)" in listed.output


def test_apply_keeps_a_version_whose_directory_became_a_link_released_and_says_so(
    live_service_factory: Callable[..., LiveService], tmp_path: Path
) -> None:
    root = tmp_path / "data"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    service = live_service_factory(
        storage_root=f"{root.as_uri()}/datasets", allowed_roots=[root.as_uri()]
    )
    client = service.client()
    old = _write(client, {}, 0)
    _write(client, {}, 100)
    client.set_retention_policy("coco", keep_last=1)
    directory = Path(old.shards[0].uri[len("file://") :]).parent
    shutil.rmtree(directory / ".recordkeeper")  # the record indexes: not the point here
    for shard in directory.iterdir():
        (outside / shard.name).write_bytes(b"precious")
        shard.unlink()
    directory.rmdir()
    os.symlink(outside, directory)
    report = client.apply_retention("coco", allowed_roots=[root.as_uri()])
    assert not report.ok and report.items[0].action == "incomplete"
    failed = report.items[0].failed
    assert len(failed) == len(old.shards) and "outside" in failed[0]["error"]
    assert all(p.read_bytes() == b"precious" for p in outside.iterdir())
    assert client.resolve(old.name).data_state == "deleting"  # released, not finished
    directory.unlink()  # the link removed by hand: the next apply finishes the version
    assert client.apply_retention("coco", allowed_roots=[root.as_uri()]).ok
    assert client.resolve(old.name).data_state == "deleted"


def _lineage_after_retention_apply(service: LiveService, root: str) -> None:
    client = service.client()
    old, new = _write(client, {}, 0), _write(client, {}, 100)
    client.register_checkpoint(
        model="det", checkpoint="ckpt-1", step=1, run="r1", data={"train": old}
    )
    client.register_checkpoint(
        model="det",
        checkpoint="ckpt-2",
        step=2,
        run="r1",
        parent="det@r1/ckpt-1",
        data={"train": new},
    )
    url = f"{service.url}/api/v1/models/det/checkpoints/ckpt-2/lineage"
    first = httpx.get(url, params={"run": "r1"})  # rendered now, and kept by the service
    assert first.status_code == 200 and "ETag" in first.headers
    assert {e["data_state"] for e in first.json()["data"]} == {"stored"}
    runner = CliRunner()
    env = {**service.env, "RECORDKEEPER_ALLOWED_ROOTS": root}
    shown = runner.invoke(app, ["lineage", "det@r1/ckpt-2"], env=env)
    assert shown.exit_code == 0 and "data deleted" not in shown.output

    client.set_retention_policy("coco", keep_last=1, keep_trained=False)
    applied = runner.invoke(
        app, ["retention", "apply", "coco", "--force", "--reason", "bad labels"], env=env
    )
    assert applied.exit_code == 0, applied.output
    status = gone_status(client, old.name)

    # the kept answer is not served again: its tag no longer matches, the entry says deleted
    again = httpx.get(url, params={"run": "r1"}, headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 200 and again.headers["ETag"] != first.headers["ETag"]
    entries = {e["version"]: e for e in again.json()["data"]}
    assert entries[old.name]["data_state"] == "deleted"
    assert entries[old.name]["data_deleted_reason"] == "retention"
    assert entries[old.name]["data_deleted_at"] == client.resolve(old.name).data_deleted_at
    assert entries[new.name]["data_state"] == "stored"
    compact = httpx.get(url, params={"run": "r1", "form": "compact"}).json()["compact"]
    states = dict(zip(compact["columns"]["version"], compact["columns"]["data_state"], strict=True))
    assert states == {old.name: "deleted", new.name: "stored"}

    out = runner.invoke(app, ["lineage", "det@r1/ckpt-2"], env=env).output
    marked = [line for line in out.splitlines() if f"({status})" in line]
    assert len(marked) == 1 and old.name in marked[0], out
    body = json.loads(runner.invoke(app, ["lineage", "det@r1/ckpt-2", "--json"], env=env).output)
    assert {e["version"]: e["data_state"] for e in body["data"]} == {
        old.name: "deleted",
        new.name: "stored",
    }
    consumers = runner.invoke(app, ["consumers", old.name], env=env).output
    assert f"{old.name} ({status})" in consumers and "2 checkpoint(s)" in consumers
    graph = client.lineage_graph(checkpoint="det@r1/ckpt-2", direction="upstream")
    node = next(n for n in graph.nodes if n.id == f"version:{old.name}")
    assert node.data_status() == status


def test_lineage_shows_data_retention_deleted_sqlite(
    live_service_factory: Callable[..., LiveService], tmp_path: Path
) -> None:
    root = (tmp_path / "data").as_uri()
    (tmp_path / "data").mkdir()
    service = live_service_factory(storage_root=f"{root}/datasets", allowed_roots=[root])
    _lineage_after_retention_apply(service, root)


@pytest.mark.postgres
def test_lineage_shows_data_retention_deleted_postgres(
    live_service_factory: Callable[..., LiveService],
    postgres_database_factory: Callable[[], str],
    tmp_path: Path,
) -> None:
    root = (tmp_path / "data").as_uri()
    (tmp_path / "data").mkdir()
    service = live_service_factory(
        storage_root=f"{root}/datasets",
        allowed_roots=[root],
        database_url=postgres_database_factory(),
    )
    _lineage_after_retention_apply(service, root)

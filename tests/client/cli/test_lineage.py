"""``recordkeeper lineage``, ``consumers``, ``checkpoints ls|flush``: trees, --json, exit codes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper import cli
from recordkeeper.checkpoint_lineage import checkpoint_body
from recordkeeper.lineage_queue import RegistrationQueue
from tests.client import _lineage_app
from tests.client._lineage_app import publish

app_http = _lineage_app.app_http
switch = _lineage_app.switch
client = _lineage_app.client
runner = _lineage_app.runner

pytest.importorskip("fastapi")


def _history(client: rk.Client) -> rk.DatasetVersion:
    v1 = publish(client, "first")
    client.register_checkpoint(model="det", checkpoint="ckpt-1", step=1, data={"train": v1})
    client.register_checkpoint(
        model="det", checkpoint="ckpt-2", step=2, data={"eval": v1}, parent="det/ckpt-1"
    )
    client.register_checkpoint(
        model="ft", checkpoint="ckpt-1", step=5, parent="det/ckpt-2", parent_kind="initialized_from"
    )
    return v1


def test_lineage_tree_and_json(runner: CliRunner, client: rk.Client) -> None:
    v1 = _history(client)
    result = runner.invoke(cli.app, ["lineage", "ft/ckpt-1"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "ft@default/ckpt-1" in out and "initialized_from" in out and "det@default/ckpt-1" in out
    assert f"{v1.name}  train [train]" in out and f"{v1.name}  eval [validation]" in out
    assert "(no data)" in out  # ft/ckpt-1's own segment recorded none
    body = json.loads(runner.invoke(cli.app, ["lineage", "ft/ckpt-1", "--json"]).output)
    assert body["versions"] == [v1.name] and len(body["chain"]) == 3
    missing = runner.invoke(cli.app, ["lineage", "det/ckpt-9"])
    assert missing.exit_code == 3 and "[checkpoint_not_found]" in missing.output
    bad = runner.invoke(cli.app, ["lineage", "nonsense"])
    assert bad.exit_code == 1 and "[invalid_checkpoint]" in bad.output


def test_lineage_consumers_and_ls_mark_data_retention_deleted(
    runner: CliRunner, client: rk.Client
) -> None:
    """Retention deletes (forced) the data of a version checkpoints trained on: the tree, the
    consumers title, ``checkpoints ls`` and every ``--json`` say so; the newer version is not
    marked.  The first ``lineage`` answer is kept by the service: the next one is not stale."""
    v1 = _history(client)
    v2 = publish(client, "second")
    client.register_checkpoint(
        model="det", checkpoint="ckpt-3", step=3, data={"train": v2}, parent="det/ckpt-2"
    )
    before = runner.invoke(cli.app, ["lineage", "det/ckpt-3"])
    assert before.exit_code == 0 and "data deleted" not in before.output
    client.set_retention_policy("coco", keep_last=1, keep_trained=False)
    roots = list(client.info()["allowed_roots"])
    report = client.apply_retention("coco", force=True, reason="bad labels", allowed_roots=roots)
    assert report.ok and [i.name for i in report.items] == [v1.name]
    day = client.resolve(v1.name).data_deleted_at[:10]
    mark = f"(data deleted {day} (retention))"

    out = runner.invoke(cli.app, ["lineage", "det/ckpt-3"]).output
    lines = {line.strip(" │├└─") for line in out.splitlines()}
    marked = [line for line in lines if mark in line]
    assert marked and all(line.startswith(v1.name) for line in marked)  # v1's uses, not v2's
    assert any(line.startswith(f"{v2.name}  train [train]") for line in lines)
    body = json.loads(runner.invoke(cli.app, ["lineage", "det/ckpt-3", "--json"]).output)
    states = {(e["version"], e["data_state"], e["data_deleted_reason"]) for e in body["data"]}
    assert states == {(v1.name, "deleted", "retention"), (v2.name, "stored", None)}

    consumers = runner.invoke(cli.app, ["consumers", v1.name])
    assert f"{v1.name} {mark}" in consumers.output
    body = json.loads(runner.invoke(cli.app, ["consumers", v1.name, "--json"]).output)
    assert body["versions"][0]["data_state"] == "deleted" and body["count"] == 4
    table = runner.invoke(cli.app, ["checkpoints", "ls", "det"]).output
    assert f"{v1.name} (train) {mark}" in table
    assert f"{v2.name} (train) (" not in table


def test_consumers_tree_direct_and_shard(runner: CliRunner, client: rk.Client) -> None:
    v1 = _history(client)
    out = runner.invoke(cli.app, ["consumers", "coco@v1"]).output
    assert "3 checkpoint(s), 2 model(s)" in out and "via det@default/ckpt-2" in out
    body = json.loads(runner.invoke(cli.app, ["consumers", "coco@v1", "--direct", "--json"]).output)
    assert [c["ref"] for c in body["checkpoints"]] == ["det@default/ckpt-1", "det@default/ckpt-2"]
    shard = v1.splits["validation"].shards[0]
    body = json.loads(runner.invoke(cli.app, ["consumers", "--shard", shard.uri, "--json"]).output)
    assert [c["ref"] for c in body["checkpoints"]] == ["det@default/ckpt-2", "ft@default/ckpt-1"]
    assert runner.invoke(cli.app, ["consumers"]).exit_code != 0


def test_consumers_of_an_untrained_version_point_to_what_derives_from_it(
    runner: CliRunner, client: rk.Client
) -> None:
    """``consumers coco@v1`` said '0 checkpoint(s)' for a version a trained one derives from,
    with nothing saying that ``impact`` answers through derived versions."""
    v1 = publish(client, "first")
    with client.writer("coco", desc="more", parents=[v1.name], code=None) as w:
        w.write(b"more", split="train")
    client.register_checkpoint(model="det", checkpoint="ckpt-1", data={"train": w.version})
    out = runner.invoke(cli.app, ["consumers", "coco@v1"]).output
    assert "0 checkpoint(s)" in out
    assert f"1 version derived from it ({w.version.name})" in out
    assert "recordkeeper impact coco@v1" in out
    trained = runner.invoke(cli.app, ["consumers", w.version.name]).output
    assert "det" in trained and "derived from it" not in trained


def test_checkpoints_ls_and_flush(
    runner: CliRunner,
    client: rk.Client,
    tmp_path: Path,
) -> None:
    _history(client)
    models = json.loads(runner.invoke(cli.app, ["checkpoints", "ls", "--json"]).output)
    assert [(m["name"], m["checkpoint_count"]) for m in models] == [("det", 2), ("ft", 1)]
    table = runner.invoke(cli.app, ["checkpoints", "ls", "det"]).output
    assert "ckpt-2" in table and "det@default/ckpt-1 (restored_from)" in table
    assert "default" in table and "present" in table
    queue = tmp_path / "pending.jsonl"
    RegistrationQueue(client, queue)._append(
        queue,
        RegistrationQueue(client, queue)._entry(
            checkpoint_body(model="det", checkpoint="ckpt-3", parent="det/ckpt-2"), None
        ),
    )
    result = runner.invoke(cli.app, ["checkpoints", "flush", "--queue", str(queue), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["registered"] == ["det@default/ckpt-3"]
    assert not queue.exists()


def test_lock_command(runner: CliRunner, client: rk.Client, tmp_path: Path) -> None:
    v1 = publish(client, "first")
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({"data": {"train": "coco@latest"}}, sort_keys=False))
    result = runner.invoke(cli.app, ["lock", str(config), "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["path"] == str(tmp_path / "train.lock.yaml")
    assert body["data"][0]["version"] == v1.name
    result = runner.invoke(cli.app, ["lock", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 1 and "cannot read" in result.output
    assert "Traceback" not in result.output


def test_checkpoints_check_marks_checkpoints_whose_files_are_gone(
    runner: CliRunner, client: rk.Client, tmp_path: Path
) -> None:
    v1 = publish(client, "first")
    for k in (1, 2):
        prefix = tmp_path / "run" / f"ckpt-{k}"
        prefix.parent.mkdir(exist_ok=True)
        prefix.with_name(f"ckpt-{k}.index").write_bytes(b"")
        client.register_checkpoint(
            model="det", checkpoint=f"ckpt-{k}", uri=prefix.as_uri(), data={"train": v1}
        )
    client.register_checkpoint(model="det", checkpoint="ckpt-9")  # no URI: not checked
    (tmp_path / "run" / "ckpt-1.index").unlink()
    run = client.checkpoint("det/ckpt-1").run
    dry = runner.invoke(cli.app, ["checkpoints", "check", "det", "--dry-run", "--json"])
    assert dry.exit_code == 1, dry.output
    assert json.loads(dry.output)["missing"] == [f"det@{run}/ckpt-1"]
    assert not client.checkpoint("det/ckpt-1").deleted  # a dry run records nothing
    result = runner.invoke(cli.app, ["checkpoints", "check", "det"])
    assert result.exit_code == 1 and "missing, marked deleted" in result.output
    gone = client.checkpoint("det/ckpt-1")
    assert gone.deleted and gone.deleted_reason == "files_missing" and gone.versions == [v1.name]
    again = json.loads(runner.invoke(cli.app, ["checkpoints", "check", "det", "--json"]).output)
    assert again == {
        "model": "det",
        "present": [f"det@{run}/ckpt-2"],
        "missing": [],
        "unchecked": ["det@default/ckpt-9"],
        "reasons": {"det@default/ckpt-9": "registered without a URI"},
        "errors": [],
        "dry_run": False,
    }
    table = runner.invoke(cli.app, ["checkpoints", "ls", "det"]).output
    assert "deleted" in table


def test_checkpoints_check_goes_on_past_storage_errors(
    runner: CliRunner,
    client: rk.Client,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """A checkpoint whose store cannot answer (no filesystem for its scheme, an unreachable
    endpoint) is unchecked with the reason; the others are still checked; exit 1."""
    import fsspec

    # fsspec keeps filesystems per options: the one made for the unreachable endpoint below
    # (options from the environment) must not serve later tests asking with the same options
    s3 = fsspec.get_filesystem_class("s3")
    s3.clear_instance_cache()
    request.addfinalizer(s3.clear_instance_cache)
    if importlib.util.find_spec("adlfs") is not None:
        pytest.skip("adlfs is installed: az:// has a filesystem here")
    monkeypatch.setattr(client.registry, "storage_options", {})
    local = tmp_path / "run" / "ckpt-1"
    local.parent.mkdir()
    local.with_name("ckpt-1.index").write_bytes(b"")
    uris = {
        "ckpt-1": local.as_uri(),  # present
        "ckpt-2": "az://models/run1/ckpt-2",  # no filesystem installed for az://
        "ckpt-3": "s3://models/run1/ckpt-3",  # an endpoint nothing listens on
        "ckpt-4": (tmp_path / "run" / "ckpt-4").as_uri(),  # missing
    }
    for name, uri in uris.items():
        client.register_checkpoint(model="det", checkpoint=name, run="r1", uri=uri)
    client.register_checkpoint(model="det", checkpoint="ckpt-9", run="r1")  # no URI
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")

    result = runner.invoke(cli.app, ["checkpoints", "check", "det", "--dry-run", "--json"])
    assert result.exit_code == 1, result.output
    body = json.loads(result.stdout)
    assert body["present"] == ["det@r1/ckpt-1"] and body["missing"] == ["det@r1/ckpt-4"]
    assert sorted(body["unchecked"]) == ["det@r1/ckpt-2", "det@r1/ckpt-3", "det@r1/ckpt-9"]
    assert sorted(body["errors"]) == ["det@r1/ckpt-2", "det@r1/ckpt-3"]
    reasons = body["reasons"]
    assert "no filesystem for az://models/run1/ckpt-2.index" in reasons["det@r1/ckpt-2"]
    assert "adlfs" in reasons["det@r1/ckpt-2"]
    assert "unreachable" in reasons["det@r1/ckpt-3"]
    assert reasons["det@r1/ckpt-9"] == "registered without a URI"

    (tmp_path / "run" / "ckpt-4.index").write_bytes(b"")  # only the storage errors are left
    result = runner.invoke(cli.app, ["checkpoints", "check", "det"])
    assert result.exit_code == 1, result.output
    out = result.output
    assert "det@r1/ckpt-2  unchecked: no filesystem for az://" in out
    assert "det@r1/ckpt-3  unchecked: s3://models/run1/ckpt-3: storage endpoint unreachable" in out
    assert "det: 2 present, 0 missing, marked deleted, 2 unchecked (storage error), " in out
    assert "1 without a URI" in out and "error:" not in out
    assert not client.checkpoint("det@r1/ckpt-2").deleted  # unchecked is never marked deleted

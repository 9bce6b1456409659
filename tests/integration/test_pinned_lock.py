"""Pinned configs and the CLI's conventions over a live service (issue 9, points 3 and 8):
pins never move silently, a stale lock is refused, ``lock --check`` fails CI, loading verifies
the shards, and errors keep their exit statuses and JSON form over a real socket."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

import recordkeeper as rk
from recordkeeper.cli import app
from recordkeeper.cli.common import ExitCode
from tests.integration.conftest import LiveService


def _publish(client: rk.Client, dataset: str, tag: str) -> rk.DatasetVersion:
    with client.writer(dataset, desc=tag) as w:
        for split in ("train", "validation"):
            for i in range(4):
                w.write(f"{dataset}-{tag}-{split}-{i}".encode(), split=split)
    return client.resolve(w.version.name)


def _cli(service: LiveService, *args: str) -> Result:
    return CliRunner().invoke(app, [*args, "--url", service.url])  # global option at the end


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _write(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_pins_never_move_silently_and_stale_locks_are_refused(
    live_service: LiveService, tmp_path: Path
) -> None:
    client = live_service.client()
    v1 = _publish(client, "coco", "first")
    config = _write(tmp_path / "train.yaml", {"epochs": 3, "data": {"train": "coco@latest"}})
    lock_file = tmp_path / "train.lock.yaml"

    first = _json(_cli(live_service, "lock", str(config), "--json"))
    assert first["path"] == str(lock_file)
    assert [(c["entry"], c["change"], c["new_version"]) for c in first["changes"]] == [
        ("train", "added", v1.name)
    ]

    # a new version: locking again keeps the pin and says what --update would do
    v2 = _publish(client, "coco", "second")
    again = _cli(live_service, "lock", str(config))
    assert again.exit_code == 0, again.output
    assert "unchanged" in again.stdout and v2.name in again.stdout
    assert yaml.safe_load(lock_file.read_text())["data"]["train"]["version"] == v1.name
    assert rk.load_pinned(config, client=client)["train"].name == v1.name

    updated = _json(_cli(live_service, "lock", str(config), "--update", "--json"))
    assert [(c["change"], c["old_version"], c["new_version"]) for c in updated["changes"]] == [
        ("updated", v1.name, v2.name)
    ]
    check = _cli(live_service, "lock", str(config), "--check")
    assert check.exit_code == 0, check.output

    # the config changes, the lock does not: refused, named, and CI fails
    mnist = _publish(client, "mnist", "one")
    _write(config, {"epochs": 3, "data": {"train": "coco@latest", "eval": "mnist@latest"}})
    with pytest.raises(rk.StaleLock) as stale:
        rk.load_pinned(config, client=client)
    assert list(stale.value.extra["entries"]) == ["eval"]
    check = _cli(live_service, "lock", str(config), "--check", "--json")
    assert check.exit_code == ExitCode.VERIFICATION_FAILED
    assert json.loads(check.stdout)["stale"] == {"eval": "added (mnist@latest)"}
    relocked = _json(_cli(live_service, "lock", str(config), "--json"))
    assert {c["entry"]: c["change"] for c in relocked["changes"]} == {
        "train": "unchanged",
        "eval": "added",
    }
    assert rk.load_pinned(config, client=client)["eval"].name == mnist.name

    # a pinned version deprecated: CI fails with the reason
    client.deprecate(v2, "labels were shifted")
    check = _cli(live_service, "lock", str(config), "--check")
    assert check.exit_code == ExitCode.VERIFICATION_FAILED
    assert "version_deprecated" in check.stdout and "labels were shifted" in check.stdout
    with pytest.raises(rk.VersionDeprecated):
        rk.load_pinned(config, client=client)


def test_loading_pinned_data_verifies_the_shards(live_service: LiveService, tmp_path: Path) -> None:
    client = live_service.client()
    v1 = _publish(client, "coco", "first")
    config = _write(tmp_path / "train.yaml", {"data": {"train": {"ref": "coco@v1"}}})
    rk.lock_config(client, config)
    assert rk.load_pinned(config, client=client, verify="deep")["train"].name == v1.name

    shard = Path(v1.splits["train"].shards[0].uri.removeprefix("file://"))
    stat = shard.stat()
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime
    assert rk.load_pinned(config, client=client)["train"].name == v1.name  # fast: no read
    with pytest.raises(rk.CorruptShard, match="train-00000-of-00001"):
        rk.load_pinned(config, client=client, verify="deep")
    os.utime(shard)  # a new mtime: the fast check sees the change without reading
    with pytest.raises(rk.CorruptShard):
        rk.load_pinned(config, client=client)


def test_cli_conventions_over_a_socket(live_service: LiveService) -> None:
    runner = CliRunner()
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout == f"recordkeeper {rk.__version__}\n"

    missing = _cli(live_service, "resolve", "coco@v9", "--json")
    assert missing.exit_code == ExitCode.NOT_FOUND
    assert missing.stdout == ""
    assert json.loads(missing.stderr)["code"] in ("dataset_not_found", "version_not_found")

    down = runner.invoke(app, ["--json", "resolve", "coco@v1", "--url", "http://127.0.0.1:9"])
    assert down.exit_code == ExitCode.SERVICE_UNREACHABLE
    assert json.loads(down.stderr)["code"] == "service_unavailable"

    usage = _cli(live_service, "resolve", "--json")
    assert usage.exit_code == ExitCode.USAGE
    assert json.loads(usage.stderr)["code"] == "usage"


def test_a_lock_without_its_own_section_is_refused_by_load_and_check(
    live_service: LiveService, tmp_path: Path
) -> None:
    """Removing the lock's ``recordkeeper_lock:`` section used to pass both ``load_pinned`` and
    ``lock --check``: they share one validation (pinned.staleness) and refuse it."""
    client = live_service.client()
    _publish(client, "coco", "first")
    config = _write(tmp_path / "train.yaml", {"data": {"train": "coco@latest"}})
    rk.lock_config(client, config)
    lock_file = tmp_path / "train.lock.yaml"
    lock = yaml.safe_load(lock_file.read_text())
    assert rk.load_pinned(config, client=client, verify=None)["train"]
    del lock["recordkeeper_lock"]
    _write(lock_file, lock)
    with pytest.raises(rk.StaleLock, match="recordkeeper_lock"):
        rk.load_pinned(config, client=client, verify=None)
    with pytest.raises(rk.StaleLock, match="recordkeeper_lock"):
        rk.load_pinned(lock_file, client=client, verify=None)
    checked = _cli(live_service, "lock", str(config), "--check", "--json")
    assert checked.exit_code != 0, checked.output
    assert "recordkeeper_lock" in checked.stdout

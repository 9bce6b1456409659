"""``recordkeeper gc``: dry run, --json, --delete, durations."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper import cli
from recordkeeper.cli.gc import parse_duration
from tests.client import test_gc as gc_tests
from tests.client.test_gc import committed, crashed_writer
from tests.service.test_gc import age

store = gc_tests.store
database_url = gc_tests.database_url
client = gc_tests.client


def test_cli_dry_run_json_and_delete(
    client: rk.Client, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert [parse_duration(t) for t in ("90", "30m", "24h", "7d", "2w")] == [
        90,
        1800,
        86400,
        604800,
        1209600,
    ]
    monkeypatch.setattr(cli.common, "Client", lambda *a, **k: client)
    runner = CliRunner()
    name, prefix = crashed_writer(client)
    age(database_url, name, 2 * 3600)  # crashed two hours ago
    kept = committed(client)

    listed = runner.invoke(cli.app, ["gc"])  # 24h: the 2-hour-old staged version is not listed
    assert listed.exit_code == 0, listed.output
    assert "would remove 0 object(s)" in listed.output

    dry = runner.invoke(cli.app, ["gc", "--older-than", "0s"])
    assert dry.exit_code == 0, dry.output
    assert name in dry.output and "would remove 2 object(s), 120 B" in dry.output
    assert prefix.exists()

    as_json = runner.invoke(cli.app, ["gc", "--older-than", "0", "--json"])
    body = json.loads(as_json.output)
    assert body["dry_run"] and body["objects"] == 2 and body["items"][0]["name"] == name

    done = runner.invoke(cli.app, ["gc", "--older-than", "0", "--delete"])
    assert done.exit_code == 0, done.output
    assert "removed 2 object(s), 120 B from 1 version(s)" in done.output
    assert not prefix.exists() and client.resolve(kept.name).verify().ok

    bad = runner.invoke(cli.app, ["gc", "--older-than", "soon"])
    assert bad.exit_code != 0


def test_the_deleting_commands_share_one_root_option() -> None:
    """``gc`` and ``retention apply`` take the same ``--root`` (cli.common.RootOpt): one name,
    one help, repeatable."""
    import typer.main

    from recordkeeper.cli.common import RootOpt

    command = typer.main.get_command(cli.app)
    gc_root = next(p for p in command.commands["gc"].params if p.name == "root")
    apply = command.commands["retention"].commands["apply"]
    apply_root = next(p for p in apply.params if p.name == "root")
    assert gc_root.opts == apply_root.opts == ["--root"]
    assert gc_root.help == apply_root.help == RootOpt.__metadata__[0].help
    assert gc_root.multiple and apply_root.multiple

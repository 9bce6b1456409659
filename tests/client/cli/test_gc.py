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

"""``recordkeeper gc --delete`` over a real socket: the server authorizes and claims first.

Issue 8, failure 4: with a write token the collector used to abandon versions and delete their
objects, failing only at the final admin-only call; it wrote no audit event, its summary said
0 objects after deleting them, and with ``--older-than 0`` it deleted another writer's files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from recordkeeper.cli import app
from tests.integration.conftest import LiveService
from tests.service._helpers import API, register, shards
from tests.service.test_auth import make_token
from tests.service.test_gc import age


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.db'}"
    url: str = request.getfixturevalue("postgres_database_url")
    return url


def files(prefix: str) -> dict[str, int]:
    """Every file under a ``file://`` prefix with its size."""
    root = Path(prefix.removeprefix("file://"))
    return {str(p): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()}


def write_files(prefix: str, sizes: list[int]) -> dict[str, int]:
    root = Path(prefix.removeprefix("file://"))
    for i, size in enumerate(sizes):
        target = root / ("_incomplete" if i % 2 else "") / f"train-{i:05d}.tfrecord"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"x" * size)
    return files(prefix)


def events(http: httpx.Client, **params: str) -> list[dict[str, Any]]:
    response = http.get(f"{API}/events", params={"limit": 1000, **params})
    assert response.status_code == 200, response.text
    data: list[dict[str, Any]] = response.json()["data"]
    return data


def state(http: httpx.Client, name: str) -> dict[str, Any]:
    response = http.get(f"{API}/versions/{name}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_gc_delete_is_authorized_and_claimed_by_the_server(
    live_service_factory: Callable[..., LiveService], database_url: str
) -> None:
    service = live_service_factory(database_url=database_url)
    writer = make_token(database_url, "write", "writer")
    admin = make_token(database_url, "admin", "gc-admin")
    http = httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {writer}"})

    def stage() -> dict[str, Any]:
        response = http.post(f"{API}/datasets/coco/versions", json={})
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    # A writer that crashed two hours ago, leaving 9 objects.
    crashed = stage()
    crashed_files = write_files(crashed["storage_prefix"], [10] * 9)
    age(database_url, crashed["name"], 2 * 3600)
    # A version its writer abandoned, leaving 3 objects.
    dropped = stage()
    dropped_files = write_files(dropped["storage_prefix"], [7, 7, 7])
    assert http.post(f"{API}/versions/{dropped['name']}/abandon").status_code == 200
    # Another writer at work: staged two hours ago, but it registered a shard just now.
    busy = stage()
    busy_files = write_files(busy["storage_prefix"], [5, 5])
    age(database_url, busy["name"], 2 * 3600)
    assert register(http, busy["name"], shards(busy["storage_prefix"], 1)).status_code == 200
    # And one that has just started.
    fresh = stage()
    fresh_files = write_files(fresh["storage_prefix"], [3])

    runner = CliRunner()
    gc = ["--url", service.url, "--token"]
    root = ["--root", service.storage_root]  # the collector's own roots
    everything = {
        crashed["name"]: crashed_files,
        dropped["name"]: dropped_files,
        busy["name"]: busy_files,
        fresh["name"]: fresh_files,
    }
    prefixes = {v["name"]: v["storage_prefix"] for v in (crashed, dropped, busy, fresh)}

    def storage() -> dict[str, dict[str, int]]:
        return {name: files(prefix) for name, prefix in prefixes.items()}

    # A write token: refused before anything is abandoned or deleted.
    refused = runner.invoke(app, [*gc, writer, "gc", "--older-than", "0", "--delete", *root])
    assert storage() == everything
    assert refused.exit_code == 6, refused.output  # refused
    assert "admin" in refused.output and "forbidden" in refused.output
    assert state(http, crashed["name"])["state"] == "staged"
    assert not [
        e for e in events(http) if e["action"] in ("version.gc_claimed", "version.collected")
    ]
    assert [e["version"] for e in events(http, action="version.abandoned")] == [dropped["name"]]

    # The dry run needs only read access and changes nothing.
    dry = runner.invoke(app, [*gc, writer, "gc", "--older-than", "0", "--json"])
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.stdout)
    assert [i["name"] for i in report["items"]] == [crashed["name"], dropped["name"]]
    assert (report["objects"], report["bytes"]) == (12, 111)
    assert storage() == everything

    # An admin token: the server claims the crashed and the abandoned version, nothing else.
    done = runner.invoke(app, [*gc, admin, "gc", "--older-than", "0", "--delete", *root])
    assert done.exit_code == 0, done.output
    assert "removed 12 object(s), 111 B from 2 version(s)" in " ".join(done.output.split())
    assert storage() == {
        crashed["name"]: {},
        dropped["name"]: {},
        busy["name"]: busy_files,
        fresh["name"]: fresh_files,
    }
    assert state(http, crashed["name"])["state"] == "abandoned"
    assert state(http, busy["name"])["state"] == "staged"
    assert state(http, fresh["name"])["state"] == "staged"
    # The busy writer finishes undisturbed.
    committed = http.post(f"{API}/versions/{busy['name']}/commit", json={})
    assert committed.status_code == 200, committed.text

    # Who did what.
    claimed = events(http, action="version.gc_claimed")
    assert sorted((e["actor"], e["version"]) for e in claimed) == sorted(
        [("gc-admin", crashed["name"]), ("gc-admin", dropped["name"])]
    )
    assert {e["detail"]["storage_prefix"] for e in claimed} == {
        crashed["storage_prefix"],
        dropped["storage_prefix"],
    }
    abandoned = {e["version"]: e for e in events(http, action="version.abandoned")}
    assert abandoned[crashed["name"]]["actor"] == "gc-admin"
    assert abandoned[crashed["name"]]["detail"] == {"reason": "gc"}
    collected = {e["version"]: e for e in events(http, action="version.collected")}
    assert collected[crashed["name"]]["actor"] == "gc-admin"
    assert collected[crashed["name"]]["detail"]["objects"] == 9
    assert collected[dropped["name"]]["detail"] == {
        "storage_prefix": dropped["storage_prefix"],
        "objects": 3,
        "bytes": 21,
    }

    # Nothing left to claim; a second run removes nothing.
    again = runner.invoke(app, [*gc, admin, "gc", "--older-than", "0", "--delete", "--json", *root])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["items"] == []

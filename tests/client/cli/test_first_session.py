"""Commands a first session runs into (pull, check-leakage, log): each answers what was asked
or says why not, with a stable code — no "unexpected KeyError", no silent success, no limit of
the REST route showing through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from recordkeeper.cli import cache as cache_cli
from recordkeeper.cli import records as records_cli
from recordkeeper.cli import versions as versions_cli
from tests.client.test_diff_verify_fast import _shard, _version


def test_pull_of_a_split_the_version_lacks_is_split_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``recordkeeper pull coco@v3 --split nosuch`` printed ``error: unexpected KeyError: ...
    this is a bug in recordkeeper`` (the split lookup raised a bare KeyError)."""
    v = _version("coco_20231015_v3", [_shard("train", 0, 1, "a")], [], "sha256:1")

    class Resolver:
        def resolve(self, ref: str) -> rk.DatasetVersion:
            return v

    monkeypatch.setattr(cache_cli, "connect", lambda options=None: Resolver())
    args = ["pull", "coco@v3", "--split", "nosuch", "--cache-dir", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3, result.output
    assert result.output == (
        "error: coco_20231015_v3 has no split 'nosuch'; splits: train [split_not_found]\n"
    )


def test_check_leakage_says_when_there_is_nothing_to_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A version with only a train split: ``check-leakage`` printed nothing and exited 0, a CI
    log that looked like a pass."""

    class NoPairs:
        def check_leakage(self, ref: str, against: list[str], **kwargs: object) -> list:
            return []

    monkeypatch.setattr(records_cli, "connect", lambda options=None: NoPairs())
    result = CliRunner().invoke(app, ["check-leakage", "big@v1"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("nothing checked: big@v1 has no evaluation split")
    assert "--against" in result.output


def test_log_pages_through_a_long_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """``recordkeeper log coco -n 500`` was refused (``query.limit: Input should be less than
    or equal to 100``) and ``-n 0`` reached the service; the command pages, 100 at a time."""
    history = [{"name": f"coco_20231015_v{n}", "number": n} for n in range(250, 0, -1)]
    asked: list[tuple[int, int]] = []

    class Service:
        def log(self, dataset: str, *, limit: int, offset: int) -> list[dict]:
            assert 1 <= limit <= 100  # the route's bound
            asked.append((limit, offset))
            return history[offset : offset + limit]

    monkeypatch.setattr(versions_cli, "connect", lambda options=None: Service())
    result = CliRunner().invoke(app, ["log", "coco", "-n", "120", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == history[:120] and asked == [(100, 0), (21, 100)]
    asked.clear()
    result = CliRunner().invoke(app, ["log", "coco", "-n", "1000", "--json"])
    assert len(json.loads(result.stdout)) == 250 and asked[-1] == (100, 200)
    assert CliRunner().invoke(app, ["log", "coco", "-n", "0"]).exit_code == 2  # usage


def test_log_says_when_older_versions_are_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """``recordkeeper log`` shows 20 versions: a longer history ended at v5 with nothing
    saying that v1..v4 exist."""
    history = [
        {
            "name": f"coco_20231015_v{n}",
            "number": n,
            "date": "2023-10-15",
            "desc": None,
            "state": "committed",
            "parents": [],
            "commit": None,
            "compared_with": None,
            "change": None,
        }
        for n in range(3, 0, -1)
    ]

    class Service:
        def log(self, dataset: str, *, limit: int, offset: int) -> list[dict]:
            return history[offset : offset + limit]

    monkeypatch.setattr(versions_cli, "connect", lambda options=None: Service())
    two = CliRunner().invoke(app, ["log", "coco", "-n", "2"])
    assert two.exit_code == 0, two.output
    assert "v2 coco_20231015_v2" in two.output and "coco_20231015_v1" not in two.output
    assert "older versions not shown: recordkeeper log coco -n 22" in two.output
    every = CliRunner().invoke(app, ["log", "coco", "-n", "3"])
    assert "v1 coco_20231015_v1" in every.output and "older versions" not in every.output


def test_log_names_a_renamed_split() -> None:
    change = {
        "shards_added": 2,
        "shards_removed": 2,
        "shards_changed": 0,
        "records_added": 20,
        "records_removed": 20,
        "renamed_splits": {"validation": "val"},
    }
    line = versions_cli.change_summary(change, "coco_20231015_v1")
    assert line == (
        "+2 shards, -2 shards (+20/-20 records), split validation renamed val vs coco_20231015_v1"
    )
    del change["renamed_splits"]  # an older service's answer
    assert "renamed" not in versions_cli.change_summary(change, "coco_20231015_v1")

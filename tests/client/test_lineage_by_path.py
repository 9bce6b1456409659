"""``recordkeeper lineage`` takes the checkpoint path a training script prints (issue 26, item
7b): ``checkpoints/mnist/ckpt-2`` is the registered checkpoint stored there (by URI)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from tests.apps import sqlite_app
from tests.integration._scenarios import sample_examples

pytest.importorskip("fastapi")


@pytest.fixture
def client(tmp_path: Path) -> Iterator[rk.Client]:
    (tmp_path / "service").mkdir()
    with sqlite_app(tmp_path / "service") as http:
        yield rk.Client(http_client=http)


def test_lineage_resolves_a_printed_checkpoint_path(
    client: rk.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recordkeeper.cli import common
    from recordkeeper.cli.app import app

    with client.writer("mnist") as w:
        for record in sample_examples(5):
            w.write(record)
    work = tmp_path / "work"
    (work / "checkpoints" / "mnist").mkdir(parents=True)
    for model, folder in (("mnist", "mnist"), ("other", "other")):
        for step in (1, 2):
            client.register_checkpoint(
                model=model,
                checkpoint=f"ckpt-{step}",
                step=step,
                uri=(work / "checkpoints" / folder / f"ckpt-{step}").as_uri(),
                data={"train": w.version.name},
            )
    monkeypatch.chdir(work)
    found = client.checkpoint_at("checkpoints/mnist/ckpt-2")
    assert (found.model, found.checkpoint) == ("mnist", "ckpt-2")
    assert client.checkpoint_at(str(work / "checkpoints/mnist/ckpt-2")).ref == found.ref
    monkeypatch.setattr(common, "Client", lambda *a, **k: client)
    result = CliRunner().invoke(app, ["lineage", "checkpoints/mnist/ckpt-2"])
    assert result.exit_code == 0, result.output
    assert str(found.ref) in result.stdout and w.version.name in result.stdout
    missing = CliRunner().invoke(app, ["lineage", "checkpoints/mnist/ckpt-9"])
    assert missing.exit_code == 3 and "[checkpoint_not_found]" in missing.stderr
    assert "no registered checkpoint is stored at 'checkpoints/mnist/ckpt-9'" in missing.stderr

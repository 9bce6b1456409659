"""Deprecated data is never used silently (issue 26, item 5): resolving or reading a deprecated
version warns with the reason, in Python and on the CLI; a lock still refuses it."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from tests.integration._scenarios import sample_examples

pytest.importorskip("fastapi")


@pytest.fixture
def deprecated(client: rk.Client) -> rk.DatasetVersion:
    with client.writer("coco", desc="first") as w:
        for record in sample_examples(5):
            w.write(record)
    version = w.version
    client.deprecate(version.name, reason="labels were wrong")
    return version


def test_resolving_a_deprecated_version_warns_with_the_reason(
    client: rk.Client, deprecated: rk.DatasetVersion
) -> None:
    with pytest.warns(rk.DeprecatedVersionWarning, match="labels were wrong") as caught:
        version = client.resolve("coco@v1")
    assert version.state == "deprecated"
    assert caught[0].filename == __file__  # it points at the caller, not at the library
    with pytest.warns(rk.DeprecatedVersionWarning):
        client.resolve(deprecated.name, shards=False)


def test_a_committed_version_resolves_without_a_warning(client: rk.Client) -> None:
    with client.writer("coco", desc="first") as w:
        for record in sample_examples(5):
            w.write(record)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        client.resolve("coco@v1")


def test_the_cli_prints_one_warning_line(
    client: rk.Client, deprecated: rk.DatasetVersion, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recordkeeper.cli import common
    from recordkeeper.cli.app import app

    monkeypatch.setattr(common, "Client", lambda *a, **k: client)
    result = CliRunner().invoke(app, ["show", deprecated.name])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "deprecated" in line]
    assert lines and lines[0].startswith("warning: ") and "labels were wrong" in lines[0]
    assert "DeprecatedVersionWarning" not in result.stderr  # not Python's file:line form


def test_reading_a_deprecated_version_with_tf_data_warns(
    client: rk.Client, deprecated: rk.DatasetVersion, tensorflow: object
) -> None:
    with pytest.warns(rk.DeprecatedVersionWarning):
        version = client.resolve("coco@v1")
    with pytest.warns(rk.DeprecatedVersionWarning, match="read anyway"):
        dataset = version.tf_dataset("train")
    assert sum(1 for _ in dataset) == 5


def test_registering_a_checkpoint_of_deprecated_data_warns_with_the_reason(
    client: rk.Client, deprecated: rk.DatasetVersion
) -> None:
    with pytest.warns(rk.DeprecatedVersionWarning, match="labels were wrong") as caught:
        info = client.register_checkpoint(
            model="det", checkpoint="ckpt-1", step=1, run="run-a", data={"train": deprecated.name}
        )
    assert caught[0].filename == __file__
    assert "det@run-a trains on" in str(caught[0].message)
    entry = info.data[0]
    assert entry["state"] == "deprecated" and entry["deprecated_reason"] == "labels were wrong"
    # listing and showing the checkpoint mark the entry too (what the UI's badge reads)
    listed = client.checkpoints("det")
    assert listed[0].data[0]["state"] == "deprecated"


def test_registering_a_checkpoint_of_committed_data_does_not_warn(client: rk.Client) -> None:
    with client.writer("coco", desc="first") as w:
        for record in sample_examples(5):
            w.write(record)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        info = client.register_checkpoint(
            model="det", checkpoint="ckpt-1", run="run-a", data={"train": w.version.name}
        )
    assert "state" not in info.data[0] or info.data[0]["state"] is None


def test_the_cli_flush_prints_a_warning_line_for_deprecated_data(
    client: rk.Client,
    deprecated: rk.DatasetVersion,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from recordkeeper.checkpoint_lineage import checkpoint_body
    from recordkeeper.cli import common
    from recordkeeper.cli.app import app
    from recordkeeper.lineage_queue import REGISTER, RegistrationQueue

    queue = RegistrationQueue(client, tmp_path / "queue.jsonl")
    body = checkpoint_body(
        model="det", checkpoint="ckpt-2", run="run-a", data={"train": deprecated.name}
    )
    queue._append(queue.path, queue._entry(body, None, REGISTER))
    monkeypatch.setattr(common, "Client", lambda *a, **k: client)
    result = CliRunner().invoke(app, ["checkpoints", "flush", "--queue", str(queue.path)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "deprecated" in line]
    assert lines and lines[0].startswith("warning: det@run-a trains on"), result.stderr
    assert "labels were wrong" in lines[0]

"""``recordkeeper publish FILE``: a file alone gets the split its directory would give it
(issue 9, point 5), over a live service."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from recordkeeper.cli import app
from tests.client._records import sample_examples, write_tfrecord
from tests.integration.conftest import LiveService


def _publish(live_service: LiveService, path: Path, name: str) -> dict[str, object]:
    result = CliRunner().invoke(
        app, ["--url", live_service.url, "publish", str(path), "--name", name, "--json"]
    )
    assert result.exit_code == 0, result.output
    published: dict[str, object] = json.loads(result.stdout)
    return published


def test_one_file_and_its_directory_name_the_same_split(
    live_service: LiveService, data_dir: Path
) -> None:
    write_tfrecord(data_dir / "val" / "validation.tfrecord", sample_examples(3))
    write_tfrecord(data_dir / "small" / "examples", sample_examples(4))  # write_small_dataset
    client = live_service.client()

    _publish(live_service, data_dir / "val" / "validation.tfrecord", "onefile")
    assert sorted(client.resolve("onefile@latest").splits) == ["validation"]

    _publish(live_service, data_dir / "small" / "examples", "bare")
    _publish(live_service, data_dir / "small", "bare_dir")
    assert sorted(client.resolve("bare@latest").splits) == ["examples"]
    assert sorted(client.resolve("bare_dir@latest").splits) == ["examples"]
    assert client.resolve("bare@latest").content_digest == (
        client.resolve("bare_dir@latest").content_digest
    )

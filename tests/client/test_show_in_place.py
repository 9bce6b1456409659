"""After an in-place publish, ``show`` names where the shards are, not a storage prefix that was
never written (issue 26, item 7b); copied versions keep showing their prefix."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.core.shards import shard_location
from tests.apps import sqlite_app
from tests.client._records import sample_examples, write_tfrecord

pytest.importorskip("fastapi")


def test_shard_location_rule() -> None:
    prefix = "file:///store/coco/coco_v1/"
    assert shard_location(prefix, [f"{prefix}train-0.tfrecord"]) == (prefix, True)
    assert shard_location(prefix, []) == (prefix, True)
    uris = ["file:///data/coco/train/a.tfrecord", "file:///data/coco/validation/b.tfrecord"]
    assert shard_location(prefix, uris) == ("file:///data/coco/", False)
    assert shard_location(prefix, ["s3://b/x/a.tfrecord"]) == ("s3://b/x/", False)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[rk.Client]:
    store, data = tmp_path / "store", tmp_path / "data"
    store.mkdir()
    data.mkdir()
    allowed = [store.as_uri(), data.as_uri()]
    with sqlite_app(tmp_path, storage_root=store.as_uri(), allowed_roots=allowed) as http:
        yield rk.Client(http_client=http)


def test_show_after_an_in_place_publish(
    client: rk.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recordkeeper.cli import common
    from recordkeeper.cli.app import app

    data = tmp_path / "data" / "coco"
    data.mkdir()
    write_tfrecord(data / "train.tfrecord", sample_examples(4))
    write_tfrecord(data / "validation.tfrecord", sample_examples(2))
    version = client.publish(rk.Dataset.from_directory(data, name="coco"), progress=False)
    monkeypatch.setattr(common, "Client", lambda *a, **k: client)
    shown = CliRunner().invoke(app, ["show", version.name])
    assert shown.exit_code == 0, shown.output
    assert f"shards  {data.as_uri()}/  (registered in place, not copied)" in shown.stdout
    assert version.storage_prefix not in shown.stdout
    answer = json.loads(CliRunner().invoke(app, ["show", version.name, "--json"]).stdout)
    assert answer["in_place"] is True and answer["shard_location"] == f"{data.as_uri()}/"

    with client.writer("written") as w:
        w.write(sample_examples(1)[0])
    shown = CliRunner().invoke(app, ["show", w.version.name])
    assert f"prefix  {w.version.storage_prefix}" in shown.stdout

"""The tracked checkpoint manager's bookkeeping, with a duck-typed manager (no TensorFlow).

Real TensorFlow managers are exercised in tests/integration/test_lineage_tf_*.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import recordkeeper as rk
from recordkeeper.tf.checkpoints import TrackedCheckpointManager, checkpoint_uri, track
from tests.client import _lineage_app
from tests.client._lineage_app import Switch, publish

app_http = _lineage_app.app_http
switch = _lineage_app.switch
client = _lineage_app.client


class FakeManager:
    """What track() needs from a tf.train.CheckpointManager: save, restore_or_initialize."""

    def __init__(self, directory: Path, restored: str | None = None) -> None:
        self.directory = directory
        self.latest_checkpoint = None
        self.counter = int(restored.rsplit("-", 1)[1]) if restored else 0
        self._restored = restored

    def restore_or_initialize(self) -> str | None:
        return self._restored

    def save(self, checkpoint_number: int | None = None) -> str:
        self.counter = checkpoint_number or self.counter + 1
        path = str(self.directory / f"ckpt-{self.counter}")
        Path(path + ".index").write_bytes(b"")
        self.latest_checkpoint = path
        return path


def test_saves_chain_and_restores_become_parents(
    client: rk.Client,
    tmp_path: Path,
) -> None:
    v1 = publish(client, "first")
    manager = track(
        FakeManager(tmp_path),
        client=client,
        model="det",
        data={"train": v1},
        queue=tmp_path / "q.jsonl",
    )
    assert isinstance(manager, TrackedCheckpointManager)
    assert manager.directory == tmp_path  # delegated
    assert manager.restore_or_initialize() is None
    manager.save()
    manager.save(checkpoint_number=10)
    first, second = manager.registered
    assert first.parent is None and first.step == 1
    assert first.uri == (tmp_path / "ckpt-1").as_uri()
    assert second.step == 10 and second.parent == rk.CheckpointRef("det", "ckpt-1")
    assert second.versions == [v1.name]
    # a later process restores ckpt-10: its next save's parent
    resumed = track(
        FakeManager(tmp_path, restored=str(tmp_path / "ckpt-10")),
        client=client,
        model="det",
        data={"train": "coco@latest"},
        queue=tmp_path / "q.jsonl",
    )
    assert resumed.data[0].version == v1.name  # the alias was resolved once, up front
    resumed.restore_or_initialize()
    assert resumed.parent == rk.CheckpointRef("det", "ckpt-10")
    resumed.save(metrics={"loss": 0.5})
    eleven = client.checkpoint("det/ckpt-11")
    assert eleven.parent_kind == "restored_from" and eleven.metrics == {"loss": 0.5}
    # fine-tuning: another model initialised from det/ckpt-11
    (tmp_path / "tuned").mkdir()
    tuned = track(
        FakeManager(tmp_path / "tuned"),
        client=client,
        model="tuned",
        data={"train": v1},
        parent="det/ckpt-11",
        queue=tmp_path / "q.jsonl",
    )
    tuned.save()
    assert client.checkpoint("tuned/ckpt-1").parent_kind == "initialized_from"
    assert checkpoint_uri("gs://b/ckpt-1") == "gs://b/ckpt-1"


def test_pinned_data_is_recorded_without_data_argument(
    client: rk.Client,
    tmp_path: Path,
) -> None:
    v1 = publish(client, "first")
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({"data": {"train": "coco@latest", "eval": "coco@v1"}}))
    rk.lock_config(client, config)
    rk.load_pinned(config, client=client)
    manager = track(FakeManager(tmp_path), client=client, model="pinned", queue=tmp_path / "q")
    manager.save()
    info = manager.registered[0]
    assert {(d["version"], d["role"], tuple(d["splits"])) for d in info.data} == {
        (v1.name, "train", ("train",)),
        (v1.name, "eval", ("validation",)),
    }


def test_service_down_while_tracking(
    client: rk.Client,
    switch: Switch,
    tmp_path: Path,
) -> None:
    v1 = publish(client, "first")
    manager = track(
        FakeManager(tmp_path),
        client=client,
        model="det",
        data={"train": v1},
        queue=tmp_path / "q.jsonl",
    )
    switch.down = True
    assert manager.save().endswith("ckpt-1")
    assert manager.queued == ["ckpt-1"] and manager.registered == []
    switch.down = False
    assert manager.flush() == 0
    assert client.checkpoint("det/ckpt-1").versions == [v1.name]
    # aliases cannot be resolved while the service is down; pinned names can be used
    switch.down = True
    with pytest.raises(rk.ServiceUnavailable, match="pinned names"):
        track(FakeManager(tmp_path), client=client, model="x", data={"train": "coco@latest"})
    offline: Any = track(
        FakeManager(tmp_path),
        client=client,
        model="x",
        data={"train": "coco@v1"},
        queue=tmp_path / "q.jsonl",
    )
    assert offline.data[0].version == "coco@v1"

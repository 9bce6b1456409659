"""The tracked checkpoint manager's bookkeeping, with a duck-typed manager (no TensorFlow).

Real TensorFlow managers are exercised in tests/integration/test_lineage_tf_*.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import recordkeeper as rk
from recordkeeper.core.lineage import run_for_directory
from recordkeeper.lineage_queue import RegistrationRejected
from recordkeeper.tf.checkpoints import (
    SavedCheckpoint,
    TrackedCheckpointManager,
    checkpoint_uri,
    track,
)
from tests.client import _lineage_app
from tests.client._lineage_app import Switch, publish

app_http = _lineage_app.app_http
switch = _lineage_app.switch
client = _lineage_app.client


class FakeManager:
    """What track() needs from a tf.train.CheckpointManager: save, restore_or_initialize,
    ``checkpoints`` and ``max_to_keep`` (which deletes the oldest checkpoint's files)."""

    def __init__(
        self,
        directory: Path,
        restored: str | None = None,
        max_to_keep: int | None = None,
        existing: list[str] | None = None,
    ) -> None:
        self.directory = directory
        self.latest_checkpoint = None
        self.counter = int(restored.rsplit("-", 1)[1]) if restored else 0
        self._restored = restored
        self.max_to_keep = max_to_keep
        self.checkpoints: list[str] = list(existing or [])

    def restore_or_initialize(self) -> str | None:
        return self._restored

    def save(self, checkpoint_number: int | None = None) -> str:
        self.counter = checkpoint_number or self.counter + 1
        path = str(self.directory / f"ckpt-{self.counter}")
        Path(path + ".index").write_bytes(b"")
        self.latest_checkpoint = path
        self.checkpoints.append(path)
        while self.max_to_keep and len(self.checkpoints) > self.max_to_keep:
            Path(self.checkpoints.pop(0) + ".index").unlink()
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
    run = manager.run
    assert run == run_for_directory(tmp_path.as_uri()) and first.run == run
    assert second.step == 10 and second.parent == rk.CheckpointRef("det", "ckpt-1", run)
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
    assert resumed.parent == rk.CheckpointRef("det", "ckpt-10", run)  # the same directory's run
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


def test_reruns_in_fresh_directories_are_new_runs_and_deletions_are_recorded(
    client: rk.Client, tmp_path: Path, recwarn: pytest.WarningsRecorder
) -> None:
    v1 = publish(client, "first")
    events: list[SavedCheckpoint] = []
    runs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        manager = track(
            FakeManager(tmp_path / name, max_to_keep=2),
            client=client,
            model="det",
            data={"train": v1},
            queue=tmp_path / "q.jsonl",
        )
        manager.add_save_callback(events.append)
        for _ in range(3):
            manager.save()
        assert [i.checkpoint for i in manager.registered] == ["ckpt-1", "ckpt-2", "ckpt-3"]
        assert manager.deleted == [rk.CheckpointRef("det", "ckpt-1", manager.run)]
        runs.append(manager.run)
    assert runs[0] != runs[1]
    assert [e.ref.checkpoint for e in events] == ["ckpt-1", "ckpt-2", "ckpt-3"] * 2
    assert events[2].deleted == (rk.CheckpointRef("det", "ckpt-1", runs[0]),)
    assert events[2].info is not None and events[2].info.ref == events[2].ref
    with pytest.raises(rk.AmbiguousCheckpoint) as ambiguous:
        client.checkpoint("det/ckpt-1")
    assert sorted(ambiguous.value.extra["candidates"]) == sorted(f"det@{r}/ckpt-1" for r in runs)
    for run in runs:
        gone = client.checkpoint(f"det@{run}/ckpt-1")
        assert gone.deleted and gone.deleted_reason == "max_to_keep"
        assert gone.versions == [v1.name]  # its lineage stays
        assert not client.checkpoint(f"det@{run}/ckpt-2").deleted
    # a conflicting registration never fails the save: it is set aside with a warning
    (tmp_path / "c").mkdir()
    clash = track(
        FakeManager(tmp_path / "c"),
        client=client,
        model="det",
        run=runs[0],  # reusing run a's name for different checkpoints
        data={"train": v1},
        queue=tmp_path / "q.jsonl",
    )
    with pytest.warns(RegistrationRejected, match="checkpoint_conflict|already registered"):
        assert clash.save() == str(tmp_path / "c" / "ckpt-1")
    assert clash.queued == ["ckpt-1"] and clash.registered == []
    assert "ckpt-1" in (tmp_path / "q.rejected.jsonl").read_text()


def test_a_resume_under_a_new_run_name_keeps_parent_and_deletions_exact(
    client: rk.Client, tmp_path: Path
) -> None:
    v1 = publish(client, "first")
    first = track(
        FakeManager(tmp_path, max_to_keep=2),
        client=client,
        model="det",
        run="r1",
        data={"train": v1},
        queue=tmp_path / "q.jsonl",
    )
    first.save()
    first.save()
    paths = [str(tmp_path / "ckpt-1"), str(tmp_path / "ckpt-2")]
    second = track(
        FakeManager(tmp_path, restored=paths[1], max_to_keep=2, existing=paths),
        client=client,
        model="det",
        run="r2",
        data={"train": v1},
        queue=tmp_path / "q.jsonl",
    )
    second.restore_or_initialize()
    assert second.parent == rk.CheckpointRef("det", "ckpt-2", "r1")  # found by its URI
    second.save()  # ckpt-3 in run r2; max_to_keep deletes r1's ckpt-1
    assert second.registered[0].ref == rk.CheckpointRef("det", "ckpt-3", "r2")
    assert second.registered[0].parent == rk.CheckpointRef("det", "ckpt-2", "r1")
    assert second.deleted == [rk.CheckpointRef("det", "ckpt-1", "r1")]
    assert client.checkpoint("det@r1/ckpt-1").deleted


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


class FailingExportManager(FakeManager):
    """A save that writes its checkpoint (and deletes the oldest), then fails: an export
    raising after the checkpoint files were written."""

    fail = False

    def save(self, checkpoint_number: int | None = None) -> str:
        path = super().save(checkpoint_number)
        if self.fail:
            raise OSError("the export failed")
        return path


def test_a_save_that_raises_after_writing_is_registered_and_continued(
    client: rk.Client, tmp_path: Path
) -> None:
    v1 = publish(client, "first")
    base = FailingExportManager(tmp_path, max_to_keep=2)
    manager = track(base, client=client, model="det", data={"train": v1}, queue=tmp_path / "q")
    manager.save()
    manager.save()
    base.fail = True
    with pytest.raises(OSError, match="export failed"):
        manager.save()
    run = manager.run
    assert manager.recovered == [rk.CheckpointRef("det", "ckpt-3", run)]
    third = client.checkpoint(f"det@{run}/ckpt-3")
    assert third.parent == rk.CheckpointRef("det", "ckpt-2", run) and third.versions == [v1.name]
    assert client.checkpoint(f"det@{run}/ckpt-1").deleted
    base.fail = False
    manager.save()
    assert client.checkpoint(f"det@{run}/ckpt-4").parent == rk.CheckpointRef("det", "ckpt-3", run)
    assert not (tmp_path / ".recordkeeper-save-intent.json").exists()


class DyingManager(FakeManager):
    """A save that writes its checkpoint (deleting the oldest), then the process "dies": a
    SystemExit, which the tracked manager does not handle, so the save intent stays."""

    die = False

    def save(self, checkpoint_number: int | None = None) -> str:
        path = super().save(checkpoint_number)
        if self.die:
            raise SystemExit("killed after writing")
        return path


def test_a_save_interrupted_by_death_is_finished_on_resume_while_the_service_is_down(
    client: rk.Client, switch: Switch, tmp_path: Path
) -> None:
    v1, v2 = publish(client, "first"), publish(client, "second")
    queue = tmp_path / "q.jsonl"
    base = DyingManager(tmp_path, max_to_keep=2)
    first = track(base, client=client, model="det", data={"train": v1}, queue=queue)
    first.save()
    first.save()
    base.die = True
    with pytest.raises(SystemExit):
        first.save()
    assert (tmp_path / ".recordkeeper-save-intent.json").exists()
    run = first.run
    ref = lambda n: rk.CheckpointRef("det", f"ckpt-{n}", run)  # noqa: E731
    with pytest.raises(rk.CheckpointNotFound):
        client.checkpoint(ref(3))
    # resumed while the registry is down: the interrupted save is finished into the queue
    switch.down = True
    paths = [str(tmp_path / "ckpt-2"), str(tmp_path / "ckpt-3")]
    resumed = track(
        FakeManager(tmp_path, restored=paths[1], max_to_keep=2, existing=paths),
        client=client,
        model="det",
        data={"train": v2.name},
        queue=queue,
    )
    assert resumed.recovered == [ref(3)] and resumed.deleted == [ref(1)]
    assert not (tmp_path / ".recordkeeper-save-intent.json").exists()
    resumed.restore_or_initialize()
    resumed.save()
    switch.down = False
    assert resumed.flush() == 0
    third = client.checkpoint(ref(3))
    assert third.parent == ref(2) and third.versions == [v1.name]
    assert client.checkpoint(ref(4)).parent == ref(3)
    assert client.lineage(ref(4)).versions == [v1.name, v2.name]
    assert client.checkpoint(ref(1)).deleted and client.checkpoint(ref(2)).deleted
    # nothing is finished twice: a later manager on the directory finds no intent
    again = track(FakeManager(tmp_path), client=client, model="det", queue=queue)
    assert again.recovered == []

"""Issue 4 end to end: real TensorFlow, data on S3 (SeaweedFS), the service under uvicorn.

A tiny Keras model trains on a dataset published through the client to S3.  Checkpoints are
saved through tracked managers and the lineage is read back over HTTP:

* ckpt-1..3 on v1, then a "new process" resumes from ckpt-3 on v2 (from a pinned config) and
  saves ckpt-4: ``lineage(ckpt-4)`` lists both versions with their segments,
  ``consumers(v1)`` lists ckpt-1..4, and deprecating v1 is refused;
* a SavedModelCheckpointManager-style manager records its ``ckpt-N_saved_modules/<name>``;
* the service goes down during ``save()``: the checkpoint is written, the registration queued,
  and it reaches the service when it is back — nothing lost, nothing duplicated.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

import recordkeeper as rk
from recordkeeper.lineage_queue import RegistrationQueue
from tests.client._records import example_bytes
from tests.integration.conftest import _free_port
from tests.waiting import started, wait_for

pytestmark = [pytest.mark.s3, pytest.mark.tf, pytest.mark.slow]


class RestartableService:
    """The service under uvicorn on one fixed loopback port, stoppable and restartable."""

    def __init__(self, database_url: str, storage_root: str, allowed_roots: list[str]) -> None:
        from recordkeeper_service import migrate
        from recordkeeper_service.db import Database
        from recordkeeper_service.settings import Settings

        database = Database(database_url)
        try:
            migrate.upgrade(database)
        finally:
            database.dispose()
        self.settings = Settings(
            database_url=database_url,
            storage_root=storage_root,
            allowed_roots=allowed_roots,
            auth="auto",
            host="127.0.0.1",
        )
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import uvicorn

        from recordkeeper_service.app import create_app

        config = uvicorn.Config(
            create_app(self.settings), host="127.0.0.1", port=self.port, log_level="warning"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        wait_for(started(self._server, self._thread), timeout=30, what="uvicorn started")

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=15)
        self._server = self._thread = None


@pytest.fixture
def service(tmp_path: Path, s3_bucket: str) -> Iterator[RestartableService]:
    svc = RestartableService(
        f"sqlite:///{tmp_path / 'registry.db'}", f"{s3_bucket}/datasets", [s3_bucket]
    )
    svc.start()
    yield svc
    svc.stop()


@pytest.fixture
def client(service: RestartableService, s3_server: Any, tmp_path: Path) -> Iterator[rk.Client]:
    # retries=1: a down service is noticed in well under a second
    with rk.Client(service.url, storage_options=dict(s3_server.storage_options), retries=1) as c:
        yield c


def publish(client: rk.Client, desc: str, offset: float) -> rk.DatasetVersion:
    """y = sum(x) + offset, 64 training and 16 validation examples, written to S3."""
    with client.writer("points", desc=desc, shard_size="2KB") as w:
        for i in range(80):
            x = [((i * 7 + k) % 11) / 10.0 for k in range(4)]
            record = example_bytes({"x": x, "y": [sum(x) + offset]})
            w.write(record, split="train" if i < 64 else "validation")
    return client.resolve(w.version.name)


def train_input(tf: ModuleType, version: rk.DatasetVersion) -> Any:
    spec = {
        "x": tf.io.FixedLenFeature([4], tf.float32),
        "y": tf.io.FixedLenFeature([1], tf.float32),
    }
    return (
        version.tf_dataset("train", verify="fast")
        .batch(16)
        .map(lambda batch: tf.io.parse_example(batch, spec))
        .map(lambda f: (f["x"], f["y"]))
        .repeat()  # 64 examples = 4 batches per epoch (steps_per_epoch=4)
    )


def new_model() -> Any:
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


def test_lineage_over_resumed_training(
    client: rk.Client, tensorflow: ModuleType, tmp_path: Path
) -> None:
    tf = tensorflow
    v1 = publish(client, "first", 0.0)
    assert v1.storage_prefix.startswith("s3://")
    directory = str(tmp_path / "ckpts")
    queue = tmp_path / "queue.jsonl"

    # -- run 1: ckpt-1..3 on v1
    model = new_model()
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    manager = rk.tf.track(
        tf.train.CheckpointManager(checkpoint, directory, max_to_keep=10),
        client=client,
        model="points_regressor",
        data={"train": v1},
        run="run-1",
        queue=queue,
    )
    assert manager.restore_or_initialize() is None and manager.parent is None
    for _ in range(3):
        model.fit(train_input(tf, v1), epochs=1, steps_per_epoch=4, shuffle=False, verbose=0)
        manager.save()
    assert [c.checkpoint for c in manager.registered] == ["ckpt-1", "ckpt-2", "ckpt-3"]
    assert manager.registered[1].parent == rk.CheckpointRef("points_regressor", "ckpt-1", "run-1")

    # -- run 2, a new process: the config pins points@latest, which is v2 by now
    v2 = publish(client, "second", 1.0)
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({"epochs": 1, "data": {"train": "points@latest"}}))
    lock_file, _ = rk.lock_config(client, config)
    pinned = rk.load_pinned(config, client=client)
    assert pinned.path == lock_file and pinned["train"].name == v2.name
    model = new_model()
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    manager = rk.tf.track(  # no data=: the pinned data just loaded is recorded
        tf.train.CheckpointManager(checkpoint, directory, max_to_keep=10),
        client=client,
        model="points_regressor",
        run="run-2",
        queue=queue,
    )
    restored = manager.restore_or_initialize()
    assert restored is not None and restored.endswith("ckpt-3")
    # run-2 resumes from run-1's checkpoint in the same directory: found by its URI
    assert manager.parent == rk.CheckpointRef("points_regressor", "ckpt-3", "run-1")
    model.fit(
        train_input(tf, pinned["train"]), epochs=1, steps_per_epoch=4, shuffle=False, verbose=0
    )
    assert manager.save().endswith("ckpt-4")

    lineage = client.lineage("points_regressor/ckpt-4")  # one run has a ckpt-4: unambiguous
    assert lineage.versions == [v1.name, v2.name]
    segments = {e.version: [s.checkpoint for s in e.segments] for e in lineage.data}
    assert segments == {v1.name: ["ckpt-1", "ckpt-2", "ckpt-3"], v2.name: ["ckpt-4"]}
    assert all(e.splits == ("train",) and e.role == "train" for e in lineage.data)
    assert [e.content_digest for e in lineage.data] == [v1.content_digest, v2.content_digest]
    assert lineage.checkpoint.run == "run-2"
    assert lineage.checkpoint.uri == (tmp_path / "ckpts" / "ckpt-4").as_uri()
    assert [link["checkpoint"] for link in lineage.chain] == [
        "ckpt-4",
        "ckpt-3",
        "ckpt-2",
        "ckpt-1",
    ]

    used = client.consumers(v1)
    assert used.refs == [
        *(f"points_regressor@run-1/ckpt-{k}" for k in (1, 2, 3)),
        "points_regressor@run-2/ckpt-4",
    ]
    assert [c.direct for c in used.checkpoints] == [True, True, True, False]
    bad_shard = v1.splits["train"].shards[0]
    assert client.shard_consumers(bad_shard.sha256).count == 4
    with pytest.raises(rk.VersionInUse) as refused:
        client.deprecate(v1, "labels were wrong")
    assert refused.value.extra["checkpoints"] == [
        f"points_regressor@run-1/ckpt-{k}" for k in (1, 2, 3)
    ]
    assert client.resolve(v1.name).state == "committed"
    assert not queue.exists()  # nothing was ever queued


def test_savedmodel_exports_are_recorded(
    client: rk.Client, tensorflow: ModuleType, tmp_path: Path
) -> None:
    tf = tensorflow
    from tests.integration._savedmodel_manager import SavedModelCheckpointManager

    v1 = publish(client, "first", 0.0)
    model = new_model()

    class Scorer(tf.Module):  # type: ignore[name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def serve(self, x: Any) -> Any:
            return self.model(x)

    scorer = Scorer()
    scorer.saved_model_signatures = {"serving_default": scorer.serve}
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    directory = str(tmp_path / "exported")
    manager = rk.tf.track(
        SavedModelCheckpointManager(
            checkpoint, directory, max_to_keep=2, modules_to_export={"scorer": scorer}
        ),
        client=client,
        model="points_exported",
        data={"train": v1},
        queue=tmp_path / "q.jsonl",
    )
    model.fit(train_input(tf, v1), epochs=1, steps_per_epoch=4, shuffle=False, verbose=0)
    path = manager.save()
    info = client.checkpoint("points_exported/ckpt-1")
    export = f"{path}_saved_modules/scorer"
    assert [s.to_json() for s in info.saved_models] == [
        {
            "name": "scorer",
            "uri": Path(export).as_uri(),
            # a tf.function on tensors: its signature's inputs, by name
            "inputs": [
                {
                    "name": "x",
                    "kind": "tensor",
                    "dtype": "float32",
                    "shape": [4],
                    "has_default": False,
                    "signature": "serving_default",
                }
            ],
        }
    ]
    assert manager.savedmodels == [f"{path}_saved_modules"]
    # a tensor input is compared only with the feature of its name, and never as an error
    check = client.check_model("points_exported/ckpt-1")
    assert check.ok and [p for c in check.checks for p in c.problems] == []
    loaded = tf.saved_model.load(export)
    assert loaded.signatures["serving_default"](tf.zeros([1, 4]))  # a real SavedModel


def test_service_down_during_save(
    client: rk.Client, service: RestartableService, tensorflow: ModuleType, tmp_path: Path
) -> None:
    tf = tensorflow
    v1 = publish(client, "first", 0.0)
    queue = RegistrationQueue(client, tmp_path / "pending.jsonl")
    model = new_model()
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    directory = tmp_path / "ckpts"
    manager = rk.tf.track(
        tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=10),
        client=client,
        model="resilient",
        data={"train": v1},
        queue=queue,
    )
    manager.save()  # ckpt-1, registered
    service.stop()
    with pytest.raises(rk.ServiceUnavailable):
        client.health()
    assert manager.save().endswith("ckpt-2")  # no exception: training goes on
    assert manager.save().endswith("ckpt-3")
    assert (directory / "ckpt-3.index").exists()
    assert manager.queued == ["ckpt-2", "ckpt-3"]
    assert [b["checkpoint"] for b in queue.pending()] == ["ckpt-2", "ckpt-3"]

    service.start()  # same URL
    assert manager.save().endswith("ckpt-4")  # flushes ckpt-2, ckpt-3 first, in order
    assert queue.pending() == [] and not queue.path.exists()
    names = [c.checkpoint for c in client.checkpoints("resilient")]
    assert names == ["ckpt-4", "ckpt-3", "ckpt-2", "ckpt-1"]  # each once
    lineage = client.lineage("resilient/ckpt-4")
    assert [link["checkpoint"] for link in lineage.chain] == [
        "ckpt-4",
        "ckpt-3",
        "ckpt-2",
        "ckpt-1",
    ]

    # down again; this time an explicit flush (what `recordkeeper checkpoints flush` does)
    service.stop()
    manager.save()
    service.start()
    result = client.flush_checkpoints(queue.path)
    assert [c.checkpoint for c in result.registered] == ["ckpt-5"] and result.pending == 0
    assert client.flush_checkpoints(queue.path).registered == ()  # nothing twice
    assert len(client.checkpoints("resilient")) == 5

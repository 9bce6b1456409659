"""The tracked checkpoint manager's bridges with real TensorFlow: while an MLflow run is active
(a real ``mlflow server``), every save logs its data as the run's dataset inputs and records the
run id in the checkpoint's metadata."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import recordkeeper as rk
from tests.client._records import example_bytes
from tests.integration.conftest import LiveService
from tests.servers.mlflow_server import mlflow_server as start_mlflow_server

pytestmark = [pytest.mark.tf]


@pytest.fixture
def mlflow_url(tmp_path: Path) -> Iterator[str]:
    pytest.importorskip("mlflow")
    with start_mlflow_server(tmp_path / "mlflow") as url:
        yield url


def test_a_tracked_save_logs_its_data_to_the_active_mlflow_run(
    live_service: LiveService, tensorflow: ModuleType, tmp_path: Path, mlflow_url: str
) -> None:
    import mlflow

    tf = tensorflow
    client = live_service.client()
    with client.writer("toy", desc="a") as w:
        for i in range(12):
            w.write(example_bytes({"label": [i]}), split="train" if i < 10 else "validation")
    v = client.resolve(w.version.name)
    mlflow.set_tracking_uri(mlflow_url)
    checkpoint = tf.train.Checkpoint(w=tf.Variable(1.0))
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path / "ckpt"), max_to_keep=3)
    tracked = rk.tf.track(
        manager, client=client, model="det", data={"train": v}, queue=tmp_path / "q.jsonl"
    )
    with mlflow.start_run() as run:
        tracked.save()
        tracked.save()
    info = client.checkpoint(f"det@{tracked.run}/ckpt-2")
    assert info.metadata["mlflow_run_id"] == run.info.run_id  # the reverse link
    got = mlflow.MlflowClient(mlflow_url).get_run(run.info.run_id)
    (logged,) = got.inputs.dataset_inputs  # logged once, not at every save
    assert logged.dataset.name == v.name and logged.dataset.source_type == "recordkeeper"
    assert {t.key: t.value for t in logged.tags}["mlflow.data.context"] == "train"
    assert got.data.tags["recordkeeper.data.train"] == v.name
    assert got.data.tags["recordkeeper.checkpoint"] == str(info.ref)
    # without an active run nothing is logged and no run id is recorded
    tracked.save()
    assert "mlflow_run_id" not in client.checkpoint(f"det@{tracked.run}/ckpt-3").metadata

"""Checkpoint tracking with real TensorFlow on local storage: Keras callback, manual restores,
fine-tuning another model's checkpoint.  The service runs under uvicorn on a socket."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import recordkeeper as rk
from recordkeeper.core.lineage import run_for_directory
from recordkeeper.tf.checkpoints import make_checkpoint_callback
from tests.integration.conftest import LiveService

pytestmark = [pytest.mark.tf]


def publish(client: rk.Client, desc: str) -> rk.DatasetVersion:
    with client.writer("toy", desc=desc) as w:
        for i in range(20):
            w.write(f"{desc}-{i}".encode(), split="train" if i < 16 else "validation")
    return client.resolve(w.version.name)


def new_model() -> Any:
    import keras

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


XS, YS = np.ones((8, 2), "float32"), np.ones((8, 1), "float32")


def test_keras_callback_registers_every_epoch_and_resumes(
    live_service: LiveService, tensorflow: ModuleType, tmp_path: Path
) -> None:
    client = live_service.client()
    v1 = publish(client, "a")
    directory = str(tmp_path / "fit")
    callback = make_checkpoint_callback(
        directory,
        client=client,
        model_name="fitted",
        data={"train": v1, "eval": v1},
        queue=tmp_path / "q.jsonl",
    )
    new_model().fit(XS, YS, epochs=2, verbose=0, callbacks=[callback])
    assert callback.restored is None
    first = client.checkpoint("fitted/ckpt-2")
    run = run_for_directory(Path(directory).as_uri())
    assert first.run == run and first.parent == rk.CheckpointRef("fitted", "ckpt-1", run)
    assert first.metrics["epoch"] == 2 and "loss" in first.metrics
    assert {(d["role"], tuple(d["splits"])) for d in first.data} == {
        ("train", ("train",)),
        ("eval", ("validation",)),
    }
    # a second fit (a new process) resumes from ckpt-2 on newer data
    v2 = publish(client, "b")
    again = make_checkpoint_callback(
        directory,
        client=client,
        model_name="fitted",
        data={"train": v2},
        queue=tmp_path / "q.jsonl",
    )
    new_model().fit(XS, YS, epochs=1, verbose=0, callbacks=[again])
    assert again.restored is not None and again.restored.endswith("ckpt-2")
    lineage = client.lineage("fitted/ckpt-3")
    assert lineage.versions == [v1.name, v2.name]
    assert lineage.checkpoint.parent == rk.CheckpointRef("fitted", "ckpt-2", run)  # same run


def test_manual_restore_and_fine_tuning_across_models(
    live_service: LiveService, tensorflow: ModuleType, tmp_path: Path
) -> None:
    tf = tensorflow
    client = live_service.client()
    v1 = publish(client, "a")
    base_dir = str(tmp_path / "base")
    model = new_model()
    ckpt = tf.train.Checkpoint(model=model)
    base = rk.tf.track(
        tf.train.CheckpointManager(ckpt, base_dir, max_to_keep=3),
        client=client,
        model="base",
        data={"train": v1},
        queue=tmp_path / "q.jsonl",
    )
    base.save()
    base.save()
    # a new process restores by hand, without telling the tracker
    model = new_model()
    ckpt = tf.train.Checkpoint(model=model)
    plain = tf.train.CheckpointManager(ckpt, base_dir, max_to_keep=3)
    ckpt.restore(plain.latest_checkpoint)
    resumed = rk.tf.track(
        plain, client=client, model="base", data={"train": v1}, queue=tmp_path / "q.jsonl"
    )
    assert resumed.save().endswith("ckpt-3")
    base_run = run_for_directory(Path(base_dir).as_uri())
    assert client.checkpoint("base/ckpt-3").parent == rk.CheckpointRef("base", "ckpt-2", base_run)
    # fine-tune: another model initialised from base/ckpt-3, trained on other data
    other = publish(client, "finetune")
    tuned_model = new_model()
    tuned_ckpt = tf.train.Checkpoint(model=tuned_model)
    tf.train.Checkpoint(model=tuned_model).restore(resumed.latest_checkpoint).expect_partial()
    tuned = rk.tf.track(
        tf.train.CheckpointManager(tuned_ckpt, str(tmp_path / "tuned"), max_to_keep=3),
        client=client,
        model="tuned",
        data={"train": other},
        parent="base/ckpt-3",
        queue=tmp_path / "q.jsonl",
    )
    tuned.save()
    info = client.checkpoint("tuned/ckpt-1")
    assert info.parent == rk.CheckpointRef("base", "ckpt-3", base_run)
    assert info.parent_kind == "initialized_from"
    lineage = client.lineage("tuned/ckpt-1")
    assert lineage.versions == [v1.name, other.name]
    assert [link["model"] for link in lineage.chain] == ["tuned", "base", "base", "base"]
    assert {c.model for c in client.consumers(v1).checkpoints} == {"base", "tuned"}

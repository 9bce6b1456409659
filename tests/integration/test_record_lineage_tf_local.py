"""Which checkpoints saw a record, and how much of its data a checkpoint saw (issue 25, items 5
and 6), through real tracked TensorFlow training on local storage; the service under uvicorn."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.core.record_identity import record_hash
from recordkeeper.record_lineage import lookup_uri
from tests.integration.conftest import LiveService

pytestmark = [pytest.mark.tf]


def publish(
    client: rk.Client, prefix: str, train: int = 16, validation: int = 4
) -> rk.DatasetVersion:
    with client.writer("toy", desc=prefix, shard_size=4096) as w:
        for i in range(train + validation):
            w.write(f"{prefix}-{i}".encode(), split="train" if i < train else "validation")
    return client.resolve(w.version.name)


def new_model() -> object:
    import keras

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_record_to_checkpoints_and_epochs_seen(
    live_service: LiveService, tensorflow: ModuleType, tmp_path: Path
) -> None:
    tf = tensorflow
    client = live_service.client()
    v1 = publish(client, "a")
    v2 = publish(client, "b")
    for v in (v1, v2):
        client.index(v)
        assert Path(lookup_uri(v).removeprefix("file://")).is_file()

    # base: trained on v1 with batches of 4 train records; saved at steps 2 and 6
    directory = str(tmp_path / "base")
    ckpt = tf.train.Checkpoint(model=new_model())
    base = rk.tf.track(
        tf.train.CheckpointManager(ckpt, directory, max_to_keep=5),
        client=client,
        model="base",
        data={"train": v1, "eval": v1},
        batch_size=4,
        queue=tmp_path / "q.jsonl",
    )
    base.save(checkpoint_number=2)  # 2 steps * 4 = 8 of 16 train records: 0.5 epochs
    base.save(checkpoint_number=6)  # 4 more steps: 16 records, 1.0 epoch
    # a new process resumes from ckpt-6 and trains 8 steps more on v1
    ckpt = tf.train.Checkpoint(model=new_model())
    resumed = rk.tf.track(
        tf.train.CheckpointManager(ckpt, directory, max_to_keep=5),
        client=client,
        model="base",
        data={"train": v1},
        batch_size=4,
        queue=tmp_path / "q.jsonl",
    )
    assert resumed.restore_or_initialize().endswith("ckpt-6")
    resumed.save(checkpoint_number=14)  # 32 records: 2.0 epochs

    # fine-tuned from base/ckpt-14 with Keras fit on v2 (batch counting in the callback)
    xs, ys = np.ones((12, 2), "float32"), np.ones((12, 1), "float32")
    tf.train.Checkpoint(model=(tuned := new_model())).restore(
        resumed.latest_checkpoint
    ).expect_partial()
    callback = rk.tf.make_checkpoint_callback(
        str(tmp_path / "tuned"),
        client=client,
        model_name="tuned",
        data={"train": v2},
        parent="base/ckpt-14",
        batch_size=4,
        queue=tmp_path / "q.jsonl",
    )
    tuned.fit(xs, ys, epochs=1, batch_size=4, verbose=0, callbacks=[callback])  # 3 batches

    # item 6: how much of the data each checkpoint saw
    lineage = client.lineage("base/ckpt-14")
    assert lineage.epochs(v1.name) == pytest.approx(0.5 + 1.0 + 2.0)
    train = next(c for c in lineage.consumed if c["role"] == "train")
    assert [s["records"] for s in train["segments"]] == [8, 16, 32]
    assert train["records"] == 56 and train["unknown_segments"] == 0
    eval_use = next(c for c in lineage.consumed if c["role"] == "eval")
    assert eval_use["counted_segments"] == 0 and eval_use["unknown_segments"] == 2
    assert lineage.epochs(v1.name, "eval") is None  # not counted: never guessed
    tuned_lineage = client.lineage("tuned/ckpt-1")
    assert tuned_lineage.epochs(v2.name) == pytest.approx(12 / 16)
    assert tuned_lineage.epochs(v1.name) == pytest.approx(3.5)  # inherited from base
    body = client.lineage_json("base/ckpt-2")
    # consumed follows the entries' order, where train and eval of one version first used by
    # the same segment tie: pick the role
    train_json = next(c for c in body["consumed"] if c["role"] == "train")
    assert train_json["segments"][0]["epochs"] == pytest.approx(0.5)

    # item 5: which checkpoints saw a record of v1's train split
    answer = client.record_lineage(b"a-3", dataset="toy")
    assert answer.found
    assert {s["version"] for s in answer.shards} == {v1.name}
    assert {s["split"] for s in answer.shards} == {"train"}
    assert all(s["copies"] == 1 for s in answer.shards)
    refs = {str(c.ref.without_run()) for c in answer.checkpoints}
    assert refs == {"base/ckpt-2", "base/ckpt-6", "base/ckpt-14", "tuned/ckpt-1"}
    assert {c.checkpoint for c in answer.checkpoints if c.direct} == {
        "ckpt-2",
        "ckpt-6",
        "ckpt-14",
    }
    assert set(answer.searched) == {v1.name, v2.name} and not answer.not_indexed
    # the same question by identity, and by a tf.train.Example-free bytes record of v2
    same = client.record_lineage(record_hash(b"a-3").hex(), versions=[v1.name])
    assert same.shards == answer.shards
    only_tuned = client.record_lineage(b"b-0", dataset="toy")
    assert {str(c.ref.without_run()) for c in only_tuned.checkpoints} == {"tuned/ckpt-1"}
    # a validation record: only the segment that used validation (base's eval role)
    val = client.record_lineage(b"a-17", dataset="toy", transitive=False)
    assert {c.checkpoint for c in val.checkpoints} == {"ckpt-2", "ckpt-6"}
    missing = client.record_lineage(b"never written", dataset="toy")
    assert not missing.found and not missing.checkpoints

    # the CLI
    from recordkeeper.cli.app import app

    env = {"RECORDKEEPER_URL": client.url}
    result = CliRunner().invoke(
        app, ["which-checkpoints", "toy", "--hash", record_hash(b"a-3").hex(), "--json"], env=env
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed["found"] and len(printed["checkpoints"]) == 4
    shown = CliRunner().invoke(app, ["lineage", "base/ckpt-14"], env=env)
    assert shown.exit_code == 0, shown.output
    assert f"saw 3.50 epochs of {v1.name}" in shown.output.replace("\n", " ")

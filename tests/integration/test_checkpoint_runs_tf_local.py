"""Issue 9, points 1, 2 and 10 with real TensorFlow, over a live service on PostgreSQL.

* two tracked runs of one model name, each in a fresh directory, with a
  ``SavedModelCheckpointManager`` (``max_to_keep=2``): no save fails, every checkpoint is
  registered in its own run, and the two lineages stay apart;
* ``max_to_keep`` deletions (checkpoint and ``_saved_modules``) are recorded as they happen,
  a deletion by hand is found by ``check_checkpoints``; deleted checkpoints keep their lineage;
* ``check_model``/``recordkeeper check-model``: the serving signature parses ``label`` (int64)
  and ``x`` (float32 [3]); the training data lacks ``x``, another version stores ``label`` as
  floats.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper import cli
from recordkeeper.core.lineage import run_for_directory
from tests.integration._savedmodel_manager import SavedModelCheckpointManager
from tests.integration.conftest import LiveService

pytestmark = [pytest.mark.tf, pytest.mark.postgres]


@pytest.fixture
def service(
    live_service_factory: Callable[..., LiveService], postgres_database_url: str
) -> LiveService:
    return live_service_factory(database_url=postgres_database_url)


def publish_examples(
    client: rk.Client, tf: ModuleType, desc: str, feature: Callable[[int], dict[str, Any]]
) -> rk.DatasetVersion:
    with client.writer("toy", desc=desc) as w:
        for i in range(12):
            example = tf.train.Example(features=tf.train.Features(feature=feature(i)))
            w.write(example, split="train")
    return client.resolve(w.version.name)


def serving_module(tf: ModuleType) -> Any:
    class Serving(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable(1.0)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, serialized: Any) -> Any:
            parsed = tf.io.parse_example(
                serialized,
                {
                    "label": tf.io.FixedLenFeature([], tf.int64),
                    "x": tf.io.FixedLenFeature([3], tf.float32),
                },
            )
            return {"y": tf.reduce_sum(parsed["x"], axis=1) * self.w}

    module = Serving()
    module.saved_model_signatures = {"serving_default": module.serve}
    return module


def tracked(
    client: rk.Client, tf: ModuleType, directory: Path, data: rk.DatasetVersion, queue: Path
) -> Any:
    module = serving_module(tf)
    checkpoint = tf.train.Checkpoint(module=module)
    manager = SavedModelCheckpointManager(
        checkpoint, str(directory), max_to_keep=2, modules_to_export={"serving": module}
    )
    return rk.tf.track(manager, client=client, model="det", data={"train": data}, queue=queue)


def test_reruns_deletions_and_check_model(
    service: LiveService, tensorflow: ModuleType, tmp_path: Path
) -> None:
    tf = tensorflow
    client = service.client()
    labels_only = publish_examples(
        client,
        tf,
        "labels",
        lambda i: {"label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2]))},
    )
    float_labels = publish_examples(
        client,
        tf,
        "floats",
        lambda i: {
            "label": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5])),
            "x": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 2.0, 3.0])),
        },
    )
    queue = tmp_path / "queue.jsonl"
    managers = {}
    events: list[Any] = []
    for name, data in (("a", labels_only), ("b", float_labels)):
        manager = tracked(client, tf, tmp_path / name / "det", data, queue)
        manager.add_save_callback(events.append)
        for _ in range(4):
            assert manager.save() is not None  # never raises, never skips
        managers[name] = manager
    # every save with an export was checked against its training data at once
    assert all(e.model_check is not None and not e.model_check.ok for e in events)
    assert {p.problem for p in events[0].model_check.problems} == {"missing_feature"}
    a, b = managers["a"], managers["b"]
    # point 1: two runs of model "det", each with its own ckpt-1..4, nothing queued or refused
    assert a.run != b.run and a.run == run_for_directory((tmp_path / "a" / "det").as_uri())
    for manager in (a, b):
        assert [i.checkpoint for i in manager.registered] == [f"ckpt-{k}" for k in range(1, 5)]
        assert manager.queued == [] and {i.run for i in manager.registered} == {manager.run}
    assert not queue.exists() and not queue.with_name("queue.rejected.jsonl").exists()
    with pytest.raises(rk.AmbiguousCheckpoint) as ambiguous:
        client.lineage("det/ckpt-4")
    assert sorted(ambiguous.value.extra["candidates"]) == sorted(
        [f"det@{a.run}/ckpt-4", f"det@{b.run}/ckpt-4"]
    )
    lineage_a = client.lineage(f"det@{a.run}/ckpt-4")
    lineage_b = client.lineage(f"det@{b.run}/ckpt-4")
    assert lineage_a.versions == [labels_only.name] and lineage_b.versions == [float_labels.name]
    assert {link["run"] for link in lineage_a.chain} == {a.run} and len(lineage_a.chain) == 4
    assert client.consumers(labels_only).refs == [f"det@{a.run}/ckpt-{k}" for k in range(1, 5)]
    # point 2: max_to_keep=2 deleted ckpt-1 and ckpt-2 (and their _saved_modules) in both runs
    for manager, directory in ((a, tmp_path / "a" / "det"), (b, tmp_path / "b" / "det")):
        assert [str(r) for r in manager.deleted] == [
            f"det@{manager.run}/ckpt-1",
            f"det@{manager.run}/ckpt-2",
        ]
        assert not (directory / "ckpt-1_saved_modules").exists()
        listed = {c.checkpoint: c for c in client.checkpoints("det", run=manager.run)}
        assert {k for k, c in listed.items() if c.deleted} == {"ckpt-1", "ckpt-2"}
        assert listed["ckpt-1"].deleted_reason == "max_to_keep"
    after = client.lineage(f"det@{a.run}/ckpt-4")
    assert [link["state"] for link in after.chain] == ["present", "present", "deleted", "deleted"]
    assert after.versions == [labels_only.name]  # history is never lost
    # a deletion the manager did not make: found by looking at storage
    for leftover in (tmp_path / "a" / "det").glob("ckpt-3.*"):
        leftover.unlink()
    shutil.rmtree(tmp_path / "a" / "det" / "ckpt-3_saved_modules")
    report = client.check_checkpoints("det", run=a.run)
    assert [str(r) for r in report.missing] == [f"det@{a.run}/ckpt-3"]
    assert [str(r) for r in report.present] == [f"det@{a.run}/ckpt-4"]
    gone = client.checkpoint(f"det@{a.run}/ckpt-3")
    assert gone.deleted and gone.deleted_reason == "files_missing"
    assert client.check_checkpoints("det", run=a.run).ok  # recorded: nothing new is missing
    # point 10: the export's serving inputs were recorded and are compared with the data
    export = client.checkpoint(f"det@{a.run}/ckpt-4").saved_models[0]
    assert export.inputs is not None
    assert {(i.name, i.kind, i.dtype, i.shape) for i in export.inputs} == {
        ("label", "dense", "int64", ()),
        ("x", "dense", "float32", (3,)),
    }
    result = client.check_model(f"det@{a.run}/ckpt-4", data=[float_labels])
    assert not result.ok
    found = {(c.version, c.role, p.feature, p.problem) for c in result.checks for p in c.problems}
    assert found == {
        (labels_only.name, "train", "x", "missing_feature"),
        (float_labels.name, "asked", "label", "dtype_mismatch"),
    }
    runner = CliRunner()
    out = runner.invoke(
        cli.app,
        ["--url", service.url, "check-model", f"det@{a.run}/ckpt-4", "--data", "toy@v2"],
    )
    assert out.exit_code == 1, out.output
    assert "missing_feature" in out.output and "dtype_mismatch" in out.output
    as_json = runner.invoke(
        cli.app, ["--url", service.url, "check-model", f"det@{b.run}/ckpt-4", "--json"]
    )
    body = json.loads(as_json.output)
    assert body["checks"][0]["version"] == float_labels.name
    assert [p["problem"] for p in body["checks"][0]["problems"]] == ["dtype_mismatch"]

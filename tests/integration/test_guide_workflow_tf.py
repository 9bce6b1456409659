"""Issue 13: the guide's workflow with real TensorFlow over a live service.

Two runs of one model, each trained on another version of the data, through the faithful
``SavedModelCheckpointManager`` (exports next to each checkpoint, ``max_to_keep=2``):

* TensorBoard: the run's event files hold the data versions and digests (text) and an HParams
  entry keyed by data version, read back with TensorFlow's summary iterator;
* ``client.compare`` / ``recordkeeper compare --plot``: the loss grouped by data version;
* ``client.checkpoints(model, data=...)``: the checkpoints trained on one version, with exports
  and deletions; ``rk.tf.load_saved_model`` loads a registered export and refuses a deleted one;
* every export carries its lineage in ``assets.extra/recordkeeper.json``: read back from a copy
  on local disk and on the S3 server with the service stopped, in Python and with
  ``recordkeeper inspect-model``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import fsspec
import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper import cli
from tests.integration._savedmodel_manager import SavedModelCheckpointManager
from tests.integration.conftest import LiveService

pytestmark = [pytest.mark.tf, pytest.mark.s3]


def publish(client: rk.Client, tf: ModuleType, desc: str, offset: int) -> rk.DatasetVersion:
    with client.writer("toy", desc=desc) as w:
        for i in range(16):
            feature = {
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i + offset, 1.0, 2.0])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2])),
            }
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)), split="train")
    return client.resolve(w.version.name)


def serving_module(tf: ModuleType) -> Any:
    class Serving(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable(1.0)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, serialized: Any) -> Any:
            spec = {
                "label": tf.io.FixedLenFeature([], tf.int64),
                "x": tf.io.FixedLenFeature([3], tf.float32),
            }
            parsed = tf.io.parse_example(serialized, spec)
            return {"y": tf.reduce_sum(parsed["x"], axis=1) * self.w}

    module = Serving()
    module.saved_model_signatures = {"serving_default": module.serve}
    return module


def train(
    client: rk.Client, tf: ModuleType, directory: Path, run: str, data: rk.DatasetVersion
) -> Any:
    """Three saves with a decreasing loss; returns the tracked manager."""
    module = serving_module(tf)
    manager = rk.tf.track(
        SavedModelCheckpointManager(
            tf.train.Checkpoint(module=module),
            str(directory),
            max_to_keep=2,
            modules_to_export={"serving": module},
        ),
        client=client,
        model="det",
        data={"train": data},
        run=run,
    )
    for step in range(1, 4):
        assert manager.save(metrics={"loss": 1.0 / step + (0.5 if run == "run-b" else 0.0)})
    return manager


def read_events(tf: ModuleType, logdir: str) -> tuple[list[str], dict[str, str]]:
    """The ``recordkeeper/data`` texts and the HParams entry's values, from the event files."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    texts: list[str] = []
    hparams: dict[str, str] = {}
    for path in sorted(Path(logdir).glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == "recordkeeper/data":
                    texts.append(tf.make_ndarray(value.tensor).item().decode())
                if value.metadata.plugin_data.plugin_name == "hparams":
                    data = plugin_data_pb2.HParamsPluginData.FromString(
                        value.metadata.plugin_data.content
                    )
                    for key, hp in data.session_start_info.hparams.items():
                        hparams[key] = hp.string_value
    return texts, hparams


def test_guide_workflow(
    live_service_factory: Callable[..., LiveService],
    tensorflow: ModuleType,
    tmp_path: Path,
    s3_server: Any,
    s3_bucket: str,
) -> None:
    tf = tensorflow
    service = live_service_factory()
    client = service.client()
    v1 = publish(client, tf, "first", 0)
    v2 = publish(client, tf, "second", 100)
    a = train(client, tf, tmp_path / "a" / "det", "run-a", v1)
    b = train(client, tf, tmp_path / "b" / "det", "run-b", v2)

    # 1. TensorBoard: versions, digests and the HParams entry in the run's event files
    assert a.tensorboard_dir == f"{tmp_path / 'a' / 'det'}/recordkeeper"
    texts, hparams = read_events(tf, a.tensorboard_dir)
    assert len(texts) == 3
    assert v1.name in texts[-1] and v1.content_digest in texts[-1]
    assert "det@run-a/ckpt-3" in texts[-1]
    assert hparams["data/train"] == v1.name
    assert hparams["data/train/digest"] == v1.content_digest
    _, hparams_b = read_events(tf, b.tensorboard_dir)
    assert hparams_b["data/train"] == v2.name

    # 2. compare: the loss grouped by data version, per run; the CLI table and the plot
    comparison = client.compare("det", metric="loss")
    groups = {(g.data, g.run): g for g in comparison.groups}
    assert set(groups) == {(v1.name, "run-a"), (v2.name, "run-b")}
    assert groups[(v1.name, "run-a")].count == 3
    assert groups[(v1.name, "run-a")].last == pytest.approx(1.0 / 3)
    assert groups[(v2.name, "run-b")].best == pytest.approx(1.0 / 3 + 0.5)
    plot = tmp_path / "loss.png"
    result = CliRunner().invoke(
        cli.app, ["--url", service.url, "compare", "det", "--metric", "loss", "--plot", str(plot)]
    )
    assert result.exit_code == 0, result.output
    assert v1.name in result.output and v2.name in result.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    artifacts = Path("artifacts")
    if artifacts.is_dir():  # kept for a person to look at (not committed)
        shutil.copy(plot, artifacts / "compare-loss.png")

    # 4. the checkpoints trained on v1: run a's, with exports; max_to_keep deleted ckpt-1
    trained_on_v1 = client.checkpoints("det", data=v1.ref)
    assert {c.run for c in trained_on_v1} == {"run-a"}
    states = {c.checkpoint: c.state for c in trained_on_v1}
    assert states == {"ckpt-3": "present", "ckpt-2": "present", "ckpt-1": "deleted"}
    assert [e.name for e in trained_on_v1[0].saved_models] == ["serving"]
    loaded = rk.tf.load_saved_model("det@run-a/ckpt-3", name="serving", client=client)
    example = tf.train.Example(
        features=tf.train.Features(
            feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 2.0, 3.0])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[1])),
            }
        )
    )
    answer = loaded.signatures["serving_default"](tf.constant([example.SerializeToString()]))
    assert float(answer["y"].numpy()[0]) == pytest.approx(6.0)
    with pytest.raises(rk.StorageError, match="deleted"):
        rk.tf.load_saved_model("det@run-a/ckpt-1", name="serving", client=client)
    with pytest.raises(rk.NotFound, match="no export named 'missing'"):
        rk.tf.load_saved_model("det@run-a/ckpt-3", name="missing", client=client)

    # 3. self-describing exports, read with the service stopped from copies elsewhere
    export = tmp_path / "a" / "det" / "ckpt-3_saved_modules" / "serving"
    copy = tmp_path / "serving-bucket" / "det" / "1"
    shutil.copytree(export, copy)
    s3_export = f"{s3_bucket}/models/det/1"
    fs = fsspec.filesystem("s3", **s3_server.storage_options)
    fs.put(str(export), s3_export.removeprefix("s3://"), recursive=True)
    service.stop()

    lineage = rk.tf.model_lineage(str(copy))
    assert lineage.ref == "det@run-a/ckpt-3" and lineage.step == 3
    assert lineage.export == "serving"
    assert lineage.registry == service.url
    assert [(d["version"], d["content_digest"], d["role"]) for d in lineage.data] == [
        (v1.name, v1.content_digest, "train")
    ]
    assert lineage.versions == (v1.name,)
    from_s3 = rk.tf.model_lineage(s3_export, storage_options=s3_server.storage_options)
    assert from_s3 == lineage
    result = CliRunner().invoke(cli.app, ["inspect-model", str(copy), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["data"][0]["content_digest"] == v1.content_digest
    result = CliRunner().invoke(cli.app, ["inspect-model", str(tmp_path / "a")])
    assert result.exit_code != 0
    assert "assets.extra/recordkeeper.json" in result.output


def test_opt_out_writes_neither(
    live_service: LiveService, tensorflow: ModuleType, tmp_path: Path
) -> None:
    tf = tensorflow
    client = live_service.client()
    v1 = publish(client, tf, "first", 0)
    module = serving_module(tf)
    manager = rk.tf.track(
        SavedModelCheckpointManager(
            tf.train.Checkpoint(module=module),
            str(tmp_path / "det"),
            max_to_keep=2,
            modules_to_export={"serving": module},
        ),
        client=client,
        model="det",
        data={"train": v1},
        tensorboard=False,
        describe_exports=False,
    )
    assert manager.save()
    assert manager.tensorboard_dir is None
    assert not (tmp_path / "det" / "recordkeeper").exists()
    assert not (tmp_path / "det" / "ckpt-1_saved_modules" / "serving" / "assets.extra").exists()

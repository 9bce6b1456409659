"""Exports named by their data version (the guide's ``ckpt-1234_saved_modules/data_version=…``)
with a real TensorFlow SavedModel export and the tracked manager.

The export path was percent-encoded when it was registered (``pathlib``'s ``as_uri``), so the
lineage file went to a stray sibling ``data_version%3D…`` and ``inspect-model`` on the real
export exited 3.  Local paths are now stored literally, a whole class of characters (``=``,
``+``, ``,``, ``@``) in the checkpoint directory and the export name.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper import cli
from recordkeeper.core.lineage import run_for_directory
from tests.integration._savedmodel_manager import SavedModelCheckpointManager
from tests.integration.conftest import LiveService
from tests.integration.test_checkpoint_runs_tf_local import publish_examples, serving_module

pytestmark = [pytest.mark.tf]


def _data(client: rk.Client, tf: ModuleType) -> rk.DatasetVersion:
    return publish_examples(
        client,
        tf,
        "labels",
        lambda i: {
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2])),
            "x": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 2.0, 3.0])),
        },
    )


def test_exports_named_by_data_version_with_reserved_characters(
    live_service: LiveService, tensorflow: ModuleType, tmp_path: Path
) -> None:
    tf = tensorflow
    client = live_service.client()
    data = _data(client, tf)
    directory = tmp_path / "sweep" / "lr=0.1,bs+32@a"
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
        queue=tmp_path / "queue.jsonl",
        export_names="data_version={version}",
    )
    # the run is derived as before this change (from the percent-encoded directory URI)
    assert manager.run == run_for_directory(directory.as_uri())
    prefix = manager.save()
    assert prefix is not None
    name = f"data_version={data.name}"
    export = Path(f"{prefix}_saved_modules") / name
    assert (export / "saved_model.pb").is_file()
    assert (export / "assets.extra" / "recordkeeper.json").is_file()
    stray = [str(p) for p in tmp_path.rglob("*") if "%" in p.name]
    assert stray == []
    (info,) = manager.registered
    (registered,) = info.saved_models
    assert (registered.name, registered.uri) == (name, f"file://{export}")
    assert info.uri == f"file://{prefix}"
    result = CliRunner().invoke(cli.app, ["inspect-model", str(export), "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["export"] == name
    assert [(d["version"], d["content_digest"]) for d in shown["data"]] == [
        (data.name, data.content_digest)
    ]
    loaded = rk.tf.load_saved_model(str(info.ref), name=name, client=client)
    out = loaded.signatures["serving_default"](
        tf.constant(
            [
                tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[1])),
                            "x": tf.train.Feature(
                                float_list=tf.train.FloatList(value=[1.0, 2.0, 3.0])
                            ),
                        }
                    )
                ).SerializeToString()
            ]
        )
    )
    assert float(out["y"][0]) == 6.0
    # resuming in the same directory: the same run, the restored checkpoint found as parent
    again = rk.tf.track(
        SavedModelCheckpointManager(
            tf.train.Checkpoint(module=serving_module(tf)),
            str(directory),
            max_to_keep=2,
            modules_to_export={"serving": serving_module(tf)},
        ),
        client=client,
        model="det",
        data={"train": data},
        queue=tmp_path / "queue.jsonl",
        export_names="data_version={version}",
    )
    assert again.run == manager.run
    again.restore_or_initialize()
    assert again.parent == info.ref


def test_export_names_refused_when_ambiguous(
    live_service: LiveService, tensorflow: ModuleType, tmp_path: Path
) -> None:
    tf = tensorflow
    client = live_service.client()
    data = _data(client, tf)
    a, b = serving_module(tf), serving_module(tf)

    def track(template: str, modules: dict[str, object]) -> object:
        return rk.tf.track(
            SavedModelCheckpointManager(
                tf.train.Checkpoint(a=a, b=b),
                str(tmp_path / "ckpts"),
                max_to_keep=1,
                modules_to_export=modules,
            ),
            client=client,
            model="det",
            data={"train": data},
            queue=tmp_path / "queue.jsonl",
            export_names=template,
            tensorboard=False,
        )

    with pytest.raises(rk.InvalidRequest, match=r"put \{module\} in it"):
        track("data_version={version}", {"serving": a, "scoring": b})
    with pytest.raises(rk.InvalidRequest, match="one directory name"):
        track("{module}/data_version={version}", {"serving": a})
    with pytest.raises(rk.InvalidRequest, match="not a template"):
        track("data_version={dataset}", {"serving": a})
    two = track("{module}-data_version={version}", {"serving": a, "scoring": b})
    assert sorted(two.modules_to_export) == [  # type: ignore[attr-defined]
        f"scoring-data_version={data.name}",
        f"serving-data_version={data.name}",
    ]

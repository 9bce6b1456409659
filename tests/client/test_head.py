"""A preview of sample records (issue 26, item 6): ``DatasetVersion.head`` and
``recordkeeper head REF`` show a version's first records with their features decoded; the
decoder (pure Python) agrees with TensorFlow's own parsing of Examples and SequenceExamples."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.core.example_decode import NotAnExample, decode_example, shown
from tests.client._records import example_bytes

pytest.importorskip("fastapi")


def test_decoding_matches_tensorflow(tensorflow: Any) -> None:
    tf = tensorflow
    example = tf.train.Example(
        features=tf.train.Features(
            feature={
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[3, -7, 2**40])),
                "box": tf.train.Feature(float_list=tf.train.FloatList(value=[0.25, -1.5])),
                "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"cat", b"\xff"])),
                "empty": tf.train.Feature(),
            }
        )
    )
    decoded = decode_example(example.SerializeToString())
    assert decoded == {
        "box": [0.25, -1.5],
        "empty": [],
        "label": [3, -7, 2**40],
        "name": [b"cat", b"\xff"],
    }
    sequence = tf.train.SequenceExample(
        context=tf.train.Features(
            feature={"id": tf.train.Feature(int64_list=tf.train.Int64List(value=[9]))}
        ),
        feature_lists=tf.train.FeatureLists(
            feature_list={
                "tokens": tf.train.FeatureList(
                    feature=[
                        tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 2])),
                        tf.train.Feature(int64_list=tf.train.Int64List(value=[3])),
                    ]
                )
            }
        ),
    )
    assert decode_example(sequence.SerializeToString()) == {
        "id": [9],
        "feature_lists": {"tokens": [[1, 2], [3]]},
    }


def test_non_examples_are_refused_and_bytes_shown_readably() -> None:
    with pytest.raises(NotAnExample):
        decode_example(b"plain text, not a protobuf")
    view = shown({"text": [b"a cat"], "image": [bytes(range(200))]}, width=16)
    assert view["text"] == ["a cat"]
    assert view["image"][0].startswith("<200 bytes: 0001020304050607") and view["image"][
        0
    ].endswith("…>")


def _publish(client: rk.Client) -> rk.DatasetVersion:
    with client.writer("coco", shard_size="1kB") as w:
        for i in range(40):
            w.write(example_bytes({"label": [i], "caption": [b"record %d" % i]}), split="train")
        w.write(example_bytes({"label": [99]}), split="validation")
    return w.version


def test_head_reads_the_first_records_across_shards(client: rk.Client) -> None:
    version = client.resolve(_publish(client).name)
    assert version.splits["train"].shard_count > 1  # the preview crosses shards when it must
    first = version.head("train", 30)
    assert [decode_example(r)["label"] for r in first] == [[i] for i in range(30)]
    assert version.head("train", 0) == []
    assert len(version.head("train", 1000)) == 40


def test_cli_head_prints_decoded_features(
    client: rk.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recordkeeper.cli import common
    from recordkeeper.cli.app import app

    version = _publish(client)
    monkeypatch.setattr(common, "Client", lambda *a, **k: client)
    result = CliRunner().invoke(app, ["head", "coco@latest", "-n", "2"])
    assert result.exit_code == 0, result.output
    assert f"{version.name} train: first 2 of 40 records" in result.stdout
    assert 'caption: ["record 1"]' in result.stdout and "label: [0]" in result.stdout
    as_json = CliRunner().invoke(app, ["head", "coco@latest", "--split", "validation", "--json"])
    assert as_json.exit_code == 0, as_json.output
    answer = json.loads(as_json.stdout)
    assert answer["split"] == "validation"
    assert answer["records"] == [
        {
            "index": 0,
            "size": answer["records"][0]["size"],
            "kind": "example",
            "features": {"label": [99]},
        }
    ]
    missing = CliRunner().invoke(app, ["head", "coco@latest", "--split", "test"])
    assert missing.exit_code == 3 and "[not_found]" in missing.stderr
    assert "splits: train, validation" in missing.stderr

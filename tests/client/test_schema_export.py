"""Schema export: tf.io.parse_example feature specs and tensorflow-metadata schemas."""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType

import pytest

from recordkeeper.core.errors import InvalidInput
from recordkeeper.core.schema import Feature, Schema
from recordkeeper.schema_export import feature_spec, to_tfmd_schema
from recordkeeper.schema_inference import infer_schema


def make_examples(tf: ModuleType) -> list[bytes]:
    """Four detection-style Examples: some features fixed, some varying, one often missing."""
    out = []
    for i in range(4):
        example = tf.train.Example()
        feature = example.features.feature
        feature["image/encoded"].bytes_list.value.append(b"jpeg-%d" % i)
        feature["image/height"].int64_list.value.append(100 + i)
        feature["embedding"].float_list.value.extend([float(i)] * 3)
        feature["objects/label"].int64_list.value.extend(range(i))  # 0..3 values
        if i % 2:
            feature["caption"].bytes_list.value.append(b"caption %d" % i)
        out.append(example.SerializeToString())
    return out


@pytest.mark.tf
def test_feature_spec_parses_a_batch(tensorflow: ModuleType) -> None:
    tf = tensorflow
    records = make_examples(tf)
    schema = infer_schema(records)
    spec = feature_spec(schema)
    assert spec == {
        "caption": tf.io.VarLenFeature(tf.string),
        "embedding": tf.io.FixedLenFeature([3], tf.float32),
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/height": tf.io.FixedLenFeature([], tf.int64),
        "objects/label": tf.io.VarLenFeature(tf.int64),
    }
    parsed = tf.io.parse_example(tf.constant(records), spec)
    assert parsed["image/height"].shape == (4,)
    assert parsed["image/height"].numpy().tolist() == [100, 101, 102, 103]
    assert parsed["image/encoded"].numpy().tolist() == [b"jpeg-0", b"jpeg-1", b"jpeg-2", b"jpeg-3"]
    assert parsed["embedding"].shape == (4, 3)
    assert parsed["embedding"].numpy()[2].tolist() == [2.0, 2.0, 2.0]
    labels = tf.sparse.to_dense(parsed["objects/label"]).numpy().tolist()
    assert labels == [[0, 0, 0], [0, 0, 0], [0, 1, 0], [0, 1, 2]]
    assert parsed["caption"].values.numpy().tolist() == [b"caption 1", b"caption 3"]


@pytest.mark.tf
def test_ragged_feature_spec(tensorflow: ModuleType) -> None:
    tf = tensorflow
    records = make_examples(tf)
    spec = feature_spec(infer_schema(records), ragged=True)
    assert spec["objects/label"] == tf.io.RaggedFeature(tf.int64)
    assert spec["image/height"] == tf.io.FixedLenFeature([], tf.int64)
    parsed = tf.io.parse_example(tf.constant(records), spec)
    assert parsed["objects/label"].to_list() == [[], [0], [0, 1], [0, 1, 2]]
    assert parsed["caption"].to_list() == [[], [b"caption 1"], [], [b"caption 3"]]


@pytest.mark.tf
def test_sequence_feature_spec_parses_a_batch(tensorflow: ModuleType) -> None:
    tf = tensorflow
    records = []
    for i in range(3):
        seq = tf.train.SequenceExample()
        seq.context.feature["id"].int64_list.value.append(i)
        for step in range(i + 1):
            seq.feature_lists.feature_list["frames"].feature.add().float_list.value.extend(
                [float(step)] * 2
            )
            seq.feature_lists.feature_list["words"].feature.add().bytes_list.value.extend(
                [b"w"] * step
            )
        if i:
            seq.feature_lists.feature_list["tags"].feature.add().int64_list.value.append(i)
        records.append(seq.SerializeToString())
    schema = infer_schema(records)
    context_spec, sequence_spec = feature_spec(schema)
    assert context_spec == {"id": tf.io.FixedLenFeature([], tf.int64)}
    assert sequence_spec == {
        "frames": tf.io.FixedLenSequenceFeature([2], tf.float32, allow_missing=False),
        "tags": tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True),
        "words": tf.io.VarLenFeature(tf.string),
    }
    context, sequences, lengths = tf.io.parse_sequence_example(
        tf.constant(records), context_features=context_spec, sequence_features=sequence_spec
    )
    assert context["id"].numpy().tolist() == [0, 1, 2]
    assert sequences["frames"].shape == (3, 3, 2)
    assert lengths["frames"].numpy().tolist() == [1, 2, 3]
    assert sequences["tags"].numpy().tolist() == [[0], [1], [2]]
    assert lengths["tags"].numpy().tolist() == [0, 1, 1]


@pytest.mark.tf
def test_tfmd_schema() -> None:
    text_format = pytest.importorskip("google.protobuf.text_format")
    schema_pb2 = pytest.importorskip("tensorflow_metadata.proto.v0.schema_pb2")
    schema = Schema(
        record_type="sequence_example",
        record_count=4,
        features=(
            Feature("height", "int64", 1, 1, 4, scope="context"),
            Feature("labels", "int64", 0, 3, 3, scope="context"),
            Feature("box", "float", 4, 4, 4, scope="context"),
            Feature("frames", "bytes", 1, 1, 4, scope="feature_lists", min_steps=2, max_steps=9),
        ),
    )
    expected = text_format.Parse(
        """
        feature { name: "height" type: INT presence { min_fraction: 1 min_count: 1 }
                  shape { dim { size: 1 } } }
        feature { name: "labels" type: INT presence { min_fraction: 0.75 min_count: 1 }
                  value_count { min: 0 max: 3 } }
        feature { name: "box" type: FLOAT presence { min_fraction: 1 min_count: 1 }
                  shape { dim { size: 4 } } }
        feature { name: "##SEQUENCE##" type: STRUCT presence { min_count: 1 }
          struct_domain { feature {
            name: "frames" type: BYTES presence { min_fraction: 1 min_count: 1 }
            value_counts { value_count { min: 2 max: 9 } value_count { min: 1 max: 1 } } } } }
        """,
        schema_pb2.Schema(),
    )
    assert to_tfmd_schema(schema) == expected


def test_opaque_schemas_do_not_export() -> None:
    opaque = Schema(record_type="opaque", record_count=3)
    with pytest.raises(InvalidInput):
        feature_spec(opaque)
    with pytest.raises(InvalidInput):
        to_tfmd_schema(opaque)


def test_the_base_modules_do_not_import_tensorflow() -> None:
    code = (
        "import sys, recordkeeper, recordkeeper.tfrecord, recordkeeper.schema_inference, "
        "recordkeeper.schema_export\n"
        "from recordkeeper.core.schema import Schema\n"
        "Schema().merge(Schema())\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tensorflow', 'tensorflow_metadata', 'google'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

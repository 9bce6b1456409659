"""The canonical Example form against TensorFlow's own protobuf classes (real TensorFlow)."""

from __future__ import annotations

import random

import pytest

from recordkeeper.core.record_identity import canonical_example, record_hash

tf = pytest.importorskip("tensorflow")


def _feature(kind: str, values: list) -> object:
    if kind == "bytes":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


FEATURES = {
    "image/encoded": ("bytes", [b"\x89PNG", b""]),
    "label": ("int64", [3, -1, 2**62]),
    "score": ("float", [0.25, -0.0, 1e30]),
    "z": ("int64", []),
}


def _example(order: list[str]) -> bytes:
    """The Example with FEATURES written in ``order``: protobuf's own encoder keeps maps in one
    order, so each feature is serialized as its own Example and the messages are concatenated
    (on the wire, concatenated messages are one merged message, as every parser reads it)."""
    parts = []
    for name in order:
        ex = tf.train.Example()
        ex.features.feature[name].CopyFrom(_feature(*FEATURES[name]))
        parts.append(ex.SerializeToString())
    return b"".join(parts)


def test_the_same_example_in_any_feature_order_has_one_identity() -> None:
    names = list(FEATURES)
    records = set()
    identities = set()
    for seed in range(8):
        order = names[:]
        random.Random(seed).shuffle(order)
        record = _example(order)
        records.add(record)
        identities.add(record_hash(record, "example"))
        # The canonical form is an Example TensorFlow parses to the same message.
        assert tf.train.Example.FromString(
            canonical_example(record)
        ) == tf.train.Example.FromString(record)
    assert len(records) > 1  # the writers really produced different bytes
    assert len(identities) == 1
    deterministic = tf.train.Example.FromString(_example(names)).SerializeToString(
        deterministic=True
    )
    assert record_hash(deterministic, "example") in identities


def test_sequence_examples_canonicalise_and_parse_back() -> None:
    seq = tf.train.SequenceExample()
    seq.context.feature["id"].CopyFrom(_feature("bytes", [b"clip-1"]))
    for step in range(3):
        seq.feature_lists.feature_list["frames"].feature.add().CopyFrom(
            _feature("float", [step / 2])
        )
    seq.feature_lists.feature_list["empty"].SetInParent()
    record = seq.SerializeToString()
    assert tf.train.SequenceExample.FromString(canonical_example(record)) == seq
    ex = tf.train.Example()
    ex.features.feature["id"].CopyFrom(_feature("bytes", [b"clip-1"]))
    assert record_hash(ex.SerializeToString(), "example") != record_hash(record, "example")

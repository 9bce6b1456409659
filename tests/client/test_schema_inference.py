"""Schema inference from serialized Examples / SequenceExamples (recordkeeper.schema_inference)."""

from __future__ import annotations

import random
import struct
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import pytest

from recordkeeper import schema_inference
from recordkeeper.core.errors import SchemaConflict
from recordkeeper.core.schema import Feature, Schema
from recordkeeper.schema_inference import SchemaInferencer, infer_schema

# --------------------------------------------------------------------------- wire encoding by hand


@pytest.fixture(autouse=True)
def _both_implementations(implementation: str) -> str:
    """Every test here runs on the C fast paths and on the pure-Python code."""
    return implementation


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def ld(field: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def bytes_list(*values: bytes) -> bytes:
    return ld(1, b"".join(ld(1, v) for v in values))


def float_list(*values: float, packed: bool = True) -> bytes:
    if packed:
        return ld(2, ld(1, struct.pack(f"<{len(values)}f", *values)))
    return ld(2, b"".join(b"\x0d" + struct.pack("<f", v) for v in values))


def int64_list(*values: int, packed: bool = True) -> bytes:
    if packed:
        return ld(3, ld(1, b"".join(varint(v) for v in values)))
    return ld(3, b"".join(b"\x08" + varint(v) for v in values))


def features(entries: Sequence[tuple[str | bytes, bytes]]) -> bytes:
    out = b""
    for key, feature in entries:
        key = key.encode() if isinstance(key, str) else key
        out += ld(1, ld(1, key) + ld(2, feature))
    return out


def example(*entries: tuple[str | bytes, bytes]) -> bytes:
    return ld(1, features(entries))


def sequence_example(
    context: Sequence[tuple[str, bytes]], lists: Sequence[tuple[str, Sequence[bytes]]]
) -> bytes:
    feature_lists = b"".join(
        ld(1, ld(1, key.encode()) + ld(2, b"".join(ld(1, step) for step in steps)))
        for key, steps in lists
    )
    return ld(1, features(context)) + ld(2, feature_lists)


def stats(schema: Schema) -> dict[tuple[str, str], tuple[Any, ...]]:
    return {
        (f.scope, f.name): (
            f.kind,
            f.min_count,
            f.max_count,
            f.present_count,
            f.min_steps,
            f.max_steps,
        )
        for f in schema.features
    }


# --------------------------------------------------------------------------- Examples


def test_examples_of_every_kind() -> None:
    records = [
        example(
            ("image", bytes_list(b"\xff\xd8" * 400)),
            ("label", int64_list(3)),
            ("box", float_list(0.1, 0.2, 0.3, 0.4)),
        ),
        example(
            ("image", bytes_list(b"x")), ("label", int64_list(-1, 2**40, 0)), ("box", float_list())
        ),
        example(("label", int64_list(7))),
    ]
    schema = infer_schema(records)
    assert (schema.record_type, schema.record_count) == ("example", 3)
    assert schema.features == (
        Feature("box", "float", 0, 4, 2),
        Feature("image", "bytes", 1, 1, 2),
        Feature("label", "int64", 1, 3, 3),
    )
    assert schema.presence(schema.feature("image")) == pytest.approx(2 / 3)


def test_packed_and_unpacked_numbers_count_the_same() -> None:
    packed = example(("f", float_list(1.0, 2.0, 3.0)), ("i", int64_list(1, 300, -5)))
    unpacked = example(
        ("f", float_list(1.0, 2.0, 3.0, packed=False)), ("i", int64_list(1, 300, -5, packed=False))
    )
    # protobuf allows both encodings in one list: counts add up
    mixed = example(
        ("f", ld(2, ld(1, struct.pack("<f", 1.0)) + b"\x0d" + struct.pack("<f", 2.0))),
        ("i", ld(3, ld(1, varint(1) + varint(2)) + b"\x08" + varint(3))),
    )
    assert stats(infer_schema([packed])) == stats(infer_schema([unpacked]))
    assert stats(infer_schema([mixed])) == {
        ("features", "f"): ("float", 2, 2, 1, None, None),
        ("features", "i"): ("int64", 3, 3, 1, None, None),
    }


def test_a_feature_without_a_list_is_absent_and_an_empty_list_is_present() -> None:
    schema = infer_schema(
        [
            example(("a", b""), ("b", int64_list())),  # a: Feature {}, b: int64_list {}
            example(("a", bytes_list(b"x")), ("b", int64_list(1, 2))),
        ]
    )
    assert schema.feature("a") == Feature("a", "bytes", 1, 1, 1)
    assert schema.feature("b") == Feature("b", "int64", 0, 2, 2)
    assert infer_schema([example(("a", b""))]).features == ()


def test_a_repeated_key_keeps_the_last_entry() -> None:
    record = example(("a", int64_list(1)), ("a", int64_list(1, 2)))
    assert infer_schema([record]).feature("a") == Feature("a", "int64", 2, 2, 1)


def test_empty_records_and_empty_shards() -> None:
    assert infer_schema([]) == Schema()
    assert infer_schema([b"", b""]) == Schema(record_type="example", record_count=2)


@pytest.mark.parametrize(
    "record",
    [
        b"plain text line",
        b'{"json": true}',
        b"\xff\xd8\xff\xe0 jpeg",
        example(("a", int64_list(1)))[:-1],  # truncated
        example((b"\xff\xfe", int64_list(1))),  # key is not UTF-8
        ld(3, b""),  # unknown field
        example(("a", ld(4, b""))),  # unknown Feature kind
        example(("a", ld(2, ld(1, b"abc")))),  # packed floats not a multiple of 4 bytes
        example(("a", ld(3, ld(1, b"\x80")))),  # varint cut short
    ],
)
def test_records_that_are_not_examples_make_the_shard_opaque(record: bytes) -> None:
    good = example(("a", int64_list(1)))
    schema = infer_schema([good, record, good])
    assert schema == Schema(record_type="opaque", record_count=3)


def test_two_kinds_for_one_feature_conflict() -> None:
    inferencer = SchemaInferencer()
    inferencer.add(example(("a", int64_list(1))))
    inferencer.add(example(("a", float_list(1.0))))
    with pytest.raises(SchemaConflict) as err:
        inferencer.result()
    assert err.value.extra == {"feature": "a", "kinds": ["float", "int64"]}


def test_layouts_of_equal_length_are_told_apart() -> None:
    # Same length, same bytes outside the values, different varint boundaries: the counts differ.
    one_value = example(("i", int64_list(300)), ("b", bytes_list(b"xyz")))  # 300: two bytes
    two_values = example(("i", int64_list(5, 6)), ("b", bytes_list(b"xyz")))
    # Same length, value lengths traded between features.
    longer = example(("i", int64_list(1)), ("b", bytes_list(b"abcd")))
    shifted = example(("i", int64_list(1, 2)), ("b", bytes_list(b"abc")))
    assert len({len(one_value), len(two_values)}) == 1
    assert len({len(longer), len(shifted)}) == 1
    records = [one_value, two_values, longer, shifted] * 50
    random.Random(3).shuffle(records)
    inferencer = SchemaInferencer()
    for start in range(0, len(records), 7):
        inferencer.add_many(records[start : start + 7])
    assert stats(inferencer.result()) == stats(_reference(records))
    assert inferencer.result().feature("i") == Feature("i", "int64", 1, 2, 200)


@pytest.mark.parametrize("order", ["one_value_first", "two_values_first"])
def test_a_learnt_layout_does_not_swallow_another_of_the_same_length(order: str) -> None:
    # Only the varint boundaries differ: [300] is two bytes, [5, 6] two one-byte values.
    one_value = example(("i", int64_list(300)), ("b", bytes_list(b"xyz")))
    two_values = example(("i", int64_list(5, 6)), ("b", bytes_list(b"xyz")))
    # Only the bytes outside values differ: value lengths traded between the features.
    longer = example(("i", int64_list(1)), ("b", bytes_list(b"abcd")))
    shifted = example(("i", int64_list(1, 2)), ("b", bytes_list(b"abc")))
    for first, then in ((one_value, two_values), (longer, shifted)):
        if order == "two_values_first":
            first, then = then, first
        inferencer = SchemaInferencer()
        inferencer.add_many([first] * 10)  # learnt here, recognised in the next batch
        inferencer.add_many([first, then, first])
        assert inferencer.result().feature("i") == Feature("i", "int64", 1, 2, 13)


def _reference(records: list[bytes]) -> Schema:
    """Per-record inference merged: no batching, no layout reuse."""
    schemas = []
    for record in records:
        inferencer = SchemaInferencer()
        inferencer.add(record)
        schemas.append(inferencer.result())
    from recordkeeper.core.schema import merge_schemas

    return merge_schemas(schemas)


@pytest.mark.parametrize("limits", ["default", "tiny"])
def test_batching_does_not_change_the_result(limits: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if limits == "tiny":  # forget layouts and fold counts all the time
        monkeypatch.setattr(schema_inference, "_MAX_LAYOUT_BYTES", 200)
        monkeypatch.setattr(schema_inference, "_MAX_LAYOUTS_PER_LENGTH", 2)
        monkeypatch.setattr(schema_inference, "_MAX_SIGNATURES", 3)
    rng = random.Random(7)
    records = []
    for _ in range(3000):
        entries: list[tuple[str | bytes, bytes]] = []
        if rng.random() < 0.9:
            entries.append(("img", bytes_list(rng.randbytes(rng.choice([5, 6, 130, 200])))))
        entries.append(
            (
                "ints",
                int64_list(
                    *[rng.choice([0, 1, 127, 128, 2**35, -1]) for _ in range(rng.randint(0, 3))],
                    packed=rng.random() < 0.8,
                ),
            )
        )
        if rng.random() < 0.5:
            entries.append(("floats", float_list(*[1.5] * rng.randint(1, 3))))
        rng.shuffle(entries)
        records.append(example(*entries))
    whole = infer_schema(records)
    inferencer = SchemaInferencer()
    start = 0
    while start < len(records):
        size = rng.randint(1, 500)
        inferencer.add_many(records[start : start + size])
        start += size
    assert inferencer.result() == whole == _reference(records)
    assert inferencer.record_count == len(records)


def test_inferencers_on_threads_share_layouts_safely() -> None:
    rng = random.Random(5)
    records = [
        example(
            ("b", bytes_list(b"x" * rng.randint(0, 40))),
            ("i", int64_list(*[1] * rng.randint(0, 4))),
        )
        for _ in range(4000)
    ]
    expected = _reference(records)
    results: list[Schema] = []

    def infer() -> None:
        inferencer = SchemaInferencer()
        for start in range(0, len(records), 100):
            inferencer.add_many(records[start : start + 100])
        results.append(inferencer.result())

    threads = [threading.Thread(target=infer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 4


# --------------------------------------------------------------------------- SequenceExamples


def test_sequence_examples() -> None:
    records = [
        sequence_example(
            [("length", int64_list(3))],
            [
                ("tokens", [int64_list(1), int64_list(2, 3), int64_list(4)]),
                ("frames", [bytes_list(b"a"), bytes_list(b"b")]),
            ],
        ),
        sequence_example([("length", int64_list(1))], [("tokens", [int64_list(5)])]),
        sequence_example([], [("tokens", [])]),  # an empty feature list: present, 0 steps
    ]
    schema = infer_schema(records)
    assert schema.record_type == "sequence_example"
    assert stats(schema) == {
        ("context", "length"): ("int64", 1, 1, 2, None, None),
        ("feature_lists", "frames"): ("bytes", 1, 1, 1, 2, 2),
        ("feature_lists", "tokens"): ("int64", 1, 2, 3, 0, 3),
    }


def test_one_sequence_example_makes_the_shard_sequential() -> None:
    records = [example(("a", int64_list(1))), sequence_example([("a", int64_list(2))], [])]
    schema = infer_schema(records)
    assert schema.record_type == "sequence_example"
    assert schema.feature("a").scope == "context" and schema.feature("a").present_count == 2


def test_a_feature_list_with_steps_of_two_kinds_conflicts() -> None:
    record = sequence_example([], [("x", [int64_list(1), float_list(1.0)])])
    with pytest.raises(SchemaConflict):
        infer_schema([record])


def test_a_feature_list_never_given_a_kind_is_left_out() -> None:
    assert infer_schema([sequence_example([], [("x", [])])]).features == ()


# --------------------------------------------------------------------------- against TensorFlow


def _expected_from_protos(tf: ModuleType, records: list[bytes]) -> dict[tuple[str, str], tuple]:
    """Statistics computed from TensorFlow's own parse of the records."""
    found: dict[tuple[str, str], list[Any]] = {}
    for record in records:
        parsed = tf.train.Example.FromString(record)
        for name, feature in parsed.features.feature.items():
            kind = feature.WhichOneof("kind")
            if kind is None:
                continue
            n = len(getattr(feature, kind).value)
            entry = found.setdefault(("features", name), [kind.split("_")[0], n, n, 0, None, None])
            entry[1], entry[2], entry[3] = min(entry[1], n), max(entry[2], n), entry[3] + 1
    return {key: tuple(value) for key, value in found.items()}


@pytest.mark.tf
def test_examples_built_with_tensorflow(tensorflow: ModuleType) -> None:
    tf = tensorflow
    rng = random.Random(11)
    records = []
    for i in range(4000):
        feature = {}
        if rng.random() < 0.8:
            feature["image/encoded"] = tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[rng.randbytes(rng.randint(50, 300))])
            )
        feature["objects/label"] = tf.train.Feature(
            int64_list=tf.train.Int64List(
                value=[rng.randint(-(2**40), 2**40) for _ in range(rng.randint(0, 5))]
            )
        )
        feature["objects/bbox"] = tf.train.Feature(
            float_list=tf.train.FloatList(
                value=[rng.random() for _ in range(4 * rng.randint(0, 3))]
            )
        )
        if i % 7 == 0:
            feature["caption"] = tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[b"a cat", b"on a mat"][: rng.randint(0, 2)])
            )
        records.append(
            tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
        )
    records += records[:1000]  # repeats: layouts already seen
    assert stats(infer_schema(records)) == _expected_from_protos(tf, records)


@pytest.mark.tf
def test_hand_encodings_mean_to_tensorflow_what_they_mean_to_us(tensorflow: ModuleType) -> None:
    records = [
        example(
            ("f", float_list(1.0, 2.0, packed=False)), ("i", int64_list(7, 8, 9, packed=False))
        ),
        example(("i", ld(3, ld(1, varint(1) + varint(2)) + b"\x08" + varint(3)))),
        example(("a", int64_list(1)), ("a", int64_list(1, 2))),
        example(("empty", b"")),
    ]
    assert stats(infer_schema(records)) == _expected_from_protos(tensorflow, records)


@pytest.mark.tf
def test_sequence_examples_built_with_tensorflow(tensorflow: ModuleType) -> None:
    tf = tensorflow
    seq = tf.train.SequenceExample()
    seq.context.feature["id"].bytes_list.value.append(b"clip-1")
    for n in (1, 3, 2):
        seq.feature_lists.feature_list["audio"].feature.add().float_list.value.extend([0.5] * n)
    seq.feature_lists.feature_list["empty"].SetInParent()
    schema = infer_schema([seq.SerializeToString()])
    assert stats(schema) == {
        ("context", "id"): ("bytes", 1, 1, 1, None, None),
        ("feature_lists", "audio"): ("float", 1, 3, 1, 3, 3),
    }

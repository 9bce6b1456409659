"""The sample records document (recordkeeper.core.record_sample): built within its bound from
the records that streamed by, decoded as ``recordkeeper head`` shows them, validated strictly."""

from __future__ import annotations

import copy
import struct
from typing import Any

import pytest

from recordkeeper.core.errors import InvalidSample
from recordkeeper.core.record_sample import (
    MAX_SAMPLE_BYTES,
    MAX_SAMPLE_RECORDS,
    build_sample,
    record_row,
    sample_size,
    validate_sample,
)


def _field(number: int, payload: bytes) -> bytes:
    out, n = bytearray([number << 3 | 2]), len(payload)
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + payload


def example(**features: Any) -> bytes:
    """An Example of int64 (ints), float (floats) and bytes features, framed by hand."""
    body = b""
    for name, values in features.items():
        if isinstance(values[0], bytes):
            feature = _field(1, b"".join(_field(1, v) for v in values))
        elif isinstance(values[0], float):
            feature = _field(2, _field(1, struct.pack(f"<{len(values)}f", *values)))
        else:
            packed = b"".join(bytes([v]) for v in values)  # small non-negative ints
            feature = _field(3, _field(1, packed))
        body += _field(1, _field(1, name.encode()) + _field(2, feature))
    return _field(1, body)


def test_the_first_records_of_each_split_decoded() -> None:
    records = {
        "train": [example(label=[i], text=[b"a cat %d" % i]) for i in range(10)],
        "test": [b"\x00\x01\x02 not an example"],
    }
    doc = build_sample(records)
    assert [s["split"] for s in doc["splits"]] == ["test", "train"]
    test, train = doc["splits"]
    assert [r["index"] for r in train["records"]] == [0, 1, 2]  # SAMPLE_RECORDS
    assert train["records"][1]["features"] == {"label": [1], "text": ["a cat 1"]}
    assert train["records"][1]["kind"] == "example"
    assert train["records"][1]["size"] == len(records["train"][1])
    assert test["records"][0]["kind"] == "bytes"
    assert test["records"][0]["features"].startswith("<18 bytes: 000102")
    assert validate_sample(doc) == doc
    assert build_sample(records, per_split=99)["splits"][1]["records"][-1]["index"] == 9  # max 10


def test_floats_are_shown_as_the_float32_they_are() -> None:
    """A float feature is float32 on the wire: the sample and ``head`` showed its float64
    widening (0.8506242036819458 for 0.8506242, 0.10000000149011612 for 0.1), digits that
    are not in the data, across a whole table cell per value."""
    values = [0.1, 0.8506242036819458, 1e-8, 3.4028234663852886e38, -2.5, 16777217.0, 0.0]
    row = record_row(0, example(x=values))
    shown = row["features"]["x"]
    assert shown == [0.1, 0.8506242, 1e-08, 3.4028235e38, -2.5, 16777216.0, 0.0]
    # each is exactly the stored float32, in the fewest digits
    assert struct.pack("<7f", *shown) == struct.pack("<7f", *values)


def test_floats_that_json_cannot_hold_become_text() -> None:
    row = record_row(0, example(x=[float("nan"), float("inf"), -float("inf"), 0.5]))
    assert row["features"] == {"x": ["nan", "inf", "-inf", 0.5]}
    validate_sample({"splits": [{"split": "train", "records": [row]}]})


def test_large_records_are_shortened_then_dropped_to_fit() -> None:
    long_text = example(text=[b"x" * 20_000], more=[b"y" * 20_000])
    doc = build_sample({"train": [long_text] * 3})
    assert sample_size(doc) <= MAX_SAMPLE_BYTES
    assert len(doc["splits"][0]["records"]) == 3  # shortened, all kept
    text = doc["splits"][0]["records"][0]["features"]["text"][0]
    assert text.startswith("xxxx") and text.endswith("(20000 bytes)")
    many = {f"s{i}": [example(**{f"f{j}": [b"z" * 60] for j in range(150)})] for i in range(20)}
    doc = build_sample(many)
    assert sample_size(doc) <= MAX_SAMPLE_BYTES
    validate_sample(doc)
    wide = record_row(0, example(v=[1] * 80))
    assert wide["features"]["v"][-1] == "…" and len(wide["features"]["v"]) == 51
    assert len(record_row(0, example(v=[1] * 80), cap=False)["features"]["v"]) == 80


GOOD: dict[str, Any] = {
    "splits": [
        {
            "split": "train",
            "records": [
                {"index": 0, "size": 5, "kind": "example", "features": {"a": [1, 2.5, "t"]}},
                {"index": 1, "size": 2, "kind": "bytes", "features": "<2 bytes: 0a0b>"},
                {
                    "index": 2,
                    "size": 9,
                    "kind": "example",
                    "features": {"c": [1], "feature_lists": {"f": [[1], [2, 3]]}},
                },
            ],
        }
    ]
}


def _bad(change: Any) -> dict[str, Any]:
    doc = copy.deepcopy(GOOD)
    change(doc)
    return doc


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(extra=1),
        lambda d: d.update(splits={}),
        lambda d: d["splits"].append(copy.deepcopy(d["splits"][0])),  # a split twice
        lambda d: d["splits"][0].update(split="Not A Split"),
        lambda d: d["splits"][0].update(other=1),
        lambda d: d["splits"][0].update(records=[d["splits"][0]["records"][0]] * 11),
        lambda d: d["splits"][0]["records"][0].update(index=-1),
        lambda d: d["splits"][0]["records"][0].update(size=True),
        lambda d: d["splits"][0]["records"][0].update(kind="text"),
        lambda d: d["splits"][0]["records"][0].update(features=[1]),
        lambda d: d["splits"][0]["records"][0]["features"].update(a=[[1]]),
        lambda d: d["splits"][0]["records"][0]["features"].update(a=[None]),
        lambda d: d["splits"][0]["records"][0]["features"].update(a="text"),
        lambda d: d["splits"][0]["records"][0]["features"].update(a=[float("nan")]),
        lambda d: d["splits"][0]["records"][0]["features"].update(a=["\ud800"]),
        lambda d: d["splits"][0]["records"][1].update(features={"a": [1]}),
        lambda d: d["splits"][0]["records"][2]["features"].update(feature_lists={"f": [1]}),
        lambda d: d["splits"][0]["records"][0]["features"].update(a=["x" * MAX_SAMPLE_BYTES]),
    ],
)
def test_anything_else_is_refused(change: Any) -> None:
    assert validate_sample(GOOD) == GOOD
    with pytest.raises(InvalidSample) as raised:
        validate_sample(_bad(change))
    assert raised.value.code == "invalid_sample" and raised.value.status == 422


def test_bounds_are_what_the_module_says() -> None:
    assert MAX_SAMPLE_BYTES == 32 * 1024 and MAX_SAMPLE_RECORDS == 10
    with pytest.raises(InvalidSample):
        validate_sample("not an object")

"""The text and number rules of the core: ASCII digits, bounded numbers, Unicode text, typed
shard fields, shard URIs that name files."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from recordkeeper.core.errors import InvalidDate, InvalidReference, InvalidShard, InvalidVersionName
from recordkeeper.core.limits import (
    MAX_DECIMAL_DIGITS,
    MAX_INT64,
    MAX_REFERENCE_LENGTH,
    invalid_number_at,
    invalid_text_at,
    is_scalar_text,
    is_valid_text,
    parse_decimal,
)
from recordkeeper.core.naming import (
    MAX_VERSION_NUMBER,
    parse_date,
    parse_version_name,
    validate_dataset_name,
)
from recordkeeper.core.refs import RefKind, parse_reference
from recordkeeper.core.roots import AllowedRoots, UriError, check_object_uri
from recordkeeper.core.shards import validate_shard

ARABIC_20261130 = "\u0662\u0660\u0662\u0666\u0661\u0661\u0663\u0660"
FULLWIDTH_20231015 = "\uff12\uff10\uff12\uff13\uff11\uff10\uff11\uff15"


# -- numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("digits", "value"),
    [
        ("0", 0),
        ("17", 17),
        (str(MAX_INT64), MAX_INT64),
        (str(MAX_INT64 + 1), None),
        ("9" * MAX_DECIMAL_DIGITS, None),
        ("1" * (MAX_DECIMAL_DIGITS + 1), None),
        ("9" * 4301, None),  # never reaches int(): Python's int-string limit is 4300 digits
        ("\u0661", None),  # Arabic-Indic one
        ("\uff11", None),  # full-width one
        ("1_000", None),
        (" 1", None),
        ("+1", None),
        ("", None),
    ],
)
def test_parse_decimal(digits: str, value: int | None) -> None:
    assert parse_decimal(digits) == value


def test_parse_decimal_maximum() -> None:
    assert parse_decimal("10", maximum=10) == 10
    assert parse_decimal("11", maximum=10) is None


@pytest.mark.parametrize(
    "text",
    [
        "coco@v" + "9" * 4301,
        "coco@" + "9" * 4301,
        "coco_20231015_v" + "9" * 4301,
        "coco_20231015_v" + "9" * 100,
        f"coco@v{MAX_VERSION_NUMBER + 1}",
        f"coco_20231015_v{MAX_VERSION_NUMBER + 1}",
    ],
)
def test_huge_version_numbers_are_invalid_references(text: str) -> None:
    with pytest.raises(InvalidReference) as info:
        parse_reference(text)
    assert "4300" not in info.value.detail
    assert len(info.value.detail) < 400


def test_the_highest_version_number_parses() -> None:
    ref = parse_reference(f"coco@v{MAX_VERSION_NUMBER}")
    assert ref.kind is RefKind.NUMBER and ref.number == MAX_VERSION_NUMBER
    name = parse_version_name(f"coco_20231015_v{MAX_VERSION_NUMBER}")
    assert name.number == MAX_VERSION_NUMBER
    with pytest.raises(InvalidVersionName, match="above the highest"):
        parse_version_name(f"coco_20231015_v{MAX_VERSION_NUMBER + 1}")


def test_references_are_bounded_in_length() -> None:
    with pytest.raises(InvalidReference, match=f"at most {MAX_REFERENCE_LENGTH}"):
        parse_reference("coco@" + "a" * MAX_REFERENCE_LENGTH)


# -- ASCII digits ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        f"hbase_{ARABIC_20261130}_v\u0661",
        "hbase_20261130_v\u0661",
        f"hbase_{ARABIC_20261130}_v1",
        f"coco_{FULLWIDTH_20231015}_v1",
        "coco@\u0661",
        "coco@v\u0661",
        "coco@v\uff13",
    ],
)
def test_non_ascii_digits_are_not_digits(text: str) -> None:
    with pytest.raises(InvalidReference):
        parse_reference(text)


@pytest.mark.parametrize(
    "text",
    [FULLWIDTH_20231015, ARABIC_20261130, "\u0662\u0660\u0662\u0663-10-15", "2023-1\u0660-15"],
)
def test_dates_take_ascii_digits(text: str) -> None:
    with pytest.raises(InvalidDate):
        parse_date(text)


def test_ascii_dates_still_parse() -> None:
    assert parse_date("20231015") == parse_date("2023-10-15") == datetime.date(2023, 10, 15)


def test_dataset_names_with_non_ascii_version_patterns() -> None:
    # Not a version pattern (not ASCII digits), and not a valid name either (not ASCII).
    with pytest.raises(Exception, match="invalid"):
        validate_dataset_name(f"a_{ARABIC_20261130}_v1")


# -- text -----------------------------------------------------------------------------------


def test_scalar_text() -> None:
    assert is_scalar_text("plain") and is_scalar_text("caf\u00e9 \U0001f600")
    assert not is_scalar_text("\ud800") and not is_scalar_text("a\udfffb")


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"a": "ok", "b": [1, "x", {"c": "\ud800"}]}, "b[2].c"),
        ({"saved_models": [{"name": "n", "uri": "\udc00"}]}, "saved_models[0].uri"),
        ({"meta": {"\ud800": 1}}, "meta.<key>"),
        ({"\ud800": 1}, "<key>"),
        ("\ud800", "body"),
        (["ok", "\ud800"], "[1]"),
        ({"a": ["x", "a\x00b"]}, "a[1]"),
        ({"meta": {"k\x00": 1}}, "meta.<key>"),
        ("\x00", "body"),
    ],
)
def test_invalid_text_is_found_with_its_path(value: Any, where: str) -> None:
    assert invalid_text_at(value) == where


def test_valid_text_passes() -> None:
    assert invalid_text_at({"a": ["\U0001f600", 1, 2.5, None, True, {"b": "caf\u00e9"}]}) is None
    assert invalid_text_at(10**30) is None  # not text: types are checked elsewhere
    assert invalid_text_at({"a": "\\u0000"}) is None  # the six characters, not a NUL
    assert is_valid_text("caf\u00e9") and not is_valid_text("a\x00") and not is_valid_text("\ud800")


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"a": [1, {"b": float("nan")}]}, "a[1].b"),
        ({"m": {"x": float("inf")}}, "m.x"),
        ({"m": [float("-inf")]}, "m[0]"),
        ({"n": 2**63}, "n"),
        ({"n": [-(2**63) - 1]}, "n[0]"),
        ({"n": 10**30}, "n"),
        (float("nan"), "body"),
        (2**64, "body"),
    ],
)
def test_invalid_numbers_are_found_with_their_path(value: Any, where: str) -> None:
    assert invalid_number_at(value) == where


def test_valid_numbers_pass() -> None:
    value = {"a": [2**63 - 1, -(2**63), 1e308, -5e-324, 0.0, True, None, "NaN"], "b": {"c": 1.5}}
    assert invalid_number_at(value) is None
    assert invalid_number_at("text") is None


# -- shards ---------------------------------------------------------------------------------

ROOTS = AllowedRoots.of(["s3://data/root"])


def _raw(**over: Any) -> dict[str, Any]:
    raw = {
        "split": "train",
        "index": 0,
        "count": 1,
        "uri": "s3://data/root/coco/train-0.tfrecord",
        "compression": "none",
        "size": 1,
        "sha256": "a" * 64,
        "crc32c": "0" * 8,
        "records_sha256": "a" * 64,
        "record_count": 1,
    }
    raw.update(over)
    return raw


def test_a_valid_shard() -> None:
    assert validate_shard(_raw(), ROOTS).index == 0


@pytest.mark.parametrize("field", ["index", "count", "size", "record_count"])
@pytest.mark.parametrize("value", [0.0, 1.0, False, True, "0", "1", None])
def test_shard_integers_take_integers_only(field: str, value: object) -> None:
    with pytest.raises(InvalidShard, match=f"{field} must be an integer"):
        validate_shard(_raw(**{field: value}), ROOTS)


@pytest.mark.parametrize(
    "uri",
    [
        "s3://data/root",
        "s3://data/root/",
        "s3://data/root/coco/",
    ],
)
def test_shard_uris_name_files_strictly_inside(uri: str) -> None:
    with pytest.raises(InvalidShard, match="directory"):
        validate_shard(_raw(uri=uri), ROOTS)


def test_check_object_uri() -> None:
    prefix = "s3://data/root/coco/coco_20231015_v1/"
    assert check_object_uri(prefix + "a.tfrecord", [prefix]) == prefix + "a.tfrecord"
    for uri in (prefix, prefix.rstrip("/"), "s3://data/root"):
        with pytest.raises(UriError):
            check_object_uri(uri, [prefix, "s3://data/root"])

"""The rk1 naming convention: parse, format and validate."""

from __future__ import annotations

import datetime

import pytest

from recordkeeper.core.errors import (
    InvalidDate,
    InvalidDescription,
    InvalidName,
    InvalidVersionName,
)
from recordkeeper.core.naming import (
    StagedName,
    VersionName,
    format_staged_name,
    format_version_name,
    is_staged_name,
    parse_date,
    parse_staged_name,
    parse_version_name,
    slugify,
    validate_dataset_name,
    validate_desc,
)

D = datetime.date(2023, 10, 15)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("coco_20231015_v3", VersionName("coco", D, 3)),
        ("coco_20231015_v3_add_person", VersionName("coco", D, 3, "add_person")),
        (
            "coco_20231015_v2_add_person_categories",
            VersionName("coco", D, 2, "add_person_categories"),
        ),
        ("mr_brain_20231015_v12_t1", VersionName("mr_brain", D, 12, "t1")),
        ("open-images_20231015_v1", VersionName("open-images", D, 1)),
        ("a_b_c_20240229_v100", VersionName("a_b_c", datetime.date(2024, 2, 29), 100)),
    ],
)
def test_parse_valid_names(name: str, expected: VersionName) -> None:
    assert parse_version_name(name) == expected
    assert str(expected) == name


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("coco_20231301_v3", "month must be in 1..12"),
        ("coco_20230230_v3", "day is out of range"),
        ("coco_20231015_v0", "must be positive"),
        ("coco_20231015_v03", "no leading zeros"),
        ("coco_20231015_v3_Add_Person", "not a lowercase slug"),
        ("coco_20231015_v3_add__person", "not a lowercase slug"),
        ("coco_2023105_v3", "not a version name"),
        ("coco_20231015", "not a version name"),
        ("Coco_20231015_v3", "not a version name"),
        ("coco@v3", "not a version name"),
        ("", "not a version name"),
    ],
)
def test_parse_invalid_names(name: str, reason: str) -> None:
    with pytest.raises(InvalidVersionName, match=reason) as info:
        parse_version_name(name)
    assert info.value.code == "invalid_version_name"


def test_format_round_trips_and_validates() -> None:
    assert format_version_name("coco", D, 4, "add_person") == "coco_20231015_v4_add_person"
    assert format_version_name("coco", D, 4) == "coco_20231015_v4"
    with pytest.raises(InvalidVersionName):
        format_version_name("coco", D, 0)
    with pytest.raises(InvalidDescription):
        format_version_name("coco", D, 1, "Add Person")
    with pytest.raises(InvalidName):
        format_version_name("Coco", D, 1)
    # four digits of year whatever the year: the name parses back
    early = datetime.date(1, 1, 1)
    assert format_version_name("coco", early, 2) == "coco_00010101_v2"
    assert parse_version_name("coco_00010101_v2").date == early
    assert parse_staged_name(format_staged_name("coco", early, 3)).date == early


@pytest.mark.parametrize("name", ["coco", "mr_brain", "open-images", "c3", "a"])
def test_valid_dataset_names(name: str) -> None:
    assert validate_dataset_name(name) == name


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("Coco", "lowercase"),
        ("3coco", "starting with a letter"),
        ("_coco", "starting with a letter"),
        ("co co", "lowercase"),
        ("coco_20231015_v3_x", "version pattern"),
        ("x" * 65, "at most 64"),
        ("", "non-empty"),
    ],
)
def test_invalid_dataset_names(name: str, reason: str) -> None:
    with pytest.raises(InvalidName, match=reason):
        validate_dataset_name(name)


def test_desc_rules_and_slugify() -> None:
    assert validate_desc(None) is None
    assert validate_desc("add_person") == "add_person"
    with pytest.raises(InvalidDescription, match="did you mean 'add_person'"):
        validate_desc("Add person")
    with pytest.raises(InvalidDescription, match="at most"):
        validate_desc("a" * 81)
    assert slugify("  Add person -- categories! ") == "add_person_categories"


def test_parse_date_is_strict() -> None:
    assert parse_date("20231015") == D
    assert parse_date("2023-10-15") == D
    for bad in ("20231301", "2023101", "2023-13-01", "yesterday", "20230229"):
        with pytest.raises(InvalidDate):
            parse_date(bad)


def test_names_sort_by_dataset_then_date_then_number() -> None:
    names = [parse_version_name(n) for n in ("coco_20231015_v10", "coco_20231015_v9")]
    assert [n.number for n in sorted(names)] == [9, 10]


def test_errors_about_huge_input_stay_short() -> None:
    with pytest.raises(InvalidName) as info:
        validate_dataset_name("X" * 100_000)
    assert len(info.value.detail) < 200
    with pytest.raises(InvalidVersionName) as again:
        parse_version_name("coco_20231015_v1_" + "Y" * 100_000)
    assert len(again.value.detail) < 300


def test_staged_names() -> None:
    """A version's name until it is committed (numbers are given at commit)."""
    name = format_staged_name("mr_brain", D, 4, "add_person")
    assert name == "mr_brain_20231015_staged4_add_person"
    assert parse_staged_name(name) == StagedName("mr_brain", D, 4, "add_person")
    assert str(parse_staged_name("coco_20231015_staged12")) == "coco_20231015_staged12"
    assert is_staged_name(name) and not is_staged_name("coco_20231015_v4")
    for bad in ("coco_20231015_staged0", "coco_20231015_staged01", "coco_20231301_staged1"):
        with pytest.raises(InvalidVersionName):
            parse_staged_name(bad)
    with pytest.raises(InvalidVersionName):
        parse_version_name(name)  # never mistaken for an rk1 name
    with pytest.raises(InvalidName, match="version pattern"):
        validate_dataset_name("coco_20231015_staged4")  # would make staged names ambiguous
    with pytest.raises(InvalidVersionName):
        format_staged_name("coco", D, 0)

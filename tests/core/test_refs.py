"""The reference grammar: every form, canonical spelling and precise errors."""

from __future__ import annotations

import pytest

from recordkeeper.core.errors import InvalidAlias, InvalidReference
from recordkeeper.core.refs import RefKind, parse_reference, validate_alias_name


@pytest.mark.parametrize(
    ("text", "kind", "canonical"),
    [
        ("coco_20231015_v3_add_person", RefKind.NAME, "coco_20231015_v3_add_person"),
        ("coco_20231015_v3", RefKind.NAME, "coco_20231015_v3"),
        ("coco@v3", RefKind.NUMBER, "coco@v3"),
        ("coco@3", RefKind.NUMBER, "coco@v3"),
        ("coco@latest", RefKind.ALIAS, "coco@latest"),
        ("coco@prod", RefKind.ALIAS, "coco@prod"),
        ("mr_brain@golden-set", RefKind.ALIAS, "mr_brain@golden-set"),
        ("coco@sha256:9f2c4e1a7b3d", RefKind.DIGEST, "coco@sha256:9f2c4e1a7b3d"),
        ("  coco@v3 ", RefKind.NUMBER, "coco@v3"),
        (
            "coco@records:sha256:5e0c41d2a9b7",
            RefKind.RECORDS,
            "coco@records:sha256:5e0c41d2a9b7",
        ),
        ("coco_20231015_staged4_add_person", RefKind.STAGED, "coco_20231015_staged4_add_person"),
        ("coco_20231015_staged4", RefKind.STAGED, "coco_20231015_staged4"),
    ],
)
def test_every_form_parses(text: str, kind: RefKind, canonical: str) -> None:
    ref = parse_reference(text)
    assert ref.kind is kind
    assert str(ref) == canonical
    assert ref.dataset == canonical.split("@")[0].split("_2023")[0]


def test_fields() -> None:
    assert parse_reference("coco@v3").number == 3
    assert parse_reference("coco_20231015_v3_x").number == 3
    assert parse_reference("coco@prod").alias == "prod"
    assert parse_reference("coco@sha256:" + "a" * 64).digest_prefix == "a" * 64
    assert parse_reference("coco@prod").is_pinned is False
    assert parse_reference("coco@v3").is_pinned is True
    records = parse_reference("coco@records:sha256:" + "b" * 64)
    assert records.records_prefix == "b" * 64 and records.digest_prefix is None
    # the same records may be resharded into a later version: not pinned content
    assert records.is_pinned is False


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "non-empty"),
        ("coco", "neither a version name"),
        ("coco_20231301_v3", "not a calendar date"),
        ("coco@", "nothing after '@'"),
        ("@v3", "non-empty"),
        ("Coco@v3", "lowercase"),
        ("coco@v0", "start at 1"),
        ("coco@v01", "no leading zeros .write coco@v1."),
        ("coco@007", "no leading zeros"),
        ("coco@sha256:9f2c", "12 to 64 hex digits, got 4"),
        ("coco@sha256:" + "a" * 65, "12 to 64 hex digits, got 65"),
        ("coco@sha256:9F2C4E1A7B3D", "lowercase hex"),
        ("coco@sha256:xyzxyzxyzxyz", "lowercase hex"),
        ("coco@records:sha256:9f2c", "12 to 64 hex digits, got 4"),
        ("coco@records:sha256:9F2C4E1A7B3D", "lowercase hex"),
        ("coco@records:9f2c4e1a7b3d", "records:sha256:<hex>"),
        ("coco@records:", "records:sha256:<hex>"),
        ("coco@Prod", "alias 'Prod' is invalid"),
        ("coco@p/rod", "alias"),
        ("coco@v3@v4", "alias"),
    ],
)
def test_bad_references_say_why(text: str, reason: str) -> None:
    with pytest.raises(InvalidReference, match=reason) as info:
        parse_reference(text)
    assert info.value.code == "invalid_reference"


def test_alias_names() -> None:
    assert validate_alias_name("prod") == "prod"
    for bad in ("v3", "12", "sha256", "Prod", "", "a" * 65):
        with pytest.raises(InvalidAlias):
            validate_alias_name(bad)

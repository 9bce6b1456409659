"""The schema model: canonical digest, round trip and merge."""

from __future__ import annotations

import pytest

from recordkeeper.core.errors import InvalidRequest, SchemaConflict
from recordkeeper.core.schema import Feature, Schema, merge_schemas


def schema(records: int, *features: Feature, record_type: str = "example") -> Schema:
    return Schema(record_type=record_type, record_count=records, features=features)  # type: ignore[arg-type]


def test_merge_adds_counts_and_widens_ranges() -> None:
    a = schema(10, Feature("image", "bytes", 1, 1, 10), Feature("label", "int64", 1, 3, 8))
    b = schema(5, Feature("label", "int64", 2, 5, 5), Feature("bbox", "float", 4, 4, 5))
    merged = merge_schemas([a, b])
    assert merged.record_count == 15
    assert [f.name for f in merged.features] == ["bbox", "image", "label"]
    label = merged.feature("label")
    assert (label.min_count, label.max_count, label.present_count) == (1, 5, 13)
    assert merged.presence(merged.feature("image")) == pytest.approx(10 / 15)


def test_kind_disagreement_is_a_schema_conflict() -> None:
    a = schema(1, Feature("label", "int64", 1, 1, 1))
    b = schema(1, Feature("label", "float", 1, 1, 1))
    with pytest.raises(SchemaConflict, match="'label' is int64 in one shard and float") as info:
        merge_schemas([a, b])
    assert info.value.code == "schema_conflict"
    assert info.value.extra["kinds"] == ["float", "int64"]


def test_record_types_must_agree_but_empty_merges_with_anything() -> None:
    ex = schema(1, Feature("x", "int64", 1, 1, 1))
    assert merge_schemas([Schema(), ex]) == ex
    with pytest.raises(SchemaConflict, match="different record types"):
        merge_schemas([ex, schema(1, record_type="opaque")])


def test_sequence_features_merge_steps() -> None:
    a = schema(
        2,
        Feature("frames", "bytes", 1, 1, 2, scope="feature_lists", min_steps=3, max_steps=9),
        record_type="sequence_example",
    )
    b = schema(
        1,
        Feature("frames", "bytes", 1, 2, 1, scope="feature_lists", min_steps=1, max_steps=4),
        record_type="sequence_example",
    )
    frames = merge_schemas([a, b]).feature("frames", "feature_lists")
    assert (frames.min_steps, frames.max_steps, frames.max_count) == (1, 9, 2)


def test_digest_is_canonical_and_round_trips() -> None:
    a = schema(3, Feature("b", "float", 1, 1, 3), Feature("a", "int64", 1, 1, 3))
    again = Schema.from_dict(a.to_dict())
    assert (
        again.digest()
        == Schema.from_dict(
            {**a.to_dict(), "features": list(reversed(a.to_dict()["features"]))}
        ).digest()
    )
    assert a.digest().startswith("sha256:")
    assert schema(4, Feature("a", "int64", 1, 1, 3)).digest() != a.digest()


@pytest.mark.parametrize(
    "bad",
    [
        {"record_type": "table"},
        {"features": "nope"},
        {"record_count": "many"},
        {
            "features": [
                {"name": "x", "kind": "string", "min_count": 1, "max_count": 1, "present_count": 1}
            ]
        },
        {"features": [{"name": "x", "kind": "int64"}]},
        {
            "features": [
                {"name": "x", "kind": "int64", "min_count": 3, "max_count": 1, "present_count": 1}
            ]
        },
    ],
)
def test_malformed_schemas_are_invalid_requests(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidRequest):
        Schema.from_dict(bad)


def test_non_object_feature_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequest, match="must be a JSON object"):
        Schema.from_dict({"features": [5]})


GOOD_FEATURE = {
    "name": "label",
    "kind": "int64",
    "min_count": 1,
    "max_count": 1,
    "present_count": 3,
}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("min_count", "1"),
        ("min_count", True),
        ("max_count", 1.9),
        ("present_count", 3.0),
        ("min_steps", "2"),
        ("name", {"an": "object"}),
        ("name", ""),
        ("name", 7),
    ],
)
def test_feature_fields_have_strict_json_types(field: str, value: object) -> None:
    """A string, a boolean or a fraction is not a count, an object or "" not a name (they used
    to be stored as 1, 1, 1 and the object's repr)."""
    with pytest.raises(
        InvalidRequest, match=field.replace("_", ".") if field != "name" else "name"
    ):
        Feature.from_dict({**GOOD_FEATURE, field: value})
    with pytest.raises(InvalidRequest):
        Schema.from_dict(
            {
                "record_type": "example",
                "record_count": 3,
                "features": [{**GOOD_FEATURE, field: value}],
            }
        )


def test_schema_record_count_is_a_strict_integer() -> None:
    for bad in ("3", True, 3.5):
        with pytest.raises(InvalidRequest, match="record_count"):
            Schema.from_dict({"record_type": "example", "record_count": bad, "features": []})
    assert Feature.from_dict(GOOD_FEATURE).min_count == 1

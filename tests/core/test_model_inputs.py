"""Will this model accept this data: the pure comparison rules (recordkeeper.core.model_inputs)."""

from __future__ import annotations

import pytest

from recordkeeper.core.errors import InvalidCheckpoint
from recordkeeper.core.model_inputs import (
    ModelInput,
    check_inputs,
    feature_kind_of_dtype,
    has_errors,
    validate_model_inputs,
)
from recordkeeper.core.schema import Feature, Schema


def schema(*features: Feature, records: int = 10) -> Schema:
    return Schema("example", records, tuple(features))


def feature(name: str, kind: str = "int64", lo: int = 1, hi: int = 1, present: int = 10) -> Feature:
    return Feature(name, kind, lo, hi, present)  # type: ignore[arg-type]


def problems(inputs: list[ModelInput], data: Schema | None) -> set[tuple[str | None, str, str]]:
    return {(p.feature, p.problem, p.severity) for p in check_inputs(inputs, data)}


def test_dtypes_map_to_example_kinds() -> None:
    assert feature_kind_of_dtype("string") == "bytes"
    assert feature_kind_of_dtype("float32") == "float"
    assert feature_kind_of_dtype("int32") == feature_kind_of_dtype("int64") == "int64"
    assert feature_kind_of_dtype("complex64") is None


def test_matching_data_has_no_problems() -> None:
    inputs = [
        ModelInput("label", "dense", "int64", ()),
        ModelInput("x", "dense", "float32", (3,)),
        ModelInput("tags", "sparse", "string"),
    ]
    data = schema(feature("label"), feature("x", "float", 3, 3), feature("tags", "bytes", 0, 4, 6))
    assert check_inputs(inputs, data) == []


def test_missing_dtype_shape_and_presence_problems() -> None:
    inputs = [
        ModelInput("x", "dense", "float32", (3,)),  # absent, required
        ModelInput("opt", "dense", "int64", (), has_default=True),  # absent, defaulted
        ModelInput("tags", "ragged", "string"),  # absent, optional
        ModelInput("label", "dense", "int64", ()),  # float in the data
        ModelInput("box", "dense", "float32", (4,)),  # 1..8 values per record
        ModelInput("w", "dense", "float32", ()),  # only in 7 of 10 records
        ModelInput("free", "dense", "float32", (None,)),  # unknown size: no shape check
        ModelInput("img", "tensor", "string", ()),  # a Keras tensor input, by name
    ]
    data = schema(
        feature("label", "float"),
        feature("box", "float", 1, 8),
        feature("w", "float", present=7),
        feature("free", "float", 0, 9),
        feature("img", "bytes"),
    )
    assert problems(inputs, data) == {
        ("x", "missing_feature", "error"),
        ("opt", "missing_feature", "warning"),
        ("tags", "missing_feature", "warning"),
        ("label", "dtype_mismatch", "error"),
        ("box", "shape_mismatch", "error"),
        ("w", "not_always_present", "error"),
    }
    assert has_errors(check_inputs(inputs, data))
    assert not has_errors(check_inputs(inputs[1:3], data))  # warnings only


def test_tensor_inputs_are_compared_only_by_name_and_never_as_errors() -> None:
    """A Keras/tf.function signature takes tensors, not records: an input named after no
    feature cannot be checked (``not_compared``, info: no warning at every save), and one named
    after a feature gives its problems as warnings (the input pipeline may reshape or cast)."""
    inputs = [
        ModelInput("input_1", "tensor", "float32", (28, 28)),  # fed by the pipeline
        ModelInput("label", "tensor", "float32", (3,)),  # named after an int64 feature
        ModelInput("ok", "tensor", "int64", ()),
    ]
    data = schema(feature("label"), feature("ok"))
    found = check_inputs(inputs, data)
    assert {(p.feature, p.problem, p.severity) for p in found} == {
        ("input_1", "not_compared", "info"),
        ("label", "dtype_mismatch", "warning"),
        ("label", "shape_mismatch", "warning"),
    }
    assert not has_errors(found)
    assert "input pipeline" in next(p.detail for p in found if p.problem == "not_compared")
    # a parsed input of the same name is still an error
    parsed = [ModelInput("label", "dense", "float32", (3,))]
    assert has_errors(check_inputs(parsed, data))


def test_data_without_a_schema() -> None:
    inputs = [ModelInput("x", "dense", "float32", (3,))]
    assert problems(inputs, None) == {(None, "no_schema", "warning")}
    assert problems(inputs, Schema("opaque", 5)) == {(None, "no_schema", "warning")}


def test_inputs_round_trip_and_validation() -> None:
    item = ModelInput("x", "dense", "float32", (3, None), True, "serving_default")
    assert ModelInput.from_json(item.to_json()) == item
    assert validate_model_inputs([item.to_json()], "inputs") == [item]
    bad_inputs = [
        {"name": "", "kind": "dense", "dtype": "float32"},
        {"name": "x", "kind": "dense_tensor", "dtype": "float32"},
        {"name": "x", "kind": "dense", "dtype": "float 32"},
        {"name": "x", "kind": "dense", "dtype": "float32", "shape": [-2]},
        {"name": "x", "kind": "dense", "dtype": "float32", "shape": [True]},
        {"name": "x", "kind": "dense", "dtype": "float32", "has_default": "yes"},
        "x",
    ]
    for bad in bad_inputs:
        with pytest.raises(InvalidCheckpoint):
            validate_model_inputs([bad], "inputs")
    with pytest.raises(InvalidCheckpoint):
        validate_model_inputs({"x": 1}, "inputs")

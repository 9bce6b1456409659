"""Will this model accept this data?  What a SavedModel's serving signatures parse, compared with
a version's feature schema.

A SavedModel export records its **inputs** (:class:`ModelInput`), read by
:func:`recordkeeper.tf.model_inputs` from the ``ParseExample``/``ParseExampleV2`` ops of its
graph (each dense, sparse or ragged key with its dtype and, for dense keys, its shape and
whether it has a default) or, when it parses nothing itself, from its signatures' tensor inputs
(a Keras model's input specs).  :func:`check_inputs` compares them with a
:class:`~recordkeeper.core.schema.Schema` and lists every problem:

==================  ========  ==============================================================
problem             severity  meaning
==================  ========  ==============================================================
missing_feature     error     a required input (dense without default) is not in the data
missing_feature     warning   an optional input (sparse, ragged, dense with a default) is
                              not in the data: the model sees it empty or defaulted
dtype_mismatch      error     the data's kind (bytes/float/int64) is not what the input
                              parses (string/float32/int64)
shape_mismatch      error     a dense input of fixed shape needs N values per record; the
                              data carries between ``min_count`` and ``max_count``
not_always_present  error     a required input is missing from some records
no_schema           warning   the version has no feature schema (not tf.train.Example data)
not_compared        info      a tensor input no feature of the data is named after: the
                              export parses no records, so what feeds it is decided outside
                              the export and cannot be checked here
==================  ========  ==============================================================

A **tensor input** (a signature that takes tensors, e.g. a Keras model's) is not a parse of the
records: recordkeeper compares it only when a feature has its name (the usual case of a model
fed a dict of parsed features), and then every problem it finds is a ``warning``, since the
input pipeline between the records and the tensor may reshape or cast; an input named after no
feature gets ``not_compared`` (``info``), never an error.

Pure (standard library only): the service runs the comparison on recorded inputs and stored
schemas; TensorFlow is needed only to read a SavedModel.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from recordkeeper.core.errors import InvalidCheckpoint
from recordkeeper.core.limits import is_valid_text
from recordkeeper.core.schema import Feature, Schema

__all__ = [
    "INPUT_KINDS",
    "MAX_MODEL_INPUTS",
    "PROBLEMS",
    "SEVERITIES",
    "InputProblem",
    "ModelInput",
    "check_inputs",
    "feature_kind_of_dtype",
    "has_errors",
    "validate_model_inputs",
]

InputKind = Literal["dense", "sparse", "ragged", "tensor"]
#: How an input reaches the model: a parsed dense/sparse/ragged feature, or a tensor input.
INPUT_KINDS: tuple[str, ...] = ("dense", "sparse", "ragged", "tensor")
PROBLEMS: tuple[str, ...] = (
    "missing_feature",
    "dtype_mismatch",
    "shape_mismatch",
    "not_always_present",
    "no_schema",
    "not_compared",
)
#: How much a problem matters: ``error`` (serving fails), ``warning`` (it may), ``info``.
SEVERITIES: tuple[str, ...] = ("error", "warning", "info")
#: Inputs one export may record (a guard on request size, far above real serving signatures).
MAX_MODEL_INPUTS = 4096
_MAX_INPUT_NAME = 1024
_MAX_RANK = 32

_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64", "half", "double")
_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")


def feature_kind_of_dtype(dtype: str) -> str | None:
    """The ``tf.train.Example`` kind a TensorFlow dtype name is parsed from (``string`` →
    ``bytes``, floats → ``float``, integers and bool → ``int64``), None when none is."""
    if dtype == "string":
        return "bytes"
    if dtype in _FLOAT_DTYPES:
        return "float"
    if dtype in _INT_DTYPES:
        return "int64"
    return None


@dataclass(frozen=True)
class ModelInput:
    """One input a SavedModel's serving signature expects.

    ``shape`` is the per-example shape (no batch dimension; ``None`` entries are unknown
    sizes; ``None`` altogether for sparse/ragged inputs).  ``has_default`` is True for a dense
    feature parsed with a default value (it may be absent from a record).  ``signature`` names
    the signature (or the function) it was read from.
    """

    name: str
    kind: str
    dtype: str
    shape: tuple[int | None, ...] | None = None
    has_default: bool = False
    signature: str | None = None

    @property
    def required(self) -> bool:
        """Whether every record must carry this feature for the model to accept it (a tensor
        input that is named after a feature is taken to be fed by it)."""
        return self.kind == "tensor" or (self.kind == "dense" and not self.has_default)

    @property
    def parsed(self) -> bool:
        """Whether the export parses this input from the records itself (not a tensor input,
        which the caller's input pipeline feeds)."""
        return self.kind != "tensor"

    def values_per_record(self) -> int | None:
        """For a dense or tensor input of fully known shape: values each record must carry."""
        if self.kind not in ("dense", "tensor") or self.shape is None:
            return None
        if any(d is None or d < 0 for d in self.shape):
            return None
        return math.prod(d for d in self.shape if d is not None)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "dtype": self.dtype,
            "shape": None if self.shape is None else list(self.shape),
            "has_default": self.has_default,
            "signature": self.signature,
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any], where: str = "input") -> ModelInput:
        """Read (and validate) the JSON form; raises :class:`InvalidCheckpoint`."""
        if not isinstance(body, Mapping):
            raise InvalidCheckpoint(f"{where} must be an object")
        name, kind, dtype = body.get("name"), body.get("kind"), body.get("dtype")
        if not isinstance(name, str) or not name or len(name) > _MAX_INPUT_NAME:
            raise InvalidCheckpoint(f"{where}.name must be a non-empty string")
        if not is_valid_text(name):
            raise InvalidCheckpoint(f"{where}.name must be Unicode text without NUL")
        if kind not in INPUT_KINDS:
            raise InvalidCheckpoint(f"{where}.kind must be one of {', '.join(INPUT_KINDS)}")
        if not isinstance(dtype, str) or not dtype.isidentifier() or len(dtype) > 32:
            raise InvalidCheckpoint(f"{where}.dtype must be a TensorFlow dtype name")
        raw_shape = body.get("shape")
        shape: tuple[int | None, ...] | None = None
        if raw_shape is not None:
            if not isinstance(raw_shape, list) or len(raw_shape) > _MAX_RANK:
                raise InvalidCheckpoint(f"{where}.shape must be a list of sizes")
            if not all(
                d is None or (isinstance(d, int) and not isinstance(d, bool) and d >= -1)
                for d in raw_shape
            ):
                raise InvalidCheckpoint(f"{where}.shape holds sizes (integers >= -1) or null")
            shape = tuple(None if d is None or d < 0 else d for d in raw_shape)
        has_default = body.get("has_default", False)
        signature = body.get("signature")
        if not isinstance(has_default, bool):
            raise InvalidCheckpoint(f"{where}.has_default must be true or false")
        if signature is not None and (
            not isinstance(signature, str) or len(signature) > _MAX_INPUT_NAME
        ):
            raise InvalidCheckpoint(f"{where}.signature must be a string")
        return cls(str(name), str(kind), dtype, shape, has_default, signature)


def validate_model_inputs(raw: object, where: str) -> list[ModelInput]:
    """A list of input objects (JSON) as :class:`ModelInput` values; raises
    :class:`InvalidCheckpoint`."""
    if not isinstance(raw, list):
        raise InvalidCheckpoint(f"{where} must be a list of inputs")
    if len(raw) > MAX_MODEL_INPUTS:
        raise InvalidCheckpoint(f"{where} lists more than {MAX_MODEL_INPUTS} inputs")
    return [ModelInput.from_json(item, f"{where}[{i}]") for i, item in enumerate(raw)]


@dataclass(frozen=True)
class InputProblem:
    """One reason the data does not fit an input (see the module's table)."""

    problem: str
    severity: str
    feature: str | None
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "problem": self.problem,
            "severity": self.severity,
            "feature": self.feature,
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> InputProblem:
        return cls(body["problem"], body["severity"], body.get("feature"), body["detail"])


def _features_by_name(schema: Schema) -> dict[str, Feature]:
    # tf.io.parse_example reads Example features; a SequenceExample's context is what
    # parse_sequence_example's context keys read.  Feature lists are not single features.
    return {f.name: f for f in schema.features if f.scope in ("features", "context")}


def _check_one(item: ModelInput, feature: Feature | None, schema: Schema) -> list[InputProblem]:
    if not item.parsed:
        return _check_tensor(item, feature, schema)
    if feature is None:
        if item.required:
            return [
                InputProblem(
                    "missing_feature",
                    "error",
                    item.name,
                    f"the model parses {item.kind} {item.dtype} feature {item.name!r} "
                    "(no default); the data has no such feature",
                )
            ]
        return [
            InputProblem(
                "missing_feature",
                "warning",
                item.name,
                f"the model parses {item.kind} feature {item.name!r}; the data has none "
                "(the model sees it empty or defaulted)",
            )
        ]
    problems = []
    expected_kind = feature_kind_of_dtype(item.dtype)
    if expected_kind != feature.kind:
        problems.append(
            InputProblem(
                "dtype_mismatch",
                "error",
                item.name,
                f"the model parses {item.name!r} as {item.dtype}; the data stores "
                f"{feature.kind} values",
            )
        )
    needed = item.values_per_record()
    if needed is not None and not (feature.min_count == feature.max_count == needed):
        problems.append(
            InputProblem(
                "shape_mismatch",
                "error",
                item.name,
                f"the model parses {item.name!r} with shape {list(item.shape or ())} "
                f"({needed} value(s) per record); the data's records carry "
                f"{feature.min_count}..{feature.max_count}",
            )
        )
    if item.required and feature.present_count < schema.record_count:
        problems.append(
            InputProblem(
                "not_always_present",
                "error",
                item.name,
                f"{item.name!r} has no default but only {feature.present_count} of "
                f"{schema.record_count} records carry it",
            )
        )
    return problems


def _check_tensor(item: ModelInput, feature: Feature | None, schema: Schema) -> list[InputProblem]:
    """A tensor input: compared only with a feature of its name, and never certain (the
    caller's input pipeline may reshape or cast between the records and the tensor)."""
    shape = "" if item.shape is None else f" {list(item.shape)}"
    if feature is None:
        return [
            InputProblem(
                "not_compared",
                "info",
                item.name,
                f"the export takes tensor input {item.name!r} ({item.dtype}{shape}) and parses "
                "no records itself; no feature of the data has that name, so what feeds it is "
                "decided by the input pipeline and cannot be checked here",
            )
        ]
    as_parsed = ModelInput(item.name, "dense", item.dtype, item.shape, False, item.signature)
    return [
        InputProblem(
            p.problem,
            "warning",
            p.feature,
            f"{p.detail} (a tensor input: fed by the input pipeline, which may reshape or cast "
            "it, so this is likely, not certain)",
        )
        for p in _check_one(as_parsed, feature, schema)
    ]


def check_inputs(inputs: Iterable[ModelInput], schema: Schema | None) -> list[InputProblem]:
    """Every problem feeding records with ``schema`` to a model with ``inputs`` would meet.

    ``schema=None`` (a version without a feature schema) gives one ``no_schema`` warning.
    """
    if schema is None or schema.record_type in ("opaque", "empty"):
        return [
            InputProblem(
                "no_schema",
                "warning",
                None,
                "the data has no tf.train.Example feature schema to compare with",
            )
        ]
    features = _features_by_name(schema)
    problems: list[InputProblem] = []
    seen: set[str] = set()
    for item in inputs:
        if item.name in seen:  # the same key parsed by several signatures: check it once
            continue
        seen.add(item.name)
        problems.extend(_check_one(item, features.get(item.name), schema))
    return problems


def has_errors(problems: Sequence[InputProblem]) -> bool:
    """Whether any problem would make serving fail (severity ``error``)."""
    return any(p.severity == "error" for p in problems)

"""Export a :class:`~recordkeeper.core.schema.Schema` for TensorFlow tools.

- :func:`feature_spec`: a feature spec for ``tf.io.parse_example`` (or, for SequenceExamples,
  the context and sequence specs for ``tf.io.parse_sequence_example``).
- :func:`to_tfmd_schema`: a tensorflow-metadata ``Schema`` proto, as TFDV writes them.

Each function imports its library when called: the base package never imports TensorFlow.

Feature spec rules.  A feature that every record carries with the same number of values ``n``
becomes a ``FixedLenFeature``: shape ``[]`` when ``n == 1`` (one scalar per record, so a
batch parses to shape ``[batch]``, what ``parse_example`` users expect), ``[n]`` otherwise.
Every other feature (missing from some records, or with varying counts) becomes a
``VarLenFeature`` (a ``SparseTensor``), or with ``ragged=True`` a ``RaggedFeature``.  No
default values are invented: a ``FixedLenFeature`` without a default fails on a record that
lacks the feature, and a made-up default would pass silently off as data.  Feature lists
follow the same rules per step, as ``FixedLenSequenceFeature`` (``allow_missing`` when some
records lack the list).
"""

from __future__ import annotations

from typing import Any

from recordkeeper.core.errors import InvalidInput
from recordkeeper.core.schema import Feature, Schema

__all__ = ["SEQUENCE_FEATURE", "feature_spec", "to_tfmd_schema"]

#: Name of the STRUCT feature holding the feature lists in a tensorflow-metadata schema (the
#: name TFDV and tfx_bsl give it).
SEQUENCE_FEATURE = "##SEQUENCE##"


def _check_exportable(schema: Schema) -> None:
    if schema.record_type == "opaque":
        raise InvalidInput(
            "these records are not tf.train.Example / SequenceExample protos: "
            "their schema has no features to export"
        )


def _fixed_count(feature: Feature) -> int | None:
    """The number of values every occurrence has (per step for feature lists), if fixed."""
    return feature.min_count if feature.min_count == feature.max_count >= 1 else None


def feature_spec(schema: Schema, *, ragged: bool = False) -> Any:
    """A feature spec for ``tf.io.parse_example`` (see the module docstring for the rules).

    For a ``sequence_example`` schema, returns ``(context_spec, sequence_spec)`` for
    ``tf.io.parse_sequence_example``.  An empty schema gives ``{}``; an opaque one raises
    :class:`~recordkeeper.errors.InvalidInput`.
    """
    _check_exportable(schema)
    import tensorflow as tf

    dtypes = {"bytes": tf.string, "float": tf.float32, "int64": tf.int64}

    def varying(feature: Feature) -> Any:
        dtype = dtypes[feature.kind]
        return tf.io.RaggedFeature(dtype) if ragged else tf.io.VarLenFeature(dtype)

    def spec(feature: Feature) -> Any:
        n = _fixed_count(feature)
        if n is None or feature.present_count < schema.record_count:
            return varying(feature)
        return tf.io.FixedLenFeature([] if n == 1 else [n], dtypes[feature.kind])

    def sequence_spec(feature: Feature) -> Any:
        n = _fixed_count(feature)
        if n is None:
            return varying(feature)
        return tf.io.FixedLenSequenceFeature(
            [] if n == 1 else [n],
            dtypes[feature.kind],
            allow_missing=feature.present_count < schema.record_count,
        )

    if schema.record_type != "sequence_example":
        return {f.name: spec(f) for f in schema.features}
    context = {f.name: spec(f) for f in schema.features if f.scope == "context"}
    sequence = {f.name: sequence_spec(f) for f in schema.features if f.scope == "feature_lists"}
    return context, sequence


def to_tfmd_schema(schema: Schema) -> Any:
    """A ``tensorflow_metadata.proto.v0.schema_pb2.Schema`` describing the same features.

    Conventions of TFDV's inferred schemas: type BYTES / FLOAT / INT; ``presence`` with the
    observed ``min_fraction`` and ``min_count: 1``; ``shape {dim {size: n}}`` for a feature
    every record carries with ``n`` values, else ``value_count {min max}``.  Feature lists go
    into a STRUCT feature named :data:`SEQUENCE_FEATURE`, each with ``value_counts``: steps
    per record, then values per step.
    """
    _check_exportable(schema)
    from tensorflow_metadata.proto.v0 import schema_pb2

    types = {"bytes": schema_pb2.BYTES, "float": schema_pb2.FLOAT, "int64": schema_pb2.INT}
    out = schema_pb2.Schema()

    def describe(proto: Any, feature: Feature) -> None:
        proto.name = feature.name
        proto.type = types[feature.kind]
        proto.presence.min_fraction = schema.presence(feature)
        proto.presence.min_count = 1

    sequence = None
    for feature in schema.features:
        if feature.scope == "feature_lists":
            if sequence is None:
                sequence = out.feature.add(name=SEQUENCE_FEATURE, type=schema_pb2.STRUCT)
                sequence.presence.min_count = 1
            proto = sequence.struct_domain.feature.add()
            describe(proto, feature)
            proto.value_counts.value_count.add(
                min=feature.min_steps or 0, max=feature.max_steps or 0
            )
            proto.value_counts.value_count.add(min=feature.min_count, max=feature.max_count)
            continue
        proto = out.feature.add()
        describe(proto, feature)
        n = _fixed_count(feature)
        if n is not None and feature.present_count == schema.record_count:
            proto.shape.dim.add(size=n)
        else:
            proto.value_count.min = feature.min_count
            proto.value_count.max = feature.max_count
    return out

"""The schema model: what features the records of a shard or version carry.

A :class:`Schema` is inferred per shard while bytes stream (see
:mod:`recordkeeper.schema_inference`), merged across shards at commit time by the service, and
content-addressed by :meth:`Schema.digest` so identical schemas are stored once.  Exporting it
for TensorFlow (feature specs, tensorflow-metadata) is :mod:`recordkeeper.schema_export`.

Statistics are kept in mergeable form: ``present_count`` (records that carry the feature) rather
than a fraction, so merging two shards is exact.  ``presence`` is derived.

``record_type`` is ``"example"`` (``tf.train.Example``), ``"sequence_example"``
(``tf.train.SequenceExample``: ``context`` features and ``feature_lists``), ``"opaque"`` (records
that are not Example protos) or ``"empty"`` (no records yet; merges with anything).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from recordkeeper.core.canonical import canonical_json
from recordkeeper.core.digests import format_digest
from recordkeeper.core.errors import InvalidRequest, InvalidShard, SchemaConflict
from recordkeeper.core.naming import quoted

__all__ = [
    "KINDS",
    "RECORD_TYPES",
    "SCOPES",
    "Feature",
    "Schema",
    "check_shard_schema",
    "merge_schemas",
]

FeatureKind = Literal["bytes", "float", "int64"]
Scope = Literal["features", "context", "feature_lists"]
RecordType = Literal["example", "sequence_example", "opaque", "empty"]
KINDS: tuple[str, ...] = ("bytes", "float", "int64")
SCOPES: tuple[str, ...] = ("features", "context", "feature_lists")
RECORD_TYPES: tuple[str, ...] = ("example", "sequence_example", "opaque", "empty")


@dataclass(frozen=True)
class Feature:
    """One feature's kind and value-count statistics.

    ``min_count``/``max_count`` are the fewest/most values per record among records that carry
    the feature (for ``feature_lists``: values per step).  ``min_steps``/``max_steps`` are only
    set for ``feature_lists`` and count the steps per record.
    """

    name: str
    kind: FeatureKind
    min_count: int
    max_count: int
    present_count: int
    scope: Scope = "features"
    min_steps: int | None = None
    max_steps: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.scope, self.name)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "scope": self.scope,
            "min_count": self.min_count,
            "max_count": self.max_count,
            "present_count": self.present_count,
        }
        if self.scope == "feature_lists":
            out["min_steps"] = self.min_steps
            out["max_steps"] = self.max_steps
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Feature:
        if not isinstance(data, Mapping):
            raise InvalidRequest(f"a schema feature must be a JSON object, got {quoted(data)}")
        try:
            kind = data["kind"]
            scope = data.get("scope", "features")
            if kind not in KINDS:
                raise InvalidRequest(f"feature kind must be one of {KINDS}, got {quoted(kind)}")
            if scope not in SCOPES:
                raise InvalidRequest(f"feature scope must be one of {SCOPES}, got {quoted(scope)}")
            feature = cls(
                name=_name(data["name"]),
                kind=kind,
                min_count=_int(data["min_count"], "min_count"),
                max_count=_int(data["max_count"], "max_count"),
                present_count=_int(data["present_count"], "present_count"),
                scope=scope,
                min_steps=_opt_int(data.get("min_steps"), "min_steps"),
                max_steps=_opt_int(data.get("max_steps"), "max_steps"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidRequest):
                raise
            raise InvalidRequest(f"malformed feature {quoted(dict(data))}: {exc}") from None
        if not 0 <= feature.min_count <= feature.max_count or feature.present_count < 0:
            raise InvalidRequest(f"feature {quoted(feature.name)} has inconsistent counts")
        return feature


def _int(value: object, what: str) -> int:
    """``value`` if it is a JSON integer: not a string, a boolean or a fraction (``"1"``,
    ``true`` and ``1.9`` used to be stored as 1)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"feature {what} must be an integer, got {quoted(value)}")
    return value


def _opt_int(value: object, what: str) -> int | None:
    return None if value is None else _int(value, what)


def _name(value: object) -> str:
    """A feature name: a non-empty string (an object used to be stored as its repr)."""
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"a feature name must be a non-empty string, got {quoted(value)}")
    return value


@dataclass(frozen=True)
class Schema:
    """Features of a set of records, with the number of records they were inferred from."""

    record_type: RecordType = "empty"
    record_count: int = 0
    features: tuple[Feature, ...] = field(default_factory=tuple)

    def feature(self, name: str, scope: Scope | None = None) -> Feature:
        """The feature called ``name`` (in ``scope`` if given); ``KeyError`` if absent."""
        for feat in self.features:
            if feat.name == name and (scope is None or feat.scope == scope):
                return feat
        raise KeyError(name)

    def presence(self, feat: Feature) -> float:
        """Fraction of records that carry ``feat`` (1.0 for an empty schema)."""
        return feat.present_count / self.record_count if self.record_count else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "record_type": self.record_type,
            "record_count": self.record_count,
            "features": [f.to_dict() for f in self.features],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schema:
        if not isinstance(data, Mapping):
            raise InvalidRequest("schema must be a JSON object")
        record_type = data.get("record_type", "empty")
        if record_type not in RECORD_TYPES:
            raise InvalidRequest(
                f"schema record_type must be one of {RECORD_TYPES}, got {quoted(record_type)}"
            )
        raw_features = data.get("features", [])
        if not isinstance(raw_features, list):
            raise InvalidRequest("schema features must be a list")
        record_count = data.get("record_count", 0)
        if isinstance(record_count, bool) or not isinstance(record_count, int):
            raise InvalidRequest(
                f"schema record_count must be an integer, got {quoted(record_count)}"
            )
        features = tuple(sorted((Feature.from_dict(f) for f in raw_features), key=_sort_key))
        keys = [f.key for f in features]
        if len(set(keys)) != len(keys):
            raise InvalidRequest("schema lists a feature twice")
        return cls(record_type=record_type, record_count=record_count, features=features)

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.to_dict())

    def digest(self) -> str:
        """``sha256:<hex>`` of the canonical JSON form; equal schemas share a digest."""
        return format_digest(hashlib.sha256(self.canonical_bytes()).hexdigest())

    def merge(self, other: Schema) -> Schema:
        """Combine two schemas (see :func:`merge_schemas`)."""
        return merge_schemas([self, other])


def check_shard_schema(schema: Schema, record_count: int) -> None:
    """A shard's schema describes that shard's records: it counts at most ``record_count``
    records (the shard's), and each feature is present in at most that many.

    Merging adds these counts up, so with this rule a version's merged schema never counts more
    than the version's records, which are bounded (:func:`recordkeeper.core.shards.check_totals`).

    Raises:
        InvalidShard: a count out of that range.
    """
    if not 0 <= schema.record_count <= record_count:
        raise InvalidShard(
            f"schema record_count {schema.record_count} must be between 0 and the shard's "
            f"record_count ({record_count})"
        )
    for feat in schema.features:
        if feat.present_count > schema.record_count:
            raise InvalidShard(
                f"schema feature {quoted(feat.name)} has present_count {feat.present_count}, "
                f"more than the schema's record_count ({schema.record_count})"
            )


def _sort_key(feat: Feature) -> tuple[int, str]:
    return (SCOPES.index(feat.scope), feat.name)


def _merge_feature(a: Feature, b: Feature) -> Feature:
    if a.kind != b.kind:
        raise SchemaConflict(
            f"feature {quoted(a.name)} is {a.kind} in one shard and {b.kind} in another",
            feature=a.name,
            kinds=sorted({a.kind, b.kind}),
        )
    steps: dict[str, int | None] = {}
    if a.scope == "feature_lists":
        steps = {
            "min_steps": _min_opt(a.min_steps, b.min_steps),
            "max_steps": _max_opt(a.max_steps, b.max_steps),
        }
    return replace(
        a,
        min_count=min(a.min_count, b.min_count),
        max_count=max(a.max_count, b.max_count),
        present_count=a.present_count + b.present_count,
        **steps,  # type: ignore[arg-type]
    )


def _min_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def merge_schemas(schemas: Iterable[Schema]) -> Schema:
    """Merge shard schemas into one: counts add up, value counts widen.

    A feature with different kinds in two shards, or shards of different record types (other
    than ``empty``), raise :class:`SchemaConflict`.
    """
    record_type: RecordType = "empty"
    record_count = 0
    merged: dict[tuple[str, str], Feature] = {}
    for schema in schemas:
        if schema.record_type != "empty":
            if record_type not in ("empty", schema.record_type):
                raise SchemaConflict(
                    f"shards hold different record types: {record_type} and {schema.record_type}",
                    record_types=sorted({record_type, schema.record_type}),
                )
            record_type = schema.record_type
        record_count += schema.record_count
        for feat in schema.features:
            seen = merged.get(feat.key)
            merged[feat.key] = feat if seen is None else _merge_feature(seen, feat)
    features = tuple(sorted(merged.values(), key=_sort_key))
    return Schema(record_type=record_type, record_count=record_count, features=features)

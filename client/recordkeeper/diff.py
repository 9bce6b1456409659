"""Differences between two versions: shards, record counts per split, schema.

Shards are matched by ``(split, index)``; a shard is *changed* when its ``records_sha256``
differs (re-compressing or moving a shard is not a change of content).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from recordkeeper.core.schema import Feature, Schema
from recordkeeper.models import DatasetVersion, Shard

__all__ = [
    "FeatureChange",
    "ShardChange",
    "SplitCounts",
    "VersionDiff",
    "diff_schemas",
    "diff_versions",
]


@dataclass(frozen=True)
class ShardChange:
    """A shard present in only one version, or with other records in each."""

    split: str
    index: int
    change: Literal["added", "removed", "changed"]
    old: Shard | None
    new: Shard | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "index": self.index,
            "change": self.change,
            "old": None
            if self.old is None
            else {
                "uri": self.old.uri,
                "records_sha256": self.old.records_sha256,
                "record_count": self.old.record_count,
            },
            "new": None
            if self.new is None
            else {
                "uri": self.new.uri,
                "records_sha256": self.new.records_sha256,
                "record_count": self.new.record_count,
            },
        }


@dataclass(frozen=True)
class FeatureChange:
    """A feature added, removed, or whose kind or value count (shape) changed."""

    name: str
    scope: str
    change: Literal["added", "removed", "kind_changed", "shape_changed"]
    old: Feature | None
    new: Feature | None

    def describe(self) -> str:
        if self.change == "added" and self.new:
            return f"+ {self.name} ({self.new.kind}, {_shape(self.new)})"
        if self.change == "removed" and self.old:
            return f"- {self.name} ({self.old.kind}, {_shape(self.old)})"
        assert self.old and self.new
        if self.change == "kind_changed":
            return f"~ {self.name}: kind {self.old.kind} -> {self.new.kind}"
        return f"~ {self.name}: values per record {_shape(self.old)} -> {_shape(self.new)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scope": self.scope,
            "change": self.change,
            "old": None if self.old is None else self.old.to_dict(),
            "new": None if self.new is None else self.new.to_dict(),
            "description": self.describe(),
        }


def _shape(feat: Feature) -> str:
    if feat.min_count == feat.max_count:
        return f"{feat.min_count} per record"
    return f"{feat.min_count}..{feat.max_count} per record"


@dataclass(frozen=True)
class SplitCounts:
    """Record and shard counts of one split in each version (0 when absent)."""

    split: str
    old_records: int
    new_records: int
    old_shards: int
    new_shards: int

    @property
    def record_delta(self) -> int:
        return self.new_records - self.old_records


@dataclass(frozen=True)
class VersionDiff:
    """What changed from version ``old`` to version ``new``."""

    old: str
    new: str
    same_content: bool
    shards: tuple[ShardChange, ...]
    unchanged_shards: int
    splits: tuple[SplitCounts, ...]
    schema: tuple[FeatureChange, ...] = field(default_factory=tuple)

    @property
    def added(self) -> list[ShardChange]:
        return [c for c in self.shards if c.change == "added"]

    @property
    def removed(self) -> list[ShardChange]:
        return [c for c in self.shards if c.change == "removed"]

    @property
    def changed(self) -> list[ShardChange]:
        return [c for c in self.shards if c.change == "changed"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "same_content": self.same_content,
            "shards": {
                "added": [c.to_dict() for c in self.added],
                "removed": [c.to_dict() for c in self.removed],
                "changed": [c.to_dict() for c in self.changed],
                "unchanged": self.unchanged_shards,
            },
            "splits": {
                s.split: {
                    "old_records": s.old_records,
                    "new_records": s.new_records,
                    "record_delta": s.record_delta,
                    "old_shards": s.old_shards,
                    "new_shards": s.new_shards,
                }
                for s in self.splits
            },
            "schema": [c.to_dict() for c in self.schema],
        }


def diff_schemas(old: Schema, new: Schema) -> list[FeatureChange]:
    """Features added/removed, and kind or per-record value count changes."""
    olds = {f.key: f for f in old.features}
    news = {f.key: f for f in new.features}
    out: list[FeatureChange] = []
    for key in sorted(olds.keys() | news.keys()):
        a, b = olds.get(key), news.get(key)
        scope, name = key
        if a is None:
            out.append(FeatureChange(name, scope, "added", None, b))
        elif b is None:
            out.append(FeatureChange(name, scope, "removed", a, None))
        elif a.kind != b.kind:
            out.append(FeatureChange(name, scope, "kind_changed", a, b))
        elif (a.min_count, a.max_count, a.min_steps, a.max_steps) != (
            b.min_count,
            b.max_count,
            b.min_steps,
            b.max_steps,
        ):
            out.append(FeatureChange(name, scope, "shape_changed", a, b))
    return out


def diff_versions(old: DatasetVersion, new: DatasetVersion) -> VersionDiff:
    """Compare two resolved versions (schemas are fetched only when their digests differ)."""
    old_shards = {(s.split, s.index): s for s in old.shards}
    new_shards = {(s.split, s.index): s for s in new.shards}
    changes: list[ShardChange] = []
    unchanged = 0
    for key in sorted(old_shards.keys() | new_shards.keys()):
        a, b = old_shards.get(key), new_shards.get(key)
        if a is None:
            changes.append(ShardChange(key[0], key[1], "added", None, b))
        elif b is None:
            changes.append(ShardChange(key[0], key[1], "removed", a, None))
        elif a.records_sha256 != b.records_sha256 or a.record_count != b.record_count:
            changes.append(ShardChange(key[0], key[1], "changed", a, b))
        else:
            unchanged += 1
    splits = []
    for name in sorted(old.splits.keys() | new.splits.keys()):
        sa, sb = old.splits.get(name), new.splits.get(name)
        splits.append(
            SplitCounts(
                split=name,
                old_records=sa.record_count if sa else 0,
                new_records=sb.record_count if sb else 0,
                old_shards=sa.shard_count if sa else 0,
                new_shards=sb.shard_count if sb else 0,
            )
        )
    schema_changes: list[FeatureChange] = []
    if old.schema_digest is None or old.schema_digest != new.schema_digest:
        schema_changes = diff_schemas(old.schema, new.schema)
    same = old.content_digest is not None and old.content_digest == new.content_digest
    return VersionDiff(
        old=old.name,
        new=new.name,
        same_content=same,
        shards=tuple(changes),
        unchanged_shards=unchanged,
        splits=tuple(splits),
        schema=tuple(schema_changes),
    )

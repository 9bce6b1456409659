"""Differences between two versions: shards, record counts per split, schema.

The rules live in :mod:`recordkeeper.core.diff` (the service's diff endpoint and the web UI use
the same ones); this module applies them to resolved :class:`~recordkeeper.values.DatasetVersion`
values.  Shards are matched by ``(split, index)``; a shard is *changed* when its
``records_sha256`` differs (re-compressing or moving a shard is not a change of content).
"""

from __future__ import annotations

from recordkeeper.core import diff as core_diff
from recordkeeper.core.diff import (
    FeatureChange,
    ShardChange,
    SplitCounts,
    VersionDiff,
    diff_schemas,
)
from recordkeeper.values import DatasetVersion, Shard

__all__ = [
    "FeatureChange",
    "ShardChange",
    "SplitCounts",
    "VersionDiff",
    "diff_schemas",
    "diff_versions",
]


def _side(version: DatasetVersion) -> core_diff.DiffSide[Shard]:
    return core_diff.DiffSide(
        name=version.name,
        content_digest=version.content_digest,
        schema_digest=version.schema_digest,
        shards=version.shards,
        schema=lambda: version.schema,
    )


def diff_versions(old: DatasetVersion, new: DatasetVersion) -> VersionDiff[Shard]:
    """Compare two resolved versions (schemas are fetched only when their digests differ)."""
    return core_diff.diff_versions(_side(old), _side(new))

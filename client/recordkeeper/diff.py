"""Differences between two versions: shards, record counts per split, schema.

The rules live in :mod:`recordkeeper.core.diff` (the service's diff endpoint and the web UI use
the same ones); this module applies them to resolved :class:`~recordkeeper.values.DatasetVersion`
values.  Shards are matched by ``(split, index)``; a shard is *changed* when its
``records_sha256`` differs (re-compressing or moving a shard is not a change of content).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence

from recordkeeper.core import diff as core_diff
from recordkeeper.core.diff import (
    FeatureChange,
    ShardChange,
    SplitCounts,
    VersionDiff,
    diff_schemas,
)
from recordkeeper.core.shard_columns import ShardColumns
from recordkeeper.values import DatasetVersion, Shard

__all__ = [
    "FeatureChange",
    "ShardChange",
    "SplitCounts",
    "VersionDiff",
    "diff_schemas",
    "diff_versions",
]


def _table(version: DatasetVersion) -> core_diff.ShardTable[Shard]:
    """The version's shards as columns, read straight from the compact columns when it was
    resolved through them (no :class:`Shard` is built but those :func:`diff_versions` names)."""
    parts: list[core_diff.SplitRows] = []
    bases: list[int] = []
    shards_of: list[Sequence[Shard]] = []
    start = 0
    for name in sorted(version.splits):
        shards = version.splits[name].shards
        bases.append(start)
        shards_of.append(shards)
        if isinstance(shards, ShardColumns):
            parts.append(
                core_diff.SplitRows(
                    name,
                    start,
                    shards.column("split"),
                    shards.column("index"),
                    shards.column("records_sha256"),
                    shards.column("record_count"),
                )
            )
        else:
            parts.extend(
                dataclasses.replace(part, start=part.start + start)
                for part in core_diff.ShardTable.of(shards).splits
            )
        start += len(shards)

    def record(i: int) -> Shard:
        k = bisect.bisect_right(bases, i) - 1
        return shards_of[k][i - bases[k]]

    return core_diff.ShardTable(parts, record)


def _side(version: DatasetVersion) -> core_diff.DiffSide[Shard]:
    return core_diff.DiffSide(
        name=version.name,
        content_digest=version.content_digest,
        schema_digest=version.schema_digest,
        shards=(),
        schema=lambda: version.schema,
        table=_table(version),
    )


def diff_versions(old: DatasetVersion, new: DatasetVersion) -> VersionDiff[Shard]:
    """Compare two resolved versions (schemas are fetched only when their digests differ)."""
    return core_diff.diff_versions(_side(old), _side(new))

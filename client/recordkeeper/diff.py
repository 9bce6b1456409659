"""Differences between two versions: shards, record counts per split, schema.

The rules live in :mod:`recordkeeper.core.diff` (the service's diff endpoint and the web UI use
the same ones); this module applies them to resolved :class:`~recordkeeper.values.DatasetVersion`
values.  Shards are matched by ``(split, index)``; a shard is *changed* when its
``records_sha256`` differs (re-compressing or moving a shard is not a change of content).
"""

from __future__ import annotations

import bisect
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
    """The version's shards as rows, read straight from the compact columns when it was
    resolved through them (no :class:`Shard` is built but those :func:`diff_versions` names)."""
    rows: list[core_diff.ShardRow] = []
    starts: list[int] = []
    parts: list[Sequence[Shard]] = []
    totals: dict[str, tuple[int, int]] = {}
    for name in sorted(version.splits):
        split = version.splits[name]
        shards = split.shards
        starts.append(len(rows))
        parts.append(shards)
        if isinstance(shards, ShardColumns):
            part_rows: list[core_diff.ShardRow] = list(
                zip(
                    shards.column("split"),
                    shards.column("index"),
                    shards.column("records_sha256"),
                    shards.column("record_count"),
                    strict=True,
                )
            )
            named = set(shards.column("split"))
            counts: Sequence[int] = shards.column("record_count")
        else:
            part_rows = core_diff.shard_rows(shards)
            named = {r[0] for r in part_rows}
            counts = [r[3] for r in part_rows]
        rows.extend(part_rows)
        for row_split in named:  # a split's shards all name it (counted as the rule counts)
            records, count = totals.get(row_split, (0, 0))
            if named == {row_split}:
                totals[row_split] = (records + sum(counts), count + len(part_rows))
            else:
                mine = [r[3] for r in part_rows if r[0] == row_split]
                totals[row_split] = (records + sum(mine), count + len(mine))

    def record(i: int) -> Shard:
        part = bisect.bisect_right(starts, i) - 1
        return parts[part][i - starts[part]]

    return core_diff.ShardTable(rows, record, totals)


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

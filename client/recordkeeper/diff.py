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
from recordkeeper.core.errors import DiffNotDerived, InvalidResponse
from recordkeeper.core.shard_columns import ShardColumns
from recordkeeper.http import HttpCore, quote_segment, reading_answer
from recordkeeper.values import DatasetVersion, Shard

__all__ = [
    "SERVICE_DIFF_PAGE",
    "FeatureChange",
    "ShardChange",
    "SplitCounts",
    "VersionDiff",
    "derived_diff",
    "diff_schemas",
    "diff_versions",
]

#: Shard changes asked for per request when the service computes the diff (each with its
#: whole shard records: ~1 KB a change).
SERVICE_DIFF_PAGE = 2000


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


def derived_diff(http: HttpCore, old: str, new: str) -> VersionDiff[Shard] | None:
    """The diff of two published versions computed by the service when one is derived from the
    other (``GET /versions/{old}/diff/{new}?basis=derivation&form=full``): in proportion to the
    change, without either version's shard list.  None when the service answers
    ``diff_not_derived`` (not so related, or not both published): compare both versions'
    shards then (:func:`diff_versions`).  The answer is the one :func:`diff_versions` gives."""
    path = f"/versions/{quote_segment(old)}/diff/{quote_segment(new)}"
    changes: list[ShardChange[Shard]] = []
    offset = 0
    while True:
        params = {"basis": "derivation", "form": "full", "limit": SERVICE_DIFF_PAGE}
        try:
            body = http.api("GET", path, params={**params, "offset": offset})
        except DiffNotDerived:
            return None
        if not isinstance(body, dict) or body.get("basis") != "derivation":
            return None  # a service from before basis=derivation: it answered another form
        with reading_answer("a diff"):
            page = core_diff.page_changes(body["shards"], Shard.from_dict)
            changes.extend(page)
            if not body["shards"]["more"]:
                return VersionDiff.from_dict(body, changes)
        if not page:
            raise InvalidResponse(f"the service's diff of {old} and {new} stopped paging")
        offset += len(page)

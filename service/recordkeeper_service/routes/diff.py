"""``GET /api/v1/versions/{ref}/diff/{other}``: what changed from one version to another.

The rules (shards matched by split and index, content compared by ``records_sha256``; features
by scope and name) are :mod:`recordkeeper.core.diff`, the same the client's ``diff`` applies.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import Field

from recordkeeper_service.deps import Reader, RepositoryDep
from recordkeeper_service.routes.common import AUTHENTICATED, OutModel, errors

__all__ = ["DiffOut", "router"]


class ShardSideOut(OutModel):
    uri: str
    records_sha256: str
    record_count: int


class ShardChangeOut(OutModel):
    split: str
    index: int
    change: Literal["added", "removed", "changed"]
    old: ShardSideOut | None
    new: ShardSideOut | None


class ShardChangesOut(OutModel):
    added: list[ShardChangeOut]
    removed: list[ShardChangeOut]
    changed: list[ShardChangeOut]
    unchanged: int


class SplitCountsOut(OutModel):
    old_records: int
    new_records: int
    record_delta: int
    old_shards: int
    new_shards: int


class FeatureChangeOut(OutModel):
    name: str
    scope: str
    change: Literal["added", "removed", "kind_changed", "shape_changed"]
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    description: str


class DiffOut(OutModel):
    old: str
    new: str
    same_content: bool
    shards: ShardChangesOut
    splits: dict[str, SplitCountsOut]
    schema_: list[FeatureChangeOut] = Field(alias="schema")


router = APIRouter(tags=["versions"], responses=AUTHENTICATED)


@router.get(
    "/versions/{ref}/diff/{other}",
    response_model=DiffOut,
    responses=errors(400, 404),
)
def diff_versions(ref: str, other: str, repository: RepositoryDep, _who: Reader) -> dict[str, Any]:
    """Shards added, removed and changed, record counts per split and schema changes from the
    version ``ref`` to the version ``other`` (any reference forms, aliases resolved now)."""
    return repository.diffs.diff(ref, other).to_dict()

"""``GET /api/v1/versions/{ref}/diff/{other}``: what changed from one version to another.

The rules (shards matched by split and index, content compared by ``records_sha256``; features
by scope and name) are :mod:`recordkeeper.core.diff`, the same the client's ``diff`` applies.

The shard changes come in pages (``limit``, default 1,000, at most 10,000; ``offset``), with the
totals in ``shards.counts``.  A page of a diff between published versions never changes: it is
rendered once per worker and answered from memory afterwards, without a worker thread when both
versions are in the version cache (see :mod:`recordkeeper_service.repository.diff`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Annotated, Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Query, Response
from pydantic import Field

from recordkeeper_service.deps import HeavyReads, Offset, Reader, RepositoryDep
from recordkeeper_service.repository import Repository
from recordkeeper_service.routes.common import AUTHENTICATED, OutModel, errors

__all__ = ["DIFF_PAGE", "MAX_DIFF_PAGE", "DiffOut", "router"]

#: Shard changes listed per answer by default, and at most.
DIFF_PAGE = 1000
MAX_DIFF_PAGE = 10_000


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


class ChangeCountsOut(OutModel):
    added: int
    removed: int
    changed: int


class ShardChangesOut(OutModel):
    added: list[ShardChangeOut] = Field(description="the page's added shards")
    removed: list[ShardChangeOut]
    changed: list[ShardChangeOut]
    unchanged: int
    counts: ChangeCountsOut = Field(description="every change of each kind, on any page")
    offset: int
    limit: int | None
    more: bool = Field(description="changes follow this page (ask again with offset+limit)")


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


DiffLimit = Annotated[
    int,
    Query(ge=1, le=MAX_DIFF_PAGE, description=f"shard changes per page (1-{MAX_DIFF_PAGE})"),
]


def _render(
    repository: Repository, ref: str, other: str, limit: int, offset: int
) -> tuple[Hashable | None, bytes]:
    """The page and its key (``None``: not immutable), computed in a worker thread."""
    old = repository.versions.resolve(ref, shards=True)
    new = repository.versions.resolve(other, shards=True)
    key = repository.diffs.key(old, new)
    page = repository.diffs.compare(old, new).to_dict(limit=limit, offset=offset)
    body = DiffOut.model_validate(page).model_dump_json(by_alias=True).encode()
    return (None if key is None else (key, limit, offset)), body


@router.get(
    "/versions/{ref}/diff/{other}",
    response_model=DiffOut,
    responses=errors(400, 404),
)
async def diff_versions(
    ref: str,
    other: str,
    repository: RepositoryDep,
    _who: Reader,
    heavy: HeavyReads,
    limit: DiffLimit = DIFF_PAGE,
    offset: Offset = 0,
) -> Response:
    """Shards added, removed and changed (a page of them), record counts per split and schema
    changes from the version ``ref`` to the version ``other`` (any reference forms, aliases
    resolved now)."""
    # Without shards first (one query each, on the event loop for a cached version): a page
    # already rendered is answered from memory.
    old = await repository.versions.resolve_async(ref, shards=False)
    new = await repository.versions.resolve_async(other, shards=False)
    key = repository.diffs.key(old, new)
    body = None if key is None else repository.diffs.rendered.get((key, limit, offset))
    if body is None:
        # Loading the shards of a version not in the cache costs as much as the diff itself:
        # both under the limit of expensive answers (deps.HeavyReads).
        page_key, rendered = await anyio.to_thread.run_sync(
            _render, repository, ref, other, limit, offset, limiter=heavy
        )
        if page_key is not None:
            repository.diffs.rendered.put(page_key, rendered)
        body = rendered
    return Response(body, media_type="application/json")

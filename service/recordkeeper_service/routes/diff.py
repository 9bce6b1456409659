"""``GET /api/v1/versions/{ref}/diff/{other}``: what changed from one version to another.

The rules (shards matched by split and index, content compared by ``records_sha256``; features
by scope and name) are :mod:`recordkeeper.core.diff`, the same the client's ``diff`` applies.

The shard changes come in pages (``limit``, default 1,000, at most 10,000; ``offset``), with
the totals in ``shards.counts``; ``form=full`` lists each changed shard's whole records.  When
one version is derived from the other, only the shards after the positions both hold alike are
read (:meth:`.DiffRepository.derived`); ``basis=derivation`` asks for that way only.  A page of
a diff between published versions never changes: it is rendered once per worker and answered
from memory afterwards, without a worker thread when both versions are in the version cache
(see :mod:`recordkeeper_service.repository.diff`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Query, Response
from pydantic import ConfigDict, Field

from recordkeeper.core.errors import DiffNotDerived
from recordkeeper_service.deps import HeavyReads, Offset, Reader, RepositoryDep
from recordkeeper_service.domain import VersionRecord
from recordkeeper_service.repository import Repository
from recordkeeper_service.routes.common import AUTHENTICATED, OutModel, errors

__all__ = ["DIFF_PAGE", "MAX_DIFF_PAGE", "DiffOut", "router"]

#: Shard changes listed per answer by default, and at most.
DIFF_PAGE = 1000
MAX_DIFF_PAGE = 10_000


class ShardSideOut(OutModel):
    """A shard of one side: its ``uri``, ``records_sha256`` and ``record_count``; with
    ``form=full`` every field of the shard, as a version's shard page lists it."""

    model_config = ConfigDict(extra="allow")

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
    basis: Literal["derivation", "shards"] = Field(
        description="how it was computed: 'derivation' (one version is derived from the other: "
        "only the positions after those both hold alike were read) or 'shards' (both "
        "versions' shards compared)"
    )
    shards: ShardChangesOut
    splits: dict[str, SplitCountsOut]
    schema_: list[FeatureChangeOut] = Field(alias="schema")


router = APIRouter(tags=["versions"], responses=AUTHENTICATED)


DiffLimit = Annotated[
    int,
    Query(ge=1, le=MAX_DIFF_PAGE, description=f"shard changes per page (1-{MAX_DIFF_PAGE})"),
]


DiffForm = Annotated[
    Literal["summary", "full"],
    Query(
        description="each changed shard's sides as `uri`, `records_sha256` and "
        "`record_count` (summary) or as whole shard records (full)"
    ),
]
DiffBasis = Annotated[
    Literal["any", "derivation"],
    Query(
        description="'derivation': answer only when one version is derived from the other "
        "(else 409 diff_not_derived, without reading either version's shards); 'any': compare "
        "both versions' shards when needed"
    ),
]


def _render(
    repository: Repository,
    old: VersionRecord,
    new: VersionRecord,
    page: tuple[int, int, bool],
    basis: str,
) -> bytes:
    """The page (``limit``, ``offset``, ``full``) of the diff, computed in a worker thread."""
    limit, offset, full = page
    if basis == "any":
        found = repository.diffs.between(old, new)
    else:
        derived = repository.diffs.derived(old, new)
        if derived is None:
            raise DiffNotDerived(
                f"{old.name} and {new.name}: neither is a published version derived from the "
                "other (or the derivation predates the recorded prefixes); ask with basis=any "
                "to compare their shards"
            )
        found = derived
    answer = found.to_dict(limit=limit, offset=offset, full=full)
    return DiffOut.model_validate(answer).model_dump_json(by_alias=True).encode()


@router.get(
    "/versions/{ref}/diff/{other}",
    response_model=DiffOut,
    responses=errors(400, 404, 409),
)
async def diff_versions(
    ref: str,
    other: str,
    repository: RepositoryDep,
    _who: Reader,
    heavy: HeavyReads,
    limit: DiffLimit = DIFF_PAGE,
    offset: Offset = 0,
    form: DiffForm = "summary",
    basis: DiffBasis = "any",
) -> Response:
    """Shards added, removed and changed (a page of them), record counts per split and schema
    changes from the version ``ref`` to the version ``other`` (any reference forms, aliases
    resolved now).  When one is derived from the other (``client.derive``, through ``base``
    links), only the shards after the positions both hold alike are read: the cost is in
    proportion to the change (``basis`` says how it was computed)."""
    # Without shards first (one query each, on the event loop for a cached version): a page
    # already rendered is answered from memory.
    old = await repository.versions.resolve_async(ref, shards=False)
    new = await repository.versions.resolve_async(other, shards=False)
    key = repository.diffs.key(old, new)
    page = (limit, offset, form == "full")
    page_key = None if key is None else (key, *page, basis)
    body = None if page_key is None else repository.diffs.rendered.get(page_key)
    if body is None:
        # Loading the shards of a version not in the cache costs as much as the diff itself:
        # both under the limit of expensive answers (deps.HeavyReads).
        body = await anyio.to_thread.run_sync(
            _render, repository, old, new, page, basis, limiter=heavy
        )
        if page_key is not None:
            repository.diffs.rendered.put(page_key, body)
    return Response(body, media_type="application/json")

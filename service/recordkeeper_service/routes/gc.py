"""Garbage collection: candidates whose storage may be deleted, and marking them collected."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import ConfigDict, Field

from recordkeeper_service.deps import Admin, Limit, Offset, Reader, RepositoryDep
from recordkeeper_service.repository.gc import DEFAULT_STAGED_OLDER_THAN
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, ListOut, OutModel, errors

__all__ = ["GcCandidateOut", "GcDoneIn", "router"]


class GcCandidateOut(OutModel):
    name: str
    dataset: str
    state: str
    created_at: str
    storage_prefix: str
    shard_count: int
    abandoned_at: str | None
    collected_at: str | None


class GcDoneIn(InModel):
    model_config = ConfigDict(extra="forbid")

    objects: int | None = Field(default=None, ge=0, description="objects deleted")
    bytes: int | None = Field(default=None, ge=0, description="bytes deleted")


router = APIRouter(tags=["gc"], responses=AUTHENTICATED)


@router.get("/gc/candidates", response_model=ListOut[GcCandidateOut])
def gc_candidates(
    repository: RepositoryDep,
    _who: Reader,
    staged_older_than: Annotated[
        int, Query(ge=0, description="seconds; staged versions older than this are listed")
    ] = DEFAULT_STAGED_OLDER_THAN,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Abandoned versions and stale staged ones whose storage is not yet collected, newest last."""
    page = repository.gc.candidates(staged_older_than=staged_older_than, limit=limit, offset=offset)
    return page.to_json()


@router.post(
    "/versions/{version_name}/gc-done",
    response_model=GcCandidateOut,
    responses=errors(400, 404, 409, 413),
)
def gc_done(
    version_name: str, repository: RepositoryDep, who: Admin, body: GcDoneIn | None = None
) -> dict[str, Any]:
    """Record that an abandoned version's storage was deleted (idempotent; admin scope)."""
    record = repository.gc.mark_collected(
        version_name,
        actor=who.name,
        objects=body.objects if body is not None else None,
        size=body.bytes if body is not None else None,
    )
    return record.to_json()

"""Garbage collection: candidates whose storage may be deleted, and marking them collected."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from recordkeeper_service.deps import Admin, Limit, Offset, Reader, RepositoryDep
from recordkeeper_service.repository.gc import DEFAULT_STAGED_OLDER_THAN, GcRepository
from recordkeeper_service.responses import JSON

router = APIRouter(tags=["gc"])


class GcCandidateOut(BaseModel):
    name: str
    dataset: str
    state: str
    created_at: str
    storage_prefix: str
    shard_count: int
    abandoned_at: str | None
    collected_at: str | None


class GcCandidatesOut(BaseModel):
    data: list[GcCandidateOut]
    count: int
    limit: int
    offset: int


class GcDoneRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    objects: int | None = Field(default=None, ge=0, description="objects deleted")
    bytes: int | None = Field(default=None, ge=0, description="bytes deleted")


def _gc(repository: RepositoryDep) -> GcRepository:
    return GcRepository(repository.db)


@router.get("/gc/candidates", response_model=GcCandidatesOut)
def gc_candidates(
    repository: RepositoryDep,
    _who: Reader,
    staged_older_than: Annotated[
        int, Query(ge=0, description="seconds; staged versions older than this are listed")
    ] = DEFAULT_STAGED_OLDER_THAN,
    limit: Limit = 100,
    offset: Offset = 0,
) -> JSON:
    """Abandoned versions and stale staged ones whose storage is not yet collected, newest last."""
    page = _gc(repository).candidates(
        staged_older_than=staged_older_than, limit=limit, offset=offset
    )
    return JSON(page.to_json())


@router.post("/versions/{version_name}/gc-done", response_model=GcCandidateOut)
def gc_done(
    version_name: str, repository: RepositoryDep, who: Admin, body: GcDoneRequest | None = None
) -> JSON:
    """Record that an abandoned version's storage was deleted (idempotent; admin scope)."""
    record = _gc(repository).mark_collected(
        version_name,
        actor=who.name,
        objects=body.objects if body is not None else None,
        size=body.bytes if body is not None else None,
    )
    return JSON(record.to_json())

"""Garbage collection: candidates, claims that release storage to a collector, marking collected."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import ConfigDict, Field

from recordkeeper.core.limits import MAX_INT64, MAX_URI_LENGTH
from recordkeeper_service.deps import Admin, Limit, Offset, Reader, RepositoryDep
from recordkeeper_service.repository.deletion import MAX_OBJECTS_PER_QUESTION
from recordkeeper_service.repository.gc import DEFAULT_STAGED_OLDER_THAN, MAX_CLAIMS
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, ListOut, OutModel, errors

__all__ = [
    "GcCandidateOut",
    "GcClaimIn",
    "GcClaimsOut",
    "GcDoneIn",
    "GcObjectsIn",
    "GcObjectsOut",
    "router",
]


class GcCandidateOut(OutModel):
    name: str
    dataset: str
    state: str
    created_at: str
    storage_prefix: str
    shard_count: int
    abandoned_at: str | None
    collected_at: str | None
    claimed_by: str | None
    claimed_at: str | None


class GcClaimIn(InModel):
    model_config = ConfigDict(extra="forbid")

    staged_older_than: int = Field(
        default=DEFAULT_STAGED_OLDER_THAN,
        ge=0,
        le=MAX_INT64,
        description="seconds; staged versions idle longer than this (and than the server's "
        "minimum) are claimed",
    )
    limit: int = Field(default=100, ge=1, le=MAX_CLAIMS, description="most versions to claim")


class GcClaimsOut(OutModel):
    data: list[GcCandidateOut]


class GcDoneIn(InModel):
    model_config = ConfigDict(extra="forbid")

    objects: int | None = Field(default=None, ge=0, le=MAX_INT64, description="objects deleted")
    bytes: int | None = Field(default=None, ge=0, le=MAX_INT64, description="bytes deleted")


class GcObjectsIn(InModel):
    model_config = ConfigDict(extra="forbid")

    uris: list[Annotated[str, Field(max_length=MAX_URI_LENGTH)]] = Field(
        max_length=MAX_OBJECTS_PER_QUESTION,
        description="object URIs the collector found under the version's storage prefix",
    )


class GcKeptOut(OutModel):
    uri: str
    referenced_by: list[str]


class GcObjectsOut(OutModel):
    version: str
    delete: list[str]
    keep: list[GcKeptOut]


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
    """Abandoned versions and idle staged ones whose storage is not yet collected, newest last."""
    page = repository.gc.candidates(staged_older_than=staged_older_than, limit=limit, offset=offset)
    return page.to_json()


@router.post("/gc/claims", response_model=GcClaimsOut, responses=errors(400, 413))
def gc_claim(
    repository: RepositoryDep, who: Admin, body: GcClaimIn | None = None
) -> dict[str, Any]:
    """Claim candidates for deletion (admin scope): the server abandons stale staged ones and
    releases their storage prefixes to the caller, the only prefixes it may delete."""
    body = body if body is not None else GcClaimIn()
    claimed = repository.gc.claim(
        staged_older_than=body.staged_older_than, limit=body.limit, actor=who.name
    )
    return {"data": [c.to_json() for c in claimed]}


@router.post(
    "/versions/{version_name}/gc-objects",
    response_model=GcObjectsOut,
    responses=errors(400, 404, 409, 413),
)
def gc_objects(
    version_name: str, repository: RepositoryDep, who: Admin, body: GcObjectsIn
) -> dict[str, Any]:
    """Which of these objects under a claimed version's storage prefix the claimant may delete
    (admin scope; the claimant only; nothing changes).  Objects a live version references, or
    outside the prefix, are listed under ``keep``: the collector never deletes them."""
    answer = repository.gc.deletable(version_name, body.uris, actor=who.name)
    return answer.to_json()


@router.post(
    "/versions/{version_name}/gc-preview",
    response_model=GcObjectsOut,
    responses=errors(400, 404, 409, 413),
)
def gc_preview(
    version_name: str, repository: RepositoryDep, _who: Reader, body: GcObjectsIn
) -> dict[str, Any]:
    """What ``gc-objects`` would answer once the version is claimed, for a dry run (read scope;
    no claim needed; nothing changes): objects a live version references are under ``keep``."""
    return repository.gc.preview(version_name, body.uris).to_json()


@router.post(
    "/versions/{version_name}/gc-done",
    response_model=GcCandidateOut,
    responses=errors(400, 404, 409, 413),
)
def gc_done(
    version_name: str, repository: RepositoryDep, who: Admin, body: GcDoneIn | None = None
) -> dict[str, Any]:
    """Record that a claimed version's storage was deleted (idempotent; the claimant only)."""
    record = repository.gc.mark_collected(
        version_name,
        actor=who.name,
        objects=body.objects if body is not None else None,
        size=body.bytes if body is not None else None,
    )
    return record.to_json()

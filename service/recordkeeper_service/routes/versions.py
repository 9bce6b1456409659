"""Versions: stage, register shards, commit, abandon, deprecate, get by any ref, list."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from recordkeeper_service.api_models import (
    CommitRequest,
    DeprecateRequest,
    ListOut,
    RegisterOut,
    ShardBatch,
    StageRequest,
    VersionOut,
)
from recordkeeper_service.deps import Limit, Offset, Reader, RepositoryDep, Writer
from recordkeeper_service.responses import JSON

router = APIRouter(tags=["versions"])

State = Literal["staged", "committed", "deprecated", "abandoned"]


# The hot path (resolve) comes first: routes are matched in order.
@router.get("/versions/{ref}", response_model=VersionOut)
async def get_version(
    ref: str,
    repository: RepositoryDep,
    _who: Reader,
    shards: bool = True,
    expect_digest: Annotated[str | None, Query(description="sha256:<64 hex>")] = None,
) -> JSON:
    """Resolve any reference form to a version, with its shards unless ``shards=false``."""
    record = await repository.versions.resolve_async(
        ref, shards=shards, expect_digest=expect_digest
    )
    return JSON(record.to_json(ref=ref))


@router.post("/datasets/{name}/versions", status_code=201, response_model=VersionOut)
def stage_version(name: str, body: StageRequest, repository: RepositoryDep, who: Writer) -> JSON:
    """Stage a new version: allocate its number and name, answer its storage prefix."""
    record = repository.versions.stage(
        name,
        actor=who.name,
        desc=body.desc,
        date=body.date,
        root=body.root,
        metadata=body.metadata,
    )
    return JSON(record.to_json(), status_code=201)


@router.get("/datasets/{name}/versions", response_model=ListOut[VersionOut])
def list_versions(
    name: str,
    repository: RepositoryDep,
    _who: Reader,
    state: State | None = None,
    since: Annotated[str | None, Query(description="YYYYMMDD, inclusive")] = None,
    until: Annotated[str | None, Query(description="YYYYMMDD, inclusive")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> JSON:
    """Versions of a dataset, newest first, without shards."""
    page = repository.versions.list(
        name, state=state, since=since, until=until, limit=limit, offset=offset
    )
    return JSON(page.to_json())


@router.post("/versions/{version_name}/shards", response_model=RegisterOut)
def register_shards(
    version_name: str, body: ShardBatch, repository: RepositoryDep, who: Writer
) -> JSON:
    """Register up to 10,000 shards of a staged version; identical repeats are no-ops."""
    result = repository.shards.register(
        version_name, [shard.as_mapping() for shard in body.shards], actor=who.name
    )
    return JSON(result.to_json())


@router.post("/versions/{version_name}/commit", response_model=VersionOut)
def commit_version(
    version_name: str,
    repository: RepositoryDep,
    who: Writer,
    body: CommitRequest | None = None,
) -> JSON:
    """Check completeness, compute digests, merge schemas and make the version visible."""
    on_duplicate = body.on_duplicate if body is not None else "error"
    record = repository.commits.commit(version_name, on_duplicate=on_duplicate, actor=who.name)
    return JSON(record.to_json())


@router.post("/versions/{version_name}/abandon", response_model=VersionOut)
def abandon_version(version_name: str, repository: RepositoryDep, who: Writer) -> JSON:
    """Abandon a staged version (idempotent)."""
    return JSON(repository.versions.abandon(version_name, actor=who.name).to_json())


@router.post("/versions/{ref}/deprecate", response_model=VersionOut)
def deprecate_version(
    ref: str, repository: RepositoryDep, who: Writer, body: DeprecateRequest | None = None
) -> JSON:
    """Deprecate a committed version: it stays resolvable by name/number, not via latest."""
    reason = body.reason if body is not None else None
    force = body.force if body is not None else False
    if force:
        who.require("admin")
    record = repository.versions.deprecate(ref, reason=reason, actor=who.name, force=force)
    return JSON(record.to_json())

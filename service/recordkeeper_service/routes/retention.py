"""Retention: policies, pins, the plan, and the claims through which apply deletes data."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import ConfigDict, Field

from recordkeeper.core.limits import MAX_INT64
from recordkeeper.core.retention import MAX_KEEP_DAYS, MAX_KEEP_LAST, RetentionPolicy
from recordkeeper_service.deps import Admin, Reader, RepositoryDep, Writer
from recordkeeper_service.repository.retention import MAX_CLAIMS, MAX_URIS_PER_REQUEST
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, OutModel, errors

__all__ = [
    "DeletableIn",
    "DeletableOut",
    "PinIn",
    "PlanOut",
    "PolicyIn",
    "PolicyOut",
    "RetentionClaimIn",
    "RetentionDoneIn",
    "router",
]


class PolicyIn(InModel):
    model_config = ConfigDict(extra="forbid")

    keep_last: int | None = Field(
        default=None, ge=1, le=MAX_KEEP_LAST, description="keep the N highest-numbered versions"
    )
    keep_days: int | None = Field(
        default=None, ge=1, le=MAX_KEEP_DAYS, description="keep versions newer than D days"
    )
    keep_aliased: bool = Field(default=True, description="keep versions an alias (or latest) names")
    keep_trained: bool = Field(
        default=True, description="keep versions a checkpoint that is not deleted trained on"
    )
    keep_pinned: bool = Field(default=True, description="keep versions a registered pin names")


class PolicyBody(OutModel):
    keep_last: int | None
    keep_days: int | None
    keep_aliased: bool
    keep_trained: bool
    keep_pinned: bool


class PolicyOut(OutModel):
    scope: str
    source: str = Field(description="dataset, default (the service-wide policy) or none")
    policy: PolicyBody | None
    describe: str
    updated_at: str | None
    updated_by: str | None


class PoliciesOut(OutModel):
    data: list[PolicyOut]


class PinIn(InModel):
    model_config = ConfigDict(extra="forbid")

    label: str = Field(description="who needs the versions: a lock file's path, a release name")
    versions: list[str] = Field(min_length=1, max_length=1000, examples=[["coco@v3"]])


class PinOut(OutModel):
    label: str
    version: str
    dataset: str
    created_at: str
    created_by: str


class PinsOut(OutModel):
    data: list[PinOut]


class KeepOut(OutModel):
    rule: str
    detail: str


class PlanItemOut(OutModel):
    name: str
    dataset: str
    number: int
    state: str
    action: str = Field(description="keep, delete, needs_force or resume")
    kept_by: list[KeepOut]
    trained: list[str]
    objects: int
    bytes: int
    shared: int
    claimed_by: str | None


class PlanOut(OutModel):
    dataset: str | None
    force: bool
    versions: int
    delete: int
    keep: int
    needs_force: int
    objects: int
    bytes: int
    data_deleted: int
    items: list[PlanItemOut]


class RetentionClaimIn(InModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str | None = None
    limit: int = Field(default=20, ge=1, le=MAX_CLAIMS)
    force: bool = Field(default=False, description="also data checkpoints trained on")
    reason: str | None = Field(default=None, description="required with force; audited")
    exclude: list[str] = Field(default_factory=list, max_length=10_000)


class RetentionClaimOut(OutModel):
    name: str
    dataset: str
    storage_prefix: str
    shard_count: int
    claimed_by: str
    claimed_at: str
    resumed: bool
    forced: bool


class RetentionClaimsOut(OutModel):
    data: list[RetentionClaimOut]


class DeletableIn(InModel):
    model_config = ConfigDict(extra="forbid")

    version: str
    uris: list[str] = Field(max_length=MAX_URIS_PER_REQUEST)


class KeptObjectOut(OutModel):
    uri: str
    reason: str


class DeletableOut(OutModel):
    deletable: list[str]
    kept: list[KeptObjectOut]


class RetentionDoneIn(InModel):
    model_config = ConfigDict(extra="forbid")

    objects: int | None = Field(default=None, ge=0, le=MAX_INT64)
    bytes: int | None = Field(default=None, ge=0, le=MAX_INT64)
    kept: int | None = Field(default=None, ge=0, le=MAX_INT64, description="objects kept shared")


class RetentionDoneOut(OutModel):
    name: str
    data_state: str


router = APIRouter(tags=["retention"], responses=AUTHENTICATED)


@router.get("/retention/policies", response_model=PoliciesOut)
def list_policies(repository: RepositoryDep, _who: Reader) -> dict[str, Any]:
    """Every policy set: the service-wide default (scope ``*``) first, then datasets'."""
    return {"data": [p.to_json() for p in repository.retention.policies()]}


@router.get("/retention/policies/{scope}", response_model=PolicyOut, responses=errors(400, 404))
def get_policy(scope: str, repository: RepositoryDep, _who: Reader) -> dict[str, Any]:
    """The policy in force for a dataset (its own, else the default), or the default (``*``)."""
    return repository.retention.policy(scope).to_json()


@router.put(
    "/retention/policies/{scope}", response_model=PolicyOut, responses=errors(400, 404, 413)
)
def set_policy(scope: str, body: PolicyIn, repository: RepositoryDep, who: Admin) -> dict[str, Any]:
    """Set a dataset's policy, or the service-wide default (``*``); admin scope, audited."""
    policy = RetentionPolicy.from_json(body.model_dump())
    return repository.retention.set_policy(scope, policy, actor=who.name).to_json()


@router.delete(
    "/retention/policies/{scope}",
    status_code=204,
    response_class=Response,
    responses=errors(400),
)
def delete_policy(scope: str, repository: RepositoryDep, who: Admin) -> Response:
    """Remove a policy (a dataset then falls back to the default); admin scope, audited."""
    repository.retention.delete_policy(scope, actor=who.name)
    return Response(status_code=204)


@router.get("/retention/pins", response_model=PinsOut, responses=errors(400))
def list_pins(
    repository: RepositoryDep, _who: Reader, dataset: Annotated[str | None, Query()] = None
) -> dict[str, Any]:
    """Registered pins (of one dataset)."""
    return {"data": [p.to_json() for p in repository.retention.pins(dataset=dataset)]}


@router.post("/retention/pins", response_model=PinsOut, responses=errors(400, 404, 409, 413))
def add_pins(body: PinIn, repository: RepositoryDep, who: Writer) -> dict[str, Any]:
    """Pin versions under a label: retention keeps them while the policy keeps pinned data."""
    pins = repository.retention.pin(body.versions, body.label, actor=who.name)
    return {"data": [p.to_json() for p in pins]}


class UnpinnedOut(OutModel):
    removed: int


@router.delete("/retention/pins", response_model=UnpinnedOut, responses=errors(400))
def delete_pins(
    repository: RepositoryDep, who: Writer, label: Annotated[str, Query(min_length=1)]
) -> dict[str, int]:
    """Remove every pin called ``label``."""
    return {"removed": repository.retention.unpin(label, actor=who.name)}


@router.get("/retention/plan", response_model=PlanOut, responses=errors(400, 404))
def retention_plan(
    repository: RepositoryDep,
    _who: Reader,
    dataset: Annotated[str | None, Query(description="one dataset (default: all)")] = None,
    force: Annotated[bool, Query(description="as apply --force would")] = False,
) -> dict[str, Any]:
    """What apply would delete, why every other version is kept, objects and bytes freed."""
    return repository.retention.plan(dataset, force=force).to_json()


@router.post(
    "/retention/claims", response_model=RetentionClaimsOut, responses=errors(400, 404, 413)
)
def retention_claim(
    repository: RepositoryDep, who: Admin, body: RetentionClaimIn | None = None
) -> dict[str, Any]:
    """Release expired versions' data to the caller (admin scope): unfinished claims of the
    caller first, then new ones, each re-checked under its row lock; audited."""
    body = body if body is not None else RetentionClaimIn()
    claims = repository.retention.claim(
        actor=who.name,
        dataset=body.dataset,
        limit=body.limit,
        force=body.force,
        reason=body.reason,
        exclude=set(body.exclude),
    )
    return {"data": [c.to_json() for c in claims]}


@router.post(
    "/retention/deletable", response_model=DeletableOut, responses=errors(400, 404, 409, 413)
)
def retention_deletable(body: DeletableIn, repository: RepositoryDep, who: Admin) -> dict[str, Any]:
    """Which of a claimed version's objects the claimant may delete now (never one a live
    version references); the others with why they are kept."""
    allowed, kept = repository.retention.deletable(body.version, body.uris, actor=who.name)
    return {"deletable": allowed, "kept": kept}


@router.post(
    "/versions/{version_name}/retention-done",
    response_model=RetentionDoneOut,
    responses=errors(400, 404, 409, 413),
)
def retention_done(
    version_name: str, repository: RepositoryDep, who: Admin, body: RetentionDoneIn | None = None
) -> dict[str, Any]:
    """Record a claimed version's data deleted (idempotent; the claimant only): its row,
    digests, schema and lineage stay, and it reads as ``data deleted``."""
    body = body if body is not None else RetentionDoneIn()
    name = repository.retention.mark_deleted(
        version_name, actor=who.name, objects=body.objects, size=body.bytes, kept=body.kept
    )
    return {"name": name, "data_state": "deleted"}

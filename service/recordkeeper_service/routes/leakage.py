"""Leakage: ``/datasets/{name}/leakage-policy`` and ``/versions/{ref}/leakage``.

``PUT /datasets/{name}/leakage-policy`` (scope ``write``) sets a dataset's leakage policy:
``mode`` ``off`` (the default) | ``warn`` | ``refuse`` and ``max_rate``, the leak rate tolerated
per split pair.  Under a policy that is not ``off``, a commit carries the client's leakage check
of the staged splits (``POST /versions/{name}/commit`` ``leakage``), and the service refuses it
(``409 split_overlap``; ``409 leakage_check_missing`` without a check) or commits it with a
``leakage_warning``.  ``GET /versions/{ref}/leakage`` answers the check results stored for a
version (from its commit, or saved by ``recordkeeper check-leakage`` with ``PUT``).  The
service never reads shards: a policy guards against mistakes, not against a client that sends
a false result (docs/record-identity.md).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import Field

from recordkeeper.core.limits import MAX_INT64
from recordkeeper.core.record_identity import DEFAULT_WIDTH, MAX_WIDTH, MIN_WIDTH, IdentityKind
from recordkeeper_service.deps import Reader, RepositoryDep, Writer
from recordkeeper_service.repository.leakage import MAX_PAIRS
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, OutModel, errors

__all__ = [
    "LeakageOut",
    "LeakagePairIn",
    "LeakagePolicyIn",
    "LeakagePolicyOut",
    "LeakageResultIn",
    "LeakageWarningOut",
    "router",
]

_Count = Field(ge=0, le=MAX_INT64)


class LeakagePolicyIn(InModel):
    mode: Literal["off", "warn", "refuse"] = Field(
        description="off: commits are not checked; warn: committed, with a warning and an "
        "event, when splits overlap; refuse: such a commit is refused (409 split_overlap)"
    )
    max_rate: float = Field(
        default=0.0, ge=0.0, le=1.0, description="leak rate tolerated per split pair (0: none)"
    )


class LeakagePolicyOut(OutModel):
    dataset: str
    mode: str = Field(description="off, warn or refuse")
    max_rate: float
    source: str = Field(description="dataset (set for it) or default (none set: off)")
    updated_at: str | None
    updated_by: str | None


class LeakagePairIn(InModel):
    split: str = Field(min_length=1, max_length=64, description="the evaluation split")
    other_ref: str = Field(
        min_length=1, max_length=256, description="the version of the other split (its name)"
    )
    other_split: str = Field(min_length=1, max_length=64)
    records: int = Field(ge=0, le=MAX_INT64, description="records of the evaluation split")
    leaked: int = Field(ge=0, le=MAX_INT64, description="… whose identity occurs there")
    distinct: int = Field(ge=0, le=MAX_INT64, description="distinct identities shared")


class LeakageResultIn(InModel):
    kind: IdentityKind = Field(default="bytes", description="record identity: bytes or example")
    width: int = Field(default=DEFAULT_WIDTH, ge=MIN_WIDTH, le=MAX_WIDTH)
    pairs: list[LeakagePairIn] = Field(max_length=MAX_PAIRS)


class WarningPairOut(OutModel):
    """One split pair's leakage counts (a commit's warning lists those above max_rate)."""

    split: str
    other_ref: str
    other_split: str
    records: int
    leaked: int
    distinct: int
    rate: float = Field(description="leaked / records")


class LeakagePairOut(WarningPairOut):
    """A stored pair: its counts, the identity they were counted with, and who sent them."""

    kind: str
    width: int
    source: str = Field(description="commit (checked at commit) or check (check-leakage)")
    computed_at: str
    computed_by: str = Field(description="the token that sent it")


class LeakageOut(OutModel):
    version: str
    data: list[LeakagePairOut]
    count: int


class LeakageWarningOut(OutModel):
    mode: str
    max_rate: float
    missing: bool = Field(description="true: the commit carried no leakage check")
    pairs: list[WarningPairOut] = Field(description="the pairs above max_rate")


router = APIRouter(tags=["record identity"], responses=AUTHENTICATED)


@router.put(
    "/datasets/{name}/leakage-policy",
    response_model=LeakagePolicyOut,
    responses=errors(400, 413),
)
def set_leakage_policy(
    name: str, body: LeakagePolicyIn, repository: RepositoryDep, who: Writer
) -> dict[str, Any]:
    """Set a dataset's leakage policy, enforced when its versions are committed (the dataset
    need not exist yet)."""
    return repository.leakage.set_policy(
        name, mode=body.mode, max_rate=body.max_rate, actor=who.name
    )


@router.get(
    "/datasets/{name}/leakage-policy", response_model=LeakagePolicyOut, responses=errors(400)
)
def leakage_policy(name: str, repository: RepositoryDep, _who: Reader) -> dict[str, Any]:
    """A dataset's leakage policy (``source: default``, mode ``off``, when none was set)."""
    return repository.leakage.policy(name)


@router.get("/versions/{ref}/leakage", response_model=LeakageOut, responses=errors(400, 404))
def version_leakage(ref: str, repository: RepositoryDep, _who: Reader) -> dict[str, Any]:
    """The leakage check results stored for a version, one per split pair (empty: none)."""
    return repository.leakage.of_version(ref)


@router.put(
    "/versions/{ref}/leakage", response_model=LeakageOut, responses=errors(400, 404, 413, 422)
)
def save_version_leakage(
    ref: str, body: LeakageResultIn, repository: RepositoryDep, who: Writer
) -> dict[str, Any]:
    """Store a leakage check of a committed version (``recordkeeper check-leakage``); its pairs
    replace stored pairs of the same splits."""
    return repository.leakage.save(ref, body.model_dump(), actor=who.name)

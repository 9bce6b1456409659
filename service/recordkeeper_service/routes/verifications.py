"""Verification failures reported by clients: ``POST /versions/{ref}/verifications``.

A client whose verification of a version finds problems (``DatasetVersion.verify``) reports
them here, best-effort: the service records an audit event (``version.verification_failed``)
and counts the problems in ``recordkeeper_verification_failures_total{reason, mode}``, so a
store that loses or changes shards shows on a dashboard before anyone reads a training log.
It needs only the ``read`` scope: verifying is what readers (training jobs) do.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from recordkeeper.core.limits import MAX_INT64, MAX_SHARDS_PER_REQUEST
from recordkeeper.core.verification import Mode, Reason
from recordkeeper_service.deps import Reader, RepositoryDep
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, OutModel, errors

__all__ = ["ProblemIn", "VerificationIn", "VerificationOut", "router"]


class ProblemIn(InModel):
    shard: str = Field(max_length=200, examples=["train-00003-of-00016"])
    reason: Reason


class VerificationIn(InModel):
    mode: Mode = Field(description="`fast` (storage identities) or `deep` (bytes re-read)")
    checked: int = Field(ge=0, le=MAX_INT64, description="how many shards were checked")
    problems: list[ProblemIn] = Field(max_length=MAX_SHARDS_PER_REQUEST)


class VerificationOut(OutModel):
    version: str
    mode: str
    checked: int
    problems: int


router = APIRouter(tags=["versions"], responses=AUTHENTICATED)


@router.post(
    "/versions/{ref}/verifications",
    response_model=VerificationOut,
    status_code=201,
    responses=errors(400, 404, 413),
)
def report_verification(
    ref: str, body: VerificationIn, repository: RepositoryDep, who: Reader
) -> dict[str, Any]:
    """Report a client's verification of a version that found problems."""
    record = repository.verifications.report(
        ref,
        mode=body.mode,
        checked=body.checked,
        problems=[(p.shard, p.reason) for p in body.problems],
        actor=who.name,
    )
    return record.to_json()

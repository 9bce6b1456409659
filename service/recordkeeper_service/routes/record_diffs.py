"""Stored record diffs: ``/versions/{a}/record-diffs/{b}``.

``PUT /versions/{a}/record-diffs/{b}`` (scope ``write``) stores the summary of the record diff
A → B a client computed from the two versions' record indexes (``recordkeeper diff A B
--records`` sends it; the service never reads storage): per split the records on each side,
added, removed, common, moved in and out, duplicates and a few identities
(:mod:`recordkeeper.core.record_diff_summary` is the document's rule).  The service checks it
against both versions' record counts and split set digests (``422 invalid_record_diff``).
``GET /versions/{a}/record-diffs/{b}`` lists the diffs stored for the pair, one per identity
kind and width (empty: none computed yet).  The UI's compare page shows them.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field, StringConstraints

from recordkeeper.core.limits import MAX_INT64
from recordkeeper.core.record_diff_summary import MAX_DIFF_SAMPLE, MAX_DIFF_SPLITS
from recordkeeper.core.record_identity import DEFAULT_WIDTH, MAX_WIDTH, MIN_WIDTH, IdentityKind
from recordkeeper_service.deps import Reader, RepositoryDep, Writer
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, OutModel, errors

__all__ = ["RecordDiffIn", "RecordDiffOut", "RecordDiffsOut", "router"]

Count = Annotated[int, Field(ge=0, le=MAX_INT64)]
Identity = Annotated[str, StringConstraints(max_length=2 * MAX_WIDTH)]
Identities = Annotated[list[Identity], Field(max_length=MAX_DIFF_SAMPLE)]


class SplitRecordDiffIn(InModel):
    split: str = Field(min_length=1, max_length=64, examples=["train"])
    records_a: Count = Field(description="records of the split in A (copies counted)")
    records_b: Count = Field(description="records of the split in B")
    added: Count
    removed: Count
    common: Count
    moved_in: Count = Field(description="distinct identities moved here from another split")
    moved_out: Count = Field(description="distinct identities moved from here to another split")
    duplicates_a: Count = Field(description="extra copies of a record within the split in A")
    duplicates_b: Count
    sample_added: Identities = Field(description="identities added, as hex")
    sample_removed: Identities = Field(description="identities removed, as hex")


class RecordDiffIn(InModel):
    kind: IdentityKind = Field(default="bytes", description="`bytes` or `example`")
    width: int = Field(default=DEFAULT_WIDTH, ge=MIN_WIDTH, le=MAX_WIDTH)
    new: Count = Field(description="distinct identities in B and in no split of A")
    gone: Count = Field(description="distinct identities in A and in no split of B")
    splits: list[SplitRecordDiffIn] = Field(max_length=MAX_DIFF_SPLITS)


class SplitRecordDiffOut(OutModel):
    split: str
    records_a: int
    records_b: int
    added: int
    removed: int
    common: int
    moved_in: int
    moved_out: int
    duplicates_a: int
    duplicates_b: int
    sample_added: list[str]
    sample_removed: list[str]


class RecordDiffOut(OutModel):
    a: str = Field(description="version A (the diff is A → B)")
    b: str
    kind: str
    width: int
    identical: bool = Field(description="no split added or removed a record")
    new: int
    gone: int
    splits: list[SplitRecordDiffOut]
    recorded_at: str
    recorded_by: str = Field(description="the token that sent it")


class RecordDiffsOut(OutModel):
    data: list[RecordDiffOut]
    count: int


router = APIRouter(tags=["record identity"], responses=AUTHENTICATED)


@router.put(
    "/versions/{ref}/record-diffs/{other}",
    response_model=RecordDiffOut,
    responses=errors(400, 404, 413),
)
def record_record_diff(
    ref: str, other: str, body: RecordDiffIn, repository: RepositoryDep, who: Writer
) -> dict[str, Any]:
    """Store the record diff ``ref`` → ``other`` a client computed from their record indexes."""
    return repository.record_diffs.record(ref, other, body.model_dump(), actor=who.name)


@router.get(
    "/versions/{ref}/record-diffs/{other}",
    response_model=RecordDiffsOut,
    responses=errors(400, 404),
)
def stored_record_diffs(
    ref: str, other: str, repository: RepositoryDep, who: Reader
) -> dict[str, Any]:
    """The record diffs stored for ``ref`` → ``other`` (one per identity kind and width)."""
    data = repository.record_diffs.of_pair(ref, other)
    return {"data": data, "count": len(data)}

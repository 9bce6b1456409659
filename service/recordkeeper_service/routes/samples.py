"""Sample records of versions: ``/versions/{ref}/sample``.

``PUT /versions/{ref}/sample`` (scope ``write``) stores the first few records of each split,
decoded for people to read, as the publishing client recorded them (the service never reads
shards; :mod:`recordkeeper.core.record_sample` is the document's rule: shape, split names, text,
numbers, at most 32 KiB).  A committed version may get one at any time (its records are
immutable); sending again replaces it.  ``GET /versions/{ref}/sample`` answers it, or ``404
sample_not_found``.  The UI's version page shows it as "Sample records".
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import Field

from recordkeeper.core.record_sample import MAX_SAMPLE_RECORDS, MAX_SAMPLE_SPLITS
from recordkeeper_service.deps import Reader, RepositoryDep, Writer
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, OutModel, errors

__all__ = ["SampleIn", "SampleOut", "router"]


class SampleRecord(InModel):
    index: int = Field(ge=0, description="the record's position in its split")
    size: int = Field(ge=0, description="the record's size in bytes")
    kind: Literal["example", "bytes"] = Field(description="`example` (decoded) or `bytes`")
    features: dict[str, Any] | str = Field(
        description="feature name → values (an Example); a hex prefix (other records)"
    )


class SampleSplit(InModel):
    split: str = Field(min_length=1, max_length=64, examples=["train"])
    records: list[SampleRecord] = Field(max_length=MAX_SAMPLE_RECORDS)


class SampleIn(InModel):
    splits: list[SampleSplit] = Field(max_length=MAX_SAMPLE_SPLITS)
    source: Literal["publish", "attach"] = Field(
        default="attach", description="`publish` (sent while publishing) or `attach` (later)"
    )


class SampleRecordOut(OutModel):
    index: int
    size: int
    kind: str
    features: dict[str, Any] | str


class SampleSplitOut(OutModel):
    split: str
    records: list[SampleRecordOut]


class SampleOut(OutModel):
    version: str
    splits: list[SampleSplitOut]
    source: str = Field(description="`publish` or `attach`")
    recorded_at: str
    recorded_by: str = Field(description="the token that sent it")


router = APIRouter(tags=["versions"], responses=AUTHENTICATED)


@router.put(
    "/versions/{ref}/sample", response_model=SampleOut, responses=errors(400, 404, 413, 422)
)
def attach_sample(
    ref: str, body: SampleIn, repository: RepositoryDep, who: Writer
) -> dict[str, Any]:
    """Store a committed version's sample records (decoded by the client that read them)."""
    document = {"splits": [s.model_dump() for s in body.splits]}
    return repository.samples.attach(ref, document, source=body.source, actor=who.name)


@router.get("/versions/{ref}/sample", response_model=SampleOut, responses=errors(400, 404))
def version_sample(ref: str, repository: RepositoryDep, who: Reader) -> dict[str, Any]:
    """A version's sample records, as its publisher recorded them (404 `sample_not_found`)."""
    return repository.samples.of_version(ref)

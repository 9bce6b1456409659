"""Record identity of versions: ``/versions/{ref}/record-sets`` and ``/record-sets/{digest}``.

``PUT /versions/{ref}/record-sets`` (scope ``write``) registers what ``recordkeeper index REF``
computed from the version's per-shard record indexes: each split's record count and set digest.
The service checks the counts against the version's shards and computes the version's
``records_digest`` (docs/record-identity.md).  ``GET /versions/{ref}/record-sets`` lists a
version's record identities (empty: none yet); ``GET /record-sets/{digest}`` finds the committed
versions with exactly these records, whatever their sharding, order or compression.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import Field

from recordkeeper.core.errors import InvalidRequest
from recordkeeper.core.limits import MAX_INT64
from recordkeeper.core.record_identity import (
    DEFAULT_WIDTH,
    MAX_RECORD_SET_SPLITS,
    MAX_WIDTH,
    MIN_WIDTH,
    IdentityKind,
)
from recordkeeper.core.record_index import FORMAT_VERSION
from recordkeeper_service.deps import Reader, RepositoryDep, Writer
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, OutModel, errors

__all__ = ["RecordSetIn", "RecordSetOut", "RecordSetsOut", "SplitDigest", "router"]

_DIGEST = r"^sha256:[0-9a-f]{64}$"


class SplitDigest(InModel):
    split: str = Field(min_length=1, max_length=64, examples=["train"])
    records: int = Field(ge=0, le=MAX_INT64, description="records in the split")
    digest: str = Field(pattern=_DIGEST, description="the split's set digest")


class RecordSetIn(InModel):
    kind: IdentityKind = Field(default="bytes", description="`bytes` or `example`")
    width: int = Field(default=DEFAULT_WIDTH, ge=MIN_WIDTH, le=MAX_WIDTH)
    index_format: int = Field(default=FORMAT_VERSION, ge=1, le=2**15)
    splits: list[SplitDigest] = Field(max_length=MAX_RECORD_SET_SPLITS)
    index_location: str = Field(
        max_length=4096, description="where the per-shard indexes are (a URI template)"
    )


class SplitDigestOut(OutModel):
    split: str
    records: int
    digest: str


class RecordSetOut(OutModel):
    version: str
    kind: str
    width: int
    index_format: int
    records_digest: str = Field(description="the version's order-invariant record digest")
    record_count: int
    splits: list[SplitDigestOut]
    index_location: str
    created_at: str
    created_by: str


class RecordSetsOut(OutModel):
    data: list[RecordSetOut]
    count: int


router = APIRouter(tags=["record identity"], responses=AUTHENTICATED)


@router.put(
    "/versions/{ref}/record-sets",
    response_model=RecordSetOut,
    responses=errors(400, 404, 413),
)
def register_record_set(
    ref: str, body: RecordSetIn, repository: RepositoryDep, who: Writer
) -> dict[str, Any]:
    """Register a committed version's record identity (split set digests)."""
    splits = {s.split: (s.records, s.digest) for s in body.splits}
    if len(splits) != len(body.splits):
        raise InvalidRequest("a split is named twice")
    return repository.record_sets.register(
        ref,
        kind=body.kind,
        width=body.width,
        index_format=body.index_format,
        splits=splits,
        index_location=body.index_location,
        actor=who.name,
    )


@router.get("/versions/{ref}/record-sets", response_model=RecordSetsOut, responses=errors(400, 404))
def version_record_sets(ref: str, repository: RepositoryDep, who: Reader) -> dict[str, Any]:
    """The record identities registered for a version."""
    data = repository.record_sets.of_version(ref)
    return {"data": data, "count": len(data)}


@router.get("/record-sets/{digest}", response_model=RecordSetsOut, responses=errors(400))
def find_record_sets(
    digest: Annotated[str, Path(pattern=r"^(sha256:)?[0-9a-f]{64}$")],
    repository: RepositoryDep,
    who: Reader,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """Committed versions with exactly these records (by their records digest)."""
    data = repository.record_sets.find(digest, limit=limit)
    return {"data": data, "count": len(data)}

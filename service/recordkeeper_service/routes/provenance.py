"""Provenance of versions: the request and answer shapes, replacing a staged version's
provenance, a dataset's history (``log``), and the versions made from a version or a source.

Provenance is given when a version is staged (``StageIn.provenance``), may be replaced while it
is staged (``PUT /versions/{version_name}/provenance``), and is part of every version answer
(``VersionOut.provenance``).  The rules are :mod:`recordkeeper.core.provenance`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import ConfigDict, Field

from recordkeeper.core.limits import MAX_INT64
from recordkeeper_service.deps import Limit, Offset, Reader, RepositoryDep, Writer
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, OutModel, errors

__all__ = [
    "EnvironmentOut",
    "LogEntryOut",
    "LogOut",
    "ParentIn",
    "ParentOut",
    "ProducerOut",
    "ProvenanceIn",
    "ProvenanceOut",
    "SourceIdentityOut",
    "SourceOut",
    "router",
]


class ParentIn(InModel):
    ref: str = Field(description="any reference to a committed version", examples=["coco@v2"])
    role: str = Field(
        default="source",
        description="base (at most one: the version this one is a change of), source, labels, "
        "or a lowercase slug [a-z][a-z0-9_-]{0,31}",
    )


class SourceIdentityIn(InModel):
    method: str = Field(description="listing (sizes and identity tokens) or sha256 (contents)")
    digest: str = Field(description="sha256:<64 hex> over the listing")
    files: int = Field(ge=0, le=MAX_INT64, description="objects listed")
    size: int = Field(ge=0, le=MAX_INT64, description="their total size in bytes")


class SourceIn(InModel):
    uri: str = Field(examples=["gs://raw/coco/annotations/"])
    identity: SourceIdentityIn | None = None


class ProducerIn(InModel):
    vcs: str = Field(default="unknown", description="git, or unknown (no git, not a repository)")
    commit: str | None = None
    remote: str | None = Field(default=None, description="never with user:password@")
    branch: str | None = None
    dirty: bool | None = None
    diff_digest: str | None = Field(default=None, description="sha256 of the uncommitted diff")
    entry: str | None = Field(default=None, description="entry script, relative to the repo root")


class EnvironmentIn(InModel):
    """Versions only: any other field (an environment variable) is refused, not ignored."""

    model_config = ConfigDict(extra="forbid", strict=True)

    python: str | None = None
    tensorflow: str | None = None
    recordkeeper: str | None = None


class ProvenanceIn(InModel):
    """Where a version comes from (docs/provenance.md).  Every part is optional."""

    parents: list[ParentIn] = Field(default_factory=list)
    sources: list[SourceIn] = Field(default_factory=list)
    producer: ProducerIn | None = None
    params: dict[str, Any] | None = Field(
        default=None, description="a JSON object; stored canonically, at most 64 KiB"
    )
    params_digest: str | None = Field(
        default=None, description="if sent, must be the sha256 of the params' canonical form"
    )
    command: list[str] | None = None
    environment: EnvironmentIn | None = None
    note: str | None = None

    def document(self) -> dict[str, Any]:
        """The document as sent, for :func:`recordkeeper.core.provenance.validate_provenance`."""
        return self.model_dump()


class ParentOut(OutModel):
    name: str
    dataset: str
    number: int | None
    role: str


class SourceIdentityOut(OutModel):
    method: Literal["listing", "sha256"]
    digest: str
    files: int
    size: int


class SourceOut(OutModel):
    uri: str
    identity: SourceIdentityOut | None


class ProducerOut(OutModel):
    vcs: Literal["git", "unknown"]
    commit: str | None
    remote: str | None
    branch: str | None
    dirty: bool | None
    diff_digest: str | None
    entry: str | None


class EnvironmentOut(OutModel):
    python: str | None
    tensorflow: str | None
    recordkeeper: str | None


class ProvenanceOut(OutModel):
    """A version's provenance; every part empty (``[]``/``null``) when it recorded none."""

    parents: list[ParentOut]
    sources: list[SourceOut]
    producer: ProducerOut | None
    params: dict[str, Any] | None
    params_digest: str | None
    command: list[str] | None
    environment: EnvironmentOut | None
    note: str | None


class ChangeOut(OutModel):
    shards_added: int
    shards_removed: int
    shards_changed: int
    records_added: int
    records_removed: int
    renamed_splits: dict[str, str] = Field(
        default_factory=dict,
        description="splits the derivation renamed, old name → new (their shards count as "
        "removed and added: shards are matched by split and index)",
    )


class LogEntryOut(OutModel):
    name: str
    number: int | None
    date: str
    desc: str | None
    state: str
    committed_at: str | None
    created_by: str
    record_count: int
    shard_count: int
    parents: list[ParentOut]
    commit: str | None = Field(description="the producer's git commit, if recorded")
    dirty: bool | None
    compared_with: str | None = Field(
        description="the base parent, or else the previous version of the dataset; null for "
        "the first"
    )
    change: ChangeOut | None = Field(description="what changed against compared_with")


class LogOut(OutModel):
    dataset: str
    data: list[LogEntryOut]
    count: int
    limit: int
    offset: int


class DerivedOut(OutModel):
    name: str
    dataset: str
    number: int | None
    state: str
    role: str | None = Field(description="the role the version has as a parent (children)")
    identity_digest: str | None = Field(
        description="the source's identity when the version recorded it (from a source)"
    )


class DerivedListOut(OutModel):
    data: list[DerivedOut]


router = APIRouter(tags=["provenance"], responses=AUTHENTICATED)


@router.put(
    "/versions/{version_name}/provenance",
    response_model=ProvenanceOut,
    responses=errors(400, 404, 409, 413),
)
def set_provenance(
    version_name: str, body: ProvenanceIn, repository: RepositoryDep, who: Writer
) -> dict[str, Any]:
    """Replace a staged version's provenance; a committed version's is immutable (``409
    provenance_immutable``)."""
    record = repository.versions.set_provenance(version_name, body.document(), actor=who.name)
    return record.to_json()["provenance"]


@router.get("/datasets/{name}/log", response_model=LogOut, responses=errors(400, 404))
def dataset_log(
    name: str,
    repository: RepositoryDep,
    _who: Reader,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Offset = 0,
) -> dict[str, Any]:
    """The dataset's committed and deprecated versions, newest first, like ``git log``: each
    with its parents, producer commit and what changed against its base parent (or else the
    previous version)."""
    return repository.provenance.log(name, limit=limit, offset=offset)


@router.get("/versions/{ref}/children", response_model=DerivedListOut, responses=errors(400, 404))
def version_children(ref: str, repository: RepositoryDep, _who: Reader) -> dict[str, Any]:
    """The versions (staged ones too) that name this version as a parent, with their role."""
    return {"data": repository.provenance.children(ref)}


@router.get("/sources/versions", response_model=DerivedListOut, responses=errors(400))
def versions_from_source(
    repository: RepositoryDep,
    _who: Reader,
    uri: Annotated[str, Query(description="a source URI exactly as recorded")],
    limit: Limit = 100,
) -> dict[str, Any]:
    """The versions that recorded ``uri`` as a source, with the identity each recorded."""
    return {"data": repository.provenance.from_source(uri, limit=limit)}

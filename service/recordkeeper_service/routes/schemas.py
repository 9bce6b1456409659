"""Schemas (the TFRecord feature schemas): by digest, or a version's merged schema."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from recordkeeper_service.deps import Reader, RepositoryDep
from recordkeeper_service.routes.common import AUTHENTICATED, OutModel, errors

__all__ = ["SchemaOut", "router"]


class SchemaOut(OutModel):
    digest: str
    schema_: dict[str, Any] = Field(alias="schema")


router = APIRouter(tags=["schemas"], responses=AUTHENTICATED | errors(400, 404))


@router.get("/versions/{ref}/schema", response_model=SchemaOut)
def version_schema(ref: str, repository: RepositoryDep, _who: Reader) -> dict[str, Any]:
    """The merged schema of a version (``404 schema_not_found`` before commit)."""
    return repository.schemas.of_version(ref).to_json()


@router.get("/schemas/{digest}", response_model=SchemaOut)
def get_schema(digest: str, repository: RepositoryDep, _who: Reader) -> dict[str, Any]:
    """A stored schema by its digest ``sha256:<64 hex>``."""
    return repository.schemas.get(digest).to_json()

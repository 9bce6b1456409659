"""Schemas: by digest, or a version's merged schema."""

from __future__ import annotations

from fastapi import APIRouter

from recordkeeper_service.api_models import SchemaOut
from recordkeeper_service.deps import Reader, RepositoryDep
from recordkeeper_service.responses import JSON

router = APIRouter(tags=["schemas"])


@router.get("/versions/{ref}/schema", response_model=SchemaOut)
def version_schema(ref: str, repository: RepositoryDep, _who: Reader) -> JSON:
    """The merged schema of a version (``404 schema_not_found`` before commit)."""
    return JSON(repository.schemas.of_version(ref).to_json())


@router.get("/schemas/{digest}", response_model=SchemaOut)
def get_schema(digest: str, repository: RepositoryDep, _who: Reader) -> JSON:
    """A stored schema by its digest ``sha256:<64 hex>``."""
    return JSON(repository.schemas.get(digest).to_json())

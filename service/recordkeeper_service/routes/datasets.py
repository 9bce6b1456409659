"""Datasets: ``POST /datasets``, ``GET /datasets``, ``GET /datasets/{name}``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import Field

from recordkeeper_service.deps import Limit, Offset, Reader, RepositoryDep, Writer
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, ListOut, OutModel, errors

__all__ = ["DatasetIn", "DatasetOut", "router"]


class DatasetIn(InModel):
    name: str = Field(examples=["coco"])
    description: str = ""


class DatasetOut(OutModel):
    name: str
    description: str
    created_at: str
    created_by: str
    version_count: int
    latest: str | None


router = APIRouter(prefix="/datasets", tags=["datasets"], responses=AUTHENTICATED)


@router.post("", status_code=201, response_model=DatasetOut, responses=errors(400, 409, 413))
def create_dataset(body: DatasetIn, repository: RepositoryDep, who: Writer) -> dict[str, Any]:
    """Create a dataset (``409 dataset_exists`` if the name is taken)."""
    return repository.datasets.create(body.name, body.description, actor=who.name).to_json()


@router.get("", response_model=ListOut[DatasetOut])
def list_datasets(
    repository: RepositoryDep,
    _who: Reader,
    prefix: Annotated[str | None, Query(max_length=64)] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Datasets by name, optionally only names starting with ``prefix``."""
    return repository.datasets.list(prefix=prefix, limit=limit, offset=offset).to_json()


@router.get("/{name}", response_model=DatasetOut, responses=errors(404))
def get_dataset(name: str, repository: RepositoryDep, _who: Reader) -> dict[str, Any]:
    """One dataset with its version count and latest committed version."""
    return repository.datasets.get(name).to_json()

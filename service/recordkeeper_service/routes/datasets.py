"""Datasets: ``POST /datasets``, ``GET /datasets``, ``GET /datasets/{name}``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from recordkeeper_service.api_models import DatasetCreate, DatasetOut, ListOut
from recordkeeper_service.deps import Limit, Offset, Reader, RepositoryDep, Writer
from recordkeeper_service.responses import JSON

router = APIRouter(prefix="/datasets", tags=["datasets"])


@router.post("", status_code=201, response_model=DatasetOut)
def create_dataset(body: DatasetCreate, repository: RepositoryDep, who: Writer) -> JSON:
    """Create a dataset (``409 dataset_exists`` if the name is taken)."""
    record = repository.datasets.create(body.name, body.description, actor=who.name)
    return JSON(record.to_json(), status_code=201)


@router.get("", response_model=ListOut[DatasetOut])
def list_datasets(
    repository: RepositoryDep,
    _who: Reader,
    prefix: Annotated[str | None, Query(max_length=64)] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> JSON:
    """Datasets by name, optionally only names starting with ``prefix``."""
    return JSON(repository.datasets.list(prefix=prefix, limit=limit, offset=offset).to_json())


@router.get("/{name}", response_model=DatasetOut)
def get_dataset(name: str, repository: RepositoryDep, _who: Reader) -> JSON:
    """One dataset with its version count and latest committed version."""
    return JSON(repository.datasets.get(name).to_json())

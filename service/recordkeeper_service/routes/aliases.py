"""Aliases: set/move, delete, list (with the implicit ``latest``), history."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import Field

from recordkeeper_service.deps import Limit, Offset, Reader, RepositoryDep, Writer
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, ListOut, OutModel, errors

__all__ = ["AliasHistoryOut", "AliasIn", "AliasOut", "router"]


class AliasIn(InModel):
    version: str = Field(examples=["coco@v3"])


class AliasOut(OutModel):
    dataset: str
    alias: str
    version: str
    updated_at: str | None
    updated_by: str | None


class AliasHistoryOut(OutModel):
    from_version: str | None
    to_version: str | None
    at: str
    by: str


router = APIRouter(
    prefix="/datasets/{name}/aliases", tags=["aliases"], responses=AUTHENTICATED | errors(404)
)


@router.put("/{alias}", response_model=AliasOut, responses=errors(400, 409, 413))
def set_alias(
    name: str, alias: str, body: AliasIn, repository: RepositoryDep, who: Writer
) -> dict[str, Any]:
    """Point an alias at a committed version of the dataset (creating or moving it)."""
    return repository.aliases.set(name, alias, body.version, actor=who.name).to_json()


@router.delete("/{alias}", status_code=204, response_class=Response, responses=errors(400))
def delete_alias(name: str, alias: str, repository: RepositoryDep, who: Writer) -> Response:
    """Remove an alias (its history stays)."""
    repository.aliases.delete(name, alias, actor=who.name)
    return Response(status_code=204)


@router.get("", response_model=ListOut[AliasOut])
def list_aliases(
    name: str, repository: RepositoryDep, _who: Reader, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    """The dataset's aliases; ``latest`` is listed first, computed."""
    return repository.aliases.list(name, limit=limit, offset=offset).to_json()


@router.get("/{alias}/history", response_model=ListOut[AliasHistoryOut], responses=errors(400))
def alias_history(
    name: str,
    alias: str,
    repository: RepositoryDep,
    _who: Reader,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Every move of the alias, newest first."""
    return repository.aliases.history(name, alias, limit=limit, offset=offset).to_json()

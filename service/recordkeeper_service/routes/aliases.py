"""Aliases: set/move, delete, list (with the implicit ``latest``), history."""

from __future__ import annotations

from fastapi import APIRouter, Response

from recordkeeper_service.api_models import AliasHistoryOut, AliasOut, AliasSet, ListOut
from recordkeeper_service.deps import Limit, Offset, Reader, RepositoryDep, Writer
from recordkeeper_service.responses import JSON

router = APIRouter(prefix="/datasets/{name}/aliases", tags=["aliases"])


@router.put("/{alias}", response_model=AliasOut)
def set_alias(
    name: str, alias: str, body: AliasSet, repository: RepositoryDep, who: Writer
) -> JSON:
    """Point an alias at a committed version of the dataset (creating or moving it)."""
    return JSON(repository.aliases.set(name, alias, body.version, actor=who.name).to_json())


@router.delete("/{alias}", status_code=204, response_class=Response)
def delete_alias(name: str, alias: str, repository: RepositoryDep, who: Writer) -> Response:
    """Remove an alias (its history stays)."""
    repository.aliases.delete(name, alias, actor=who.name)
    return Response(status_code=204)


@router.get("", response_model=ListOut[AliasOut])
def list_aliases(
    name: str, repository: RepositoryDep, _who: Reader, limit: Limit = 100, offset: Offset = 0
) -> JSON:
    """The dataset's aliases; ``latest`` is listed first, computed."""
    return JSON(repository.aliases.list(name, limit=limit, offset=offset).to_json())


@router.get("/{alias}/history", response_model=ListOut[AliasHistoryOut])
def alias_history(
    name: str,
    alias: str,
    repository: RepositoryDep,
    _who: Reader,
    limit: Limit = 100,
    offset: Offset = 0,
) -> JSON:
    """Every move of the alias, newest first."""
    return JSON(repository.aliases.history(name, alias, limit=limit, offset=offset).to_json())

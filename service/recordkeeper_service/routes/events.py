"""Audit events, newest first."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from recordkeeper_service.deps import Limit, Offset, Reader, RepositoryDep
from recordkeeper_service.routes.common import AUTHENTICATED, ListOut, OutModel

__all__ = ["EventOut", "router"]


class EventOut(OutModel):
    id: int
    at: str
    actor: str
    action: str
    dataset: str | None
    version: str | None
    detail: dict[str, Any]


router = APIRouter(prefix="/events", tags=["events"], responses=AUTHENTICATED)


@router.get("", response_model=ListOut[EventOut])
def list_events(
    repository: RepositoryDep,
    _who: Reader,
    dataset: Annotated[str | None, Query(max_length=64)] = None,
    version: Annotated[str | None, Query(max_length=200)] = None,
    action: Annotated[str | None, Query(max_length=64)] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Audit events, optionally of one dataset, version or action."""
    page = repository.events.list(
        dataset=dataset, version=version, action=action, limit=limit, offset=offset
    )
    return page.to_json()

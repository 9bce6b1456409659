"""Audit events, newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from recordkeeper_service.api_models import EventOut, ListOut
from recordkeeper_service.deps import Limit, Offset, Reader, RepositoryDep
from recordkeeper_service.responses import JSON

router = APIRouter(prefix="/events", tags=["events"])


@router.get("", response_model=ListOut[EventOut])
def list_events(
    repository: RepositoryDep,
    _who: Reader,
    dataset: Annotated[str | None, Query(max_length=64)] = None,
    version: Annotated[str | None, Query(max_length=200)] = None,
    action: Annotated[str | None, Query(max_length=64)] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> JSON:
    """Audit events, optionally of one dataset, version or action."""
    page = repository.events.list(
        dataset=dataset, version=version, action=action, limit=limit, offset=offset
    )
    return JSON(page.to_json())

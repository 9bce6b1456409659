"""HTTP routes, one router per resource, gathered into :data:`api_router` (under ``/api/v1``)
and :data:`probe_router` (``/healthz``, ``/readyz``)."""

from __future__ import annotations

from fastapi import APIRouter

from recordkeeper_service.lineage import routes as lineage
from recordkeeper_service.routes import (
    aliases,
    datasets,
    events,
    gc,
    health,
    info,
    schemas,
    tokens,
    versions,
)

__all__ = ["API_PREFIX", "api_router", "probe_router"]

API_PREFIX = "/api/v1"

api_router = APIRouter(prefix=API_PREFIX)
# versions first: its GET /versions/{ref} is the hot path and routes are matched in order
for module in (versions, info, datasets, aliases, schemas, events, tokens, lineage, gc):
    api_router.include_router(module.router)

probe_router = health.router

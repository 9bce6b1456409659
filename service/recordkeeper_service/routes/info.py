"""``GET /api/v1/info``: what clients need to know about this service."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request

from recordkeeper.core.limits import MAX_JSON_OBJECT_BYTES, MAX_SHARDS_PER_REQUEST
from recordkeeper.core.naming import CONVENTION
from recordkeeper.core.version import __version__
from recordkeeper_service.deps import Reader, SettingsDep
from recordkeeper_service.routes.common import AUTHENTICATED, OutModel

__all__ = ["InfoOut", "router"]


class InfoOut(OutModel):
    version: str
    naming_convention: str
    storage_root: str
    allowed_roots: list[str]
    auth: Literal["open", "token"]
    max_shards_per_request: int
    max_body_bytes: int
    max_small_body_bytes: int
    max_json_object_bytes: int


router = APIRouter(tags=["info"], responses=AUTHENTICATED)


@router.get("/info", response_model=InfoOut)
async def get_info(request: Request, settings: SettingsDep, _who: Reader) -> dict[str, Any]:
    """Service version, naming convention, storage roots and auth mode (for this request:
    ``token`` when it came through a proxy or from another site's page, see
    docs/security.md)."""
    authenticator = request.app.state.authenticator
    open_access = settings.open_access and authenticator.open_access_refusal(request.scope) is None
    return {
        "version": __version__,
        "naming_convention": CONVENTION,
        "storage_root": settings.storage_root,
        "allowed_roots": settings.allowed_roots,
        "auth": "open" if open_access else "token",
        "max_shards_per_request": MAX_SHARDS_PER_REQUEST,
        "max_body_bytes": settings.max_body_bytes,
        "max_small_body_bytes": min(settings.max_small_body_bytes, settings.max_body_bytes),
        "max_json_object_bytes": MAX_JSON_OBJECT_BYTES,
    }

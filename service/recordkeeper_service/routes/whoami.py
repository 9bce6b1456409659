"""``GET /api/v1/whoami``: who the caller is and what their token may do.

A user interface asks it once after login to decide which actions to offer: a ``read`` token
browses, write actions (deprecate, move an alias) appear only for ``write`` and ``admin``.  The
service still checks every request itself; this only avoids offering what would be refused.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

from recordkeeper_service.deps import Reader
from recordkeeper_service.routes.common import AUTHENTICATED, OutModel

__all__ = ["WhoamiOut", "router"]


class WhoamiOut(OutModel):
    name: str
    scope: Literal["read", "write", "admin"]
    token: bool


router = APIRouter(tags=["info"], responses=AUTHENTICATED)


@router.get("/whoami", response_model=WhoamiOut)
async def whoami(who: Reader) -> dict[str, Any]:
    """The caller's actor name and scope; ``token`` is false when served without one (open
    access on loopback, ``RECORDKEEPER_AUTH=auto``)."""
    return {"name": who.name, "scope": who.scope, "token": who.token_id is not None}

"""Typed FastAPI dependencies: the repository and the authenticated principal by scope.

Every route gets its data through :data:`RepositoryDep` (the app's one
:class:`~recordkeeper_service.repository.Repository`, built by ``create_app``): routes never
build a repository nor touch a database session.

``Reader``, ``Writer`` and ``Admin`` resolve to a :class:`~recordkeeper_service.auth.Principal`
whose scope is at least ``read``, ``write`` or ``admin``.  They are ``async`` and only hop to a
worker thread when a token has to be looked up, so open-access reads cost no extra thread switch.
They rest on :class:`BearerAuthentication`, the ``bearer`` HTTP security scheme, so the OpenAPI
document lists it (``components.securitySchemes``) on every authenticated operation; whether a
token is required is decided by :class:`~recordkeeper_service.auth.Authenticator`
(``RECORDKEEPER_AUTH``).

:data:`HeavyReads` is the per-process limit on answers that cost far more than the others (a diff
computed, a lineage graph): the thread pool runs at most :data:`HEAVY_READS` of them at once, and
further ones wait for a turn without taking CPU, so clients asking for many of them cannot take a
worker from every other reader.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Annotated

import anyio
from fastapi import Depends, Query, Request, Security
from fastapi.openapi.models import HTTPBearer as HTTPBearerModel
from fastapi.security.base import SecurityBase

from recordkeeper_service.auth import PRINCIPAL_KEY, Authenticator, Principal, requires_scope
from recordkeeper_service.repository import Repository
from recordkeeper_service.settings import Settings

__all__ = [
    "HEAVY_READS",
    "MAX_OFFSET",
    "Admin",
    "HeavyReads",
    "Limit",
    "Offset",
    "Reader",
    "RepositoryDep",
    "SettingsDep",
    "Writer",
]


async def get_repository(request: Request) -> Repository:
    repository: Repository = request.app.state.repository
    return repository


#: Expensive answers computed at once per worker process (see the module docstring).
HEAVY_READS = 1

_heavy_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = (
    weakref.WeakKeyDictionary()
)


async def get_heavy_reads() -> anyio.CapacityLimiter:
    """The limiter of expensive answers of this worker (one per event loop)."""
    loop = asyncio.get_running_loop()
    limiter = _heavy_limiters.get(loop)
    if limiter is None:
        limiter = _heavy_limiters[loop] = anyio.CapacityLimiter(HEAVY_READS)
    return limiter


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


class BearerAuthentication(SecurityBase):
    """The request's :class:`Principal`, declared to OpenAPI as the HTTP ``bearer`` scheme.

    A dependency that *is* the security scheme (rather than FastAPI's ``HTTPBearer`` plus a
    dependency reading it) costs no extra dependency level on the hot path.  The authenticator
    reads the header itself, so open access and the 401 messages stay exactly its own.  A
    request with a body was already authenticated by the request gate (before its body was
    read): its principal is reused, not looked up twice.
    """

    #: Any principal at all: the lowest scope (the request gate reads this mark).
    required_scope = "read"

    def __init__(self) -> None:
        self.model = HTTPBearerModel(
            description="an API token (`recordkeeper token create`); not needed when the service "
            "runs with RECORDKEEPER_AUTH=auto on a loopback address"
        )
        self.scheme_name = "bearer"

    async def __call__(self, request: Request) -> Principal:
        gated: Principal | None = request.scope.get(PRINCIPAL_KEY)
        if gated is not None:
            return gated
        authenticator: Authenticator = request.app.state.authenticator
        principal = await authenticator.principal_for(request.scope)
        request.scope[PRINCIPAL_KEY] = principal  # the request log names who it was
        return principal


get_principal = BearerAuthentication()

PrincipalDep = Annotated[Principal, Security(get_principal)]


@requires_scope("read")
async def require_read(principal: PrincipalDep) -> Principal:
    return principal.require("read")


@requires_scope("write")
async def require_write(principal: PrincipalDep) -> Principal:
    return principal.require("write")


@requires_scope("admin")
async def require_admin(principal: PrincipalDep) -> Principal:
    return principal.require("admin")


RepositoryDep = Annotated[Repository, Depends(get_repository)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
Reader = Annotated[Principal, Depends(require_read)]
Writer = Annotated[Principal, Depends(require_write)]
Admin = Annotated[Principal, Depends(require_admin)]
HeavyReads = Annotated[anyio.CapacityLimiter, Depends(get_heavy_reads)]
Limit = Annotated[int, Query(ge=1, le=1000, description="page size (1-1000)")]
#: Offsets are bound by SQL ``OFFSET`` (a signed 64-bit integer in SQLite and PostgreSQL).
MAX_OFFSET = 2**63 - 1
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="items to skip")]

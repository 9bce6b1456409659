"""The FastAPI application factory.

``create_app(settings)`` builds everything — engine, repository, authenticator, routes — and
nothing happens at import time.  On start-up (ASGI lifespan) the app refuses to run on a database
that is not at the migration head (see :mod:`recordkeeper_service.startup`).

``app_from_env()`` is the factory uvicorn workers import: it reads ``RECORDKEEPER_*`` settings
from the environment.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from recordkeeper.core.roots import AllowedRoots
from recordkeeper.core.version import __version__
from recordkeeper_service.auth import Authenticator
from recordkeeper_service.db import Database
from recordkeeper_service.handlers import install_error_handlers
from recordkeeper_service.limits import RequestGate
from recordkeeper_service.repository import Repository
from recordkeeper_service.routes import api_router, probe_router, ui_router
from recordkeeper_service.settings import Settings
from recordkeeper_service.startup import check_startup

__all__ = ["app_from_env", "create_app"]

DESCRIPTION = """\
Dataset versioning and lineage for TFRecord training data.

Errors answer `{"code", "detail", ...}` with an `X-Error-Code` header; see docs/rest-api.md.
"""


def create_app(settings: Settings | None = None, *, database: Database | None = None) -> FastAPI:
    """Build the service for ``settings`` (default: read from the environment).

    ``database`` lets a caller share an existing :class:`Database`; by default one is built from
    ``settings`` and disposed of when the app shuts down.
    """
    settings = settings if settings is not None else Settings()
    owns_database = database is None
    db = database or Database(settings.effective_database_url, pool_size=settings.db_pool_size)
    repository = Repository(
        db,
        allowed_roots=AllowedRoots.of(settings.allowed_roots),
        storage_root=settings.storage_root,
        version_cache_bytes=settings.version_cache_bytes,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(check_startup, settings, db)
        try:
            yield
        finally:
            await repository.versions.aclose()
            if owns_database:
                db.dispose()

    app = FastAPI(
        title="recordkeeper",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        # No 307 to a Location built from the Host header, before authentication: a path with a
        # trailing slash is simply not a route (404 not_found).
        redirect_slashes=False,
    )
    app.state.settings = settings
    app.state.repository = repository
    authenticator = Authenticator(
        repository.tokens,
        open_access=settings.open_access,
        trusted_proxies=settings.trusted_proxies,
    )
    app.state.authenticator = authenticator
    install_error_handlers(app)
    # Authentication before any body is read, then bounded bodies (see limits.py).
    app.add_middleware(
        RequestGate,
        routes=lambda: app.router.routes,
        authenticator=authenticator,
        max_body_bytes=settings.max_body_bytes,
        max_small_body_bytes=settings.max_small_body_bytes,
    )
    app.include_router(api_router)
    app.include_router(probe_router)
    app.include_router(ui_router)
    return app


def app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory``: settings from ``RECORDKEEPER_*`` variables."""
    return create_app(Settings())

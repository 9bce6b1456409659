"""The FastAPI application factory.

``create_app(settings)`` builds everything — engine, repository, authenticator, routes — and
nothing happens at import time.  On start-up (ASGI lifespan) the app refuses to run on a database
that is not at the migration head (see :mod:`recordkeeper_service.startup`).

``app_from_env()`` is the factory uvicorn workers import: it reads ``RECORDKEEPER_*`` settings
from the environment.

Operations (docs/operations.md): every request passes the request observer first (request id,
request log line, metrics: :func:`install_observability`); every response gets the browser
protections its content type calls for (:mod:`recordkeeper_service.protections`); ``/metrics``
serves the metrics (:func:`install_metrics_route`); ``/docs`` and ``/redoc`` use assets shipped
in the package, no CDN (:func:`install_api_docs`).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from recordkeeper.core.roots import AllowedRoots
from recordkeeper.core.version import __version__
from recordkeeper_service.auth import Authenticator
from recordkeeper_service.db import Database
from recordkeeper_service.handlers import install_error_handlers
from recordkeeper_service.head import HeadAsGet
from recordkeeper_service.limits import RequestGate
from recordkeeper_service.metrics import ServiceMetrics
from recordkeeper_service.observe import RequestObserver
from recordkeeper_service.protections import ResponseProtections
from recordkeeper_service.repository import Repository
from recordkeeper_service.routes import (
    API_PREFIX,
    api_docs,
    api_router,
    lineage,
    probe_router,
    ui_router,
    versions,
)
from recordkeeper_service.routes import metrics as metrics_routes
from recordkeeper_service.settings import Settings
from recordkeeper_service.startup import check_startup

__all__ = [
    "app_from_env",
    "create_app",
    "install_api_docs",
    "install_metrics_route",
    "install_observability",
]

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
    metrics = ServiceMetrics.from_environment()
    metrics.watch_pool(db.engine)
    repository = Repository(
        db,
        allowed_roots=AllowedRoots.of(settings.allowed_roots),
        storage_root=settings.storage_root,
        version_cache_bytes=settings.version_cache_bytes,
        shard_pages_cache_bytes=settings.shard_pages_cache_bytes,
        lineage_cache_bytes=settings.lineage_cache_bytes,
        metrics=metrics,
    )
    metrics.watch_cache("versions", repository.versions.cache)
    metrics.watch_cache("rendered_pages", repository.versions.rendered_pages)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(check_startup, settings, db)
        try:
            yield
        finally:
            await repository.versions.aclose()
            if owns_database:
                db.dispose()
            metrics.process_exited()

    app = FastAPI(
        title="recordkeeper",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        # No 307 to a Location built from the Host header, before authentication: a path with a
        # trailing slash is simply not a route (404 not_found).
        redirect_slashes=False,
        docs_url=None,  # served from the package instead: install_api_docs
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.metrics = metrics
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
    # HEAD as GET without the body, inside the request log and metrics (they record HEAD)
    app.add_middleware(HeadAsGet)
    # Frame and content-type protections on every response, by its type (protections.py)
    app.add_middleware(ResponseProtections)
    install_observability(app, settings, metrics)
    # The hot read path first: GET /api/v1/versions/{ref} in its common forms (routes/versions.py)
    app.router.routes.append(versions.hot_resolve_route(API_PREFIX))
    # and a checkpoint's upstream answer, a version's consumers (routes/lineage.py)
    app.router.routes.extend(lineage.hot_lineage_routes(API_PREFIX))
    app.include_router(api_router)
    app.include_router(probe_router)
    app.include_router(ui_router)
    install_metrics_route(app, settings)
    install_api_docs(app)
    return app


def install_observability(app: FastAPI, settings: Settings, metrics: ServiceMetrics) -> None:
    """Request ids, the request log line and request metrics, around everything else (the
    request gate's refusals included): add it after every other middleware.  With
    ``RECORDKEEPER_METRICS=off`` requests are not counted at all."""
    app.add_middleware(
        RequestObserver,
        routes=lambda: app.router.routes,
        metrics=None if settings.metrics == "off" else metrics,
        request_log=settings.request_log,
    )


def install_metrics_route(app: FastAPI, settings: Settings) -> None:
    """``GET /metrics`` for Prometheus, as ``RECORDKEEPER_METRICS`` allows (or none: ``off``)."""
    router = metrics_routes.router(settings.metrics)
    if router is not None:
        app.include_router(router)


def install_api_docs(app: FastAPI) -> None:
    """``/docs`` and ``/redoc`` with Swagger UI and ReDoc from the package (no CDN)."""
    api_docs.install(app)


#: How long a thread holds the GIL while another waits for it (CPython's default: 5 ms).  An
#: expensive answer computed in a worker thread (a diff, a lineage graph: deps.HeavyReads)
#: otherwise delays every step of the event loop's cheap requests by up to 5 ms.
WORKER_SWITCH_INTERVAL = 0.0005

#: The collector's youngest-generation threshold in a worker process (CPython's default: 700)
WORKER_GC_THRESHOLD = 20_000


def app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory``: settings from ``RECORDKEEPER_*`` variables.

    Called once in each worker process, which then serves requests until it exits: the
    objects made so far (modules, the app) are moved out of the collector's sight
    (``gc.freeze``), and the youngest generation is collected after 20,000 net allocations
    instead of 700.  A request that builds a few thousand objects at once (a long chain's
    lineage, a page of 10,000 shards) otherwise set off ~5 young collections each, and every
    ~50 requests a full one over the ~200,000 objects of the loaded service (~0.1 s): the
    objects of a request are freed by reference counting when it ends, so the collector only
    ever needs to find cycles, which the higher threshold still does.
    """
    app = create_app(Settings())
    sys.setswitchinterval(WORKER_SWITCH_INTERVAL)
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(WORKER_GC_THRESHOLD, older, oldest)
    return app

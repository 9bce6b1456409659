"""``GET /metrics``: the Prometheus text exposition (see :mod:`recordkeeper_service.metrics`).

Who may scrape it is ``RECORDKEEPER_METRICS`` (:func:`router`): ``read`` (the default) needs a
token with read scope, like every read of the API (anonymous callers where open access applies,
see docs/operations.md); ``public`` needs none; ``off`` leaves the route out.  The answer holds
counts per route template and status, never dataset names, paths or tokens.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from recordkeeper_service.deps import Reader
from recordkeeper_service.metrics import CONTENT_TYPE, ServiceMetrics
from recordkeeper_service.routes.common import AUTHENTICATED

__all__ = ["METRICS_PATH", "router"]

METRICS_PATH = "/metrics"


async def _exposition(request: Request) -> Response:
    metrics: ServiceMetrics = request.app.state.metrics
    # Reading every worker's file is blocking I/O: off the event loop.
    body = await run_in_threadpool(metrics.render)
    return Response(body, media_type=CONTENT_TYPE)


def router(access: str) -> APIRouter | None:
    """The ``/metrics`` router for ``RECORDKEEPER_METRICS=access`` (``None`` for ``off``)."""
    if access == "off":
        return None
    metrics_router = APIRouter(tags=["probes"])
    if access == "public":

        @metrics_router.get(METRICS_PATH, include_in_schema=False)
        async def metrics_public(request: Request) -> Response:
            """Prometheus metrics; no token needed (``RECORDKEEPER_METRICS=public``)."""
            return await _exposition(request)

    else:

        @metrics_router.get(METRICS_PATH, include_in_schema=False, responses=AUTHENTICATED)
        async def metrics_read(request: Request, _principal: Reader) -> Response:
            """Prometheus metrics; a token with read scope (``RECORDKEEPER_METRICS=read``)."""
            return await _exposition(request)

    return metrics_router

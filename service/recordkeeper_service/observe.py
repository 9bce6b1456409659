"""The request observer: request id, request log line and request metrics (a pure ASGI
middleware, the outermost of the app's own).

For every HTTP request it

1. takes the request's id (:func:`recordkeeper_service.request_ids.request_id_for`: the
   caller's ``X-Request-ID`` when well-formed, else a new one), leaves it in the ASGI scope and
   makes it current, so error bodies and log records carry it;
2. adds ``X-Request-ID`` to the response;
3. when the response is done, counts it in the metrics (route template, method, status,
   latency) and writes the request log line (:func:`recordkeeper_service.logs.log_request`),
   with the token's *name* when a token authenticated the request.

The route template is the one the router matched (``/api/v1/versions/{ref}``); a request
refused before routing (the request gate's ``401``/``413``) is matched here, and a path that no
route serves is ``unmatched``.  A request that fails with an unexpected error is counted and
logged as ``500``; the error answer itself is built by the app's ``500`` handler (it reads the
id from the scope).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from fastapi.routing import RouteContext, iter_route_contexts
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from recordkeeper_service.auth import PRINCIPAL_KEY
from recordkeeper_service.logs import log_request
from recordkeeper_service.metrics import UNMATCHED_ROUTE, ServiceMetrics
from recordkeeper_service.request_ids import (
    HEADER_NAME,
    REQUEST_ID_KEY,
    request_id_for,
    reset_current,
    set_current,
)

__all__ = ["RequestObserver"]


class RequestObserver:
    """See the module docstring.  ``metrics`` may be ``None`` (no metrics kept), and
    ``request_log=False`` turns the request log line off."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: Callable[[], Sequence[BaseRoute]],
        metrics: ServiceMetrics | None,
        request_log: bool = True,
    ) -> None:
        self.app = app
        self._routes = routes
        self.metrics = metrics
        self.request_log = request_log
        self._templates: dict[int, str] | None = None
        self._contexts: list[RouteContext] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = request_id_for(scope.get("headers", ()))
        scope[REQUEST_ID_KEY] = request_id
        header = (HEADER_NAME, request_id.encode("ascii"))
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", ()))
                if not any(name.lower() == HEADER_NAME for name, _ in headers):
                    headers.append(header)
                message = {**message, "headers": headers}
            await send(message)

        token = set_current(request_id)
        if self.metrics is not None:
            self.metrics.request_started()
        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            status = 500
            raise
        finally:
            if self.metrics is not None:
                self.metrics.request_ended()
            reset_current(token)
            self._record(scope, status, time.perf_counter() - started, request_id)

    def _record(self, scope: Scope, status: int, seconds: float, request_id: str) -> None:
        route = self.route_template(scope)
        method = scope["method"]
        if self.metrics is not None:
            self.metrics.observe_request(route, method, status, seconds)
        if self.request_log:
            principal = scope.get(PRINCIPAL_KEY)
            client = scope.get("client")
            log_request(
                method=method,
                route=route,
                path=scope.get("path", ""),
                status=status,
                duration_ms=seconds * 1000,
                request_id=request_id,
                token=principal.name if principal is not None else None,
                client=str(client[0]) if client else None,
            )

    def route_template(self, scope: Scope) -> str:
        """The template of the route that served (or would serve) the request in ``scope``."""
        if self._templates is None:
            self._contexts = list(iter_route_contexts(self._routes()))
            self._templates = {id(c.original_route): str(c.path) for c in self._contexts}
        route: Any = scope.get("route")
        if route is not None:
            template = self._templates.get(id(route))
            if template is not None:
                return template
        # Not routed (refused by the request gate before routing, or no such route): match.
        assert self._contexts is not None
        partial = None
        for context in self._contexts:
            match, _ = context.matches(scope)
            if match is Match.FULL:
                return str(context.path)
            if match is Match.PARTIAL and partial is None:
                partial = str(context.path)
        return partial or UNMATCHED_ROUTE

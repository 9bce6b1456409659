"""One family of exception handlers: every error leaves as ``{code, detail, ...}`` JSON.

=================================  ==============================================
raised                             answered
=================================  ==============================================
``RecordkeeperError``              its ``status``, ``to_dict()``
``RequestValidationError``         ``422 invalid_request`` with ``errors`` (capped,
                                   never echoing the input); a body nested too
                                   deeply to decode says so (``json_too_deep``)
Starlette ``HTTPException``        404 ``not_found``, 405 ``method_not_allowed``, …
anything else                      ``500 internal_error``; logged, no traceback sent
=================================  ==============================================

Every error response carries the ``X-Error-Code`` header, and the request's id in the body
(``request_id``) and the ``X-Request-ID`` header; every 401 a ``WWW-Authenticate: Bearer``
challenge; every 503 a ``Retry-After`` and a
generic detail (the database's own error text, which may name hosts, users or paths, goes to the
service log only — callers may not even be authenticated).  A 405 lists in ``Allow`` every
method the path answers (``HEAD`` wherever ``GET``: see :mod:`.head`).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match

from recordkeeper.core.errors import RecordkeeperError, code_for_status
from recordkeeper_service.head import request_method
from recordkeeper_service.protections import protect
from recordkeeper_service.request_ids import REQUEST_ID_KEY, current_request_id
from recordkeeper_service.responses import JSON

__all__ = [
    "AUTHENTICATE_CHALLENGE",
    "MAX_LISTED_ERRORS",
    "RETRY_AFTER_SECONDS",
    "UNAVAILABLE_DETAIL",
    "allowed_methods",
    "error_response",
    "install_error_handlers",
]

log = logging.getLogger("recordkeeper_service")

MAX_LISTED_ERRORS = 50
MAX_DETAIL_LENGTH = 1000
#: ``Retry-After`` on every 503: the outages seen (database restart, failover) last seconds.
RETRY_AFTER_SECONDS = 2
#: The challenge every 401 carries (RFC 9110 §11.6.1: a 401 must name how to authenticate).
AUTHENTICATE_CHALLENGE = 'Bearer realm="recordkeeper"'
#: What a 503 ``service_unavailable`` tells the caller; the real cause is logged.
UNAVAILABLE_DETAIL = (
    "the registry database is unavailable; retry later (the service log has the cause)"
)


def error_json(
    status: int, code: str, detail: str, *, request_id: str | None = None, **extra: Any
) -> JSON:
    """The error response: body ``{code, detail, **extra, request_id}`` plus ``X-Error-Code``
    and ``X-Request-ID`` (``request_id`` defaults to the current request's id, if any).

    A detail longer than :data:`MAX_DETAIL_LENGTH` (it may quote the offending input) is cut.
    ``service_unavailable`` always gets :data:`UNAVAILABLE_DETAIL` (whoever builds the response:
    a route, a handler or a middleware), every 503 a ``Retry-After``, every 401 a
    ``WWW-Authenticate`` challenge.
    """
    if code == "service_unavailable":
        detail = UNAVAILABLE_DETAIL
    if len(detail) > MAX_DETAIL_LENGTH:
        detail = detail[:MAX_DETAIL_LENGTH] + "… (truncated)"
    headers = {"X-Error-Code": code}
    if status == 503:
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    elif status == 401:
        headers["WWW-Authenticate"] = AUTHENTICATE_CHALLENGE
    body = {"code": code, "detail": detail, **extra}
    request_id = request_id or current_request_id()
    if request_id is not None:
        body["request_id"] = request_id
        headers["X-Request-ID"] = request_id
    return JSON(body, status_code=status, headers=headers)


def error_response(exc: RecordkeeperError) -> JSON:
    """The response for a recordkeeper error."""
    return error_json(exc.status, exc.code, exc.detail, **exc.extra)


async def _recordkeeper_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RecordkeeperError)
    if exc.status >= 500:
        log.warning("%s: %s", exc.code, exc.detail)
    return error_response(exc)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app answers on the request's path (for ``Allow``)."""
    scope = {**request.scope, "method": "", "path_params": {}}
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        if route.methods and route.matches(scope)[0] is not Match.NONE:
            methods.update(route.methods)
    if "GET" in methods:
        methods.add("HEAD")  # answered as GET without the body (head.py)
    return sorted(methods)


def _field_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    out = []
    for error in exc.errors()[:MAX_LISTED_ERRORS]:
        out.append(
            {
                "loc": [str(part) for part in error.get("loc", ())],
                "msg": str(error.get("msg", ""))[:300],
                "type": str(error.get("type", "")),
            }
        )
    return out


async def _validation_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = _field_errors(exc)
    if any(e["type"] == "json_invalid" for e in errors):
        detail = "the request body is not valid JSON"
    elif errors:
        first = errors[0]
        where = ".".join(first["loc"]) or "request"
        more = f" (and {len(exc.errors()) - 1} more problems)" if len(exc.errors()) > 1 else ""
        detail = f"{where}: {first['msg']}{more}"
    else:
        detail = "the request does not match the API"
    return error_json(422, "invalid_request", detail, errors=errors)


def max_json_depth() -> int:
    """About how deep the body decoder (``json``, recursive) can nest: a round figure below the
    interpreter's recursion limit, which it runs into (so the answer names no level it accepts)."""
    return (sys.getrecursionlimit() - 100) // 100 * 100


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and isinstance(exc.__cause__, RecursionError):
        # Valid JSON the decoder cannot descend into (Python's decoder recurses per level): say
        # so, it is not malformed.
        return error_json(
            422,
            "invalid_request",
            "the request body is nested too deeply to decode (arrays or objects more than about "
            f"{max_json_depth()} levels deep; no request of this API needs more than a few)",
            errors=[{"loc": ["body"], "msg": "nested too deeply", "type": "json_too_deep"}],
        )
    if exc.status_code == 400:
        # FastAPI's only 400: a JSON body it could not even decode (e.g. not UTF-8).  The
        # contract answers every malformed body with 422 invalid_request.
        return error_json(
            422,
            "invalid_request",
            "the request body is not valid JSON",
            errors=[{"loc": ["body"], "msg": str(exc.detail)[:300], "type": "json_invalid"}],
        )
    code = code_for_status(exc.status_code)
    if exc.status_code == 404:
        detail = f"no such route: {request_method(request)} {request.url.path}"
        if request.url.path.endswith("/") and request.url.path != "/":
            detail += " (paths take no trailing slash)"
    elif exc.status_code == 405:
        detail = f"{request_method(request)} is not allowed on {request.url.path}"
    else:
        detail = str(exc.detail)
    response = error_json(exc.status_code, code, detail)
    if exc.status_code == 405:
        response.headers["Allow"] = ", ".join(allowed_methods(request))
    for name, value in (exc.headers or {}).items():
        response.headers.setdefault(name, value)
    return response


async def _internal_error(request: Request, exc: Exception) -> Response:
    # Answered outside the request observer (Starlette's outermost middleware): the request's
    # id comes from the scope, where the observer left it.
    request_id = request.scope.get(REQUEST_ID_KEY)
    log.error(
        "internal error on %s %s",
        request.method,
        request.url.path,
        exc_info=exc,
        extra={"request_id": request_id},
    )
    response = error_json(
        500,
        "internal_error",
        "internal server error; the service log has details",
        request_id=request_id,
    )
    # Starlette re-raises after this answer and the server then drops the connection: say so.
    response.headers["Connection"] = "close"
    return protect(response)  # answered outside the middleware that protects every response


def install_error_handlers(app: FastAPI) -> None:
    """Register the handler family on ``app``."""
    app.add_exception_handler(RecordkeeperError, _recordkeeper_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)

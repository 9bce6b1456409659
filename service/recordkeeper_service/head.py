"""``HEAD`` answered as ``GET`` without the body, on every path (RFC 9110 §9.3.2).

FastAPI's routes answer only the methods they declare, so ``curl -I`` on any API path used to
get ``405``.  :class:`HeadAsGet` turns a ``HEAD`` request into a ``GET`` for everything inside
it (authentication, the route's scope, the route itself) and sends the ``GET``'s status and
headers — ``Content-Length`` and ``ETag`` included — without a byte of body.  The request log
and the metrics (outside it) still see ``HEAD``; error handlers name it through
:func:`request_method`.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HEAD_SCOPE_KEY", "HeadAsGet", "request_method"]

#: Set in the scope of a ``HEAD`` request answered as ``GET``.
HEAD_SCOPE_KEY = "recordkeeper.head"


class HeadAsGet:
    """ASGI middleware: ``HEAD`` → ``GET`` inside, the body dropped on the way out."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET", HEAD_SCOPE_KEY: True}, receive, send_headers_only)


def request_method(request: Request) -> str:
    """The method the client sent (``HEAD`` for one answered as ``GET``)."""
    return "HEAD" if request.scope.get(HEAD_SCOPE_KEY) else request.method

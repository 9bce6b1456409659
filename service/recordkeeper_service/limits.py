"""Request body size limit, as a pure ASGI middleware.

A declared ``Content-Length`` above the limit is refused before the body is read; a body sent
without one (chunked) is counted as it streams, and the first byte over the limit turns whatever
the application would have answered into ``413 payload_too_large``.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from recordkeeper.core.errors import InvalidRequest, PayloadTooLarge
from recordkeeper_service.handlers import error_response

__all__ = ["BodySizeLimit"]


class BodySizeLimit:
    """Refuse request bodies larger than ``max_bytes`` with ``413 payload_too_large``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(
            f"the request body is larger than {self.max_bytes} bytes "
            "(RECORDKEEPER_MAX_BODY_BYTES); send shards in several requests",
            max_bytes=self.max_bytes,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if isinstance(declared, InvalidRequest):
            await error_response(declared)(scope, receive, send)
            return
        if declared is not None and declared > self.max_bytes:
            await error_response(self._too_large())(scope, receive, send)
            return

        received = 0
        exceeded = False
        replaced = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    exceeded = True
                    raise self._too_large()
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal replaced
            if not exceeded:
                await send(message)
                return
            if not replaced:  # swap the app's answer (whatever it made of the error) for ours
                replaced = True
                await error_response(self._too_large())(scope, receive, send)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except PayloadTooLarge:
            if not replaced:
                replaced = True
                await error_response(self._too_large())(scope, receive, send)


def _content_length(scope: Scope) -> int | InvalidRequest | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return InvalidRequest("the Content-Length header is not an integer")
            if length < 0:
                return InvalidRequest("the Content-Length header is negative")
            return length
    return None

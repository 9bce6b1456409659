"""The browser protections every response carries, decided by its content type (one rule).

========================================  ==================================================
response                                  headers added (when the response has none of its own)
========================================  ==================================================
every one                                 ``X-Content-Type-Options: nosniff``
a document a browser draws (HTML, XHTML,  ``X-Frame-Options: DENY``, ``Content-Security-Policy:
SVG, or no content type at all)           frame-ancestors 'none'`` (added to a policy of the
                                          response's own that has no ``frame-ancestors``),
                                          ``Referrer-Policy: no-referrer``
========================================  ==================================================

So no page of the service — the UI, ``/docs``, ``/redoc``, a route added later — can be framed
by another site's page (clickjacking: under open loopback access, a framed ``/docs`` clicked
invisibly could create an admin token), and no answer is sniffed into another type.

:class:`ResponseProtections` applies the rule to every HTTP response passing through it (a pure
ASGI middleware, outside the request gate so its refusals are covered too);
:func:`protect` applies it to a response built outside the middleware stack (the ``500``
answer).
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "DOCUMENT_TYPES",
    "FRAME_ANCESTORS",
    "ResponseProtections",
    "protect",
    "protection_headers",
]

#: Media types a browser renders as a page of its own (and so could be framed and clicked).
DOCUMENT_TYPES = frozenset({"text/html", "application/xhtml+xml", "image/svg+xml"})
#: The CSP directive refusing every framing page.
FRAME_ANCESTORS = "frame-ancestors 'none'"

_NOSNIFF = (b"x-content-type-options", b"nosniff")
_DOCUMENT_HEADERS = (
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)


def _is_document(content_type: str | None) -> bool:
    if content_type is None:
        return True  # a browser sniffs nothing (nosniff) but may still draw it
    return content_type.split(";", 1)[0].strip().lower() in DOCUMENT_TYPES


def protection_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` (raw ASGI pairs) with the protections the rule adds (see the module
    docstring); headers the response set itself are kept."""
    out = list(headers)
    names = {name.lower() for name, _ in out}
    if _NOSNIFF[0] not in names:
        out.append(_NOSNIFF)
    content_type = next((v.decode("latin-1") for n, v in out if n.lower() == b"content-type"), None)
    if not _is_document(content_type):
        return out
    for name, value in _DOCUMENT_HEADERS:
        if name not in names:
            out.append((name, value))
    for index, (name, value) in enumerate(out):
        if name.lower() == b"content-security-policy":
            if b"frame-ancestors" not in value.lower():
                out[index] = (name, value + b"; " + FRAME_ANCESTORS.encode())
            break
    else:
        out.append((b"content-security-policy", FRAME_ANCESTORS.encode()))
    return out


def protect(response: Response) -> Response:
    """Apply the rule to ``response`` in place (for answers built outside the middleware)."""
    response.raw_headers[:] = protection_headers(response.raw_headers)
    return response


class ResponseProtections:
    """ASGI middleware: :func:`protection_headers` on every HTTP response start."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_protected(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": protection_headers(message.get("headers", ()))}
            await send(message)

        await self.app(scope, receive, send_protected)

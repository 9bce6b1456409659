"""The current request's id: taken from ``X-Request-ID`` when well-formed, else generated.

The rule of a well-formed id lives in :mod:`recordkeeper.core.request_ids`.  The request
observer (:mod:`recordkeeper_service.observe`) picks the id once per request, leaves it in the
ASGI scope under :data:`REQUEST_ID_KEY` and in a context variable for the duration of the call,
so that error bodies (:func:`recordkeeper_service.handlers.error_json`) and log records carry it
without being handed it.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar, Token

from recordkeeper.core.request_ids import REQUEST_ID_HEADER, new_request_id, valid_request_id

__all__ = [
    "HEADER_NAME",
    "REQUEST_ID_KEY",
    "current_request_id",
    "request_id_for",
    "reset_current",
    "set_current",
]

#: The header as it appears in an ASGI scope (lower case bytes).
HEADER_NAME = REQUEST_ID_HEADER.lower().encode("latin-1")
#: The ASGI scope key holding the request's id.
REQUEST_ID_KEY = "recordkeeper.request_id"

_CURRENT: ContextVar[str | None] = ContextVar("recordkeeper_request_id", default=None)


def request_id_for(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The id of a request with these raw ASGI ``headers``: the caller's if it is well-formed
    (the first ``X-Request-ID`` header), else a new one."""
    for name, value in headers:
        if name == HEADER_NAME:
            try:
                text = value.decode("ascii")
            except UnicodeDecodeError:
                break
            if valid_request_id(text):
                return text
            break
    return new_request_id()


def current_request_id() -> str | None:
    """The id of the request being served in this context, if any."""
    return _CURRENT.get()


def set_current(request_id: str) -> Token[str | None]:
    """Make ``request_id`` current; pass the token to :func:`reset_current` afterwards."""
    return _CURRENT.set(request_id)


def reset_current(token: Token[str | None]) -> None:
    _CURRENT.reset(token)

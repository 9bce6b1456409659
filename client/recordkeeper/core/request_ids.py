"""Request ids: the ``X-Request-ID`` header that ties a client call to the service's log line.

The client sends a fresh id with every call (the same id on each retry of that call); the
service accepts an id it is sent when it is well-formed (:func:`valid_request_id`) and
generates one otherwise, answers it in the ``X-Request-ID`` response header and in every error
body (``request_id``), and writes it in its request log line.

A well-formed id is 1 to :data:`MAX_REQUEST_ID_LENGTH` characters from ``A-Z a-z 0-9`` and
``- _ . : / + =`` (UUIDs, hex trace ids, base64 and ``service:1234``-style ids pass); anything
else — too long, spaces, control characters, quotes, non-ASCII — is replaced, never echoed,
so a header cannot inject text into logs or responses.
"""

from __future__ import annotations

import re
import uuid

__all__ = [
    "MAX_REQUEST_ID_LENGTH",
    "REQUEST_ID_HEADER",
    "new_request_id",
    "valid_request_id",
]

#: The HTTP header carrying the id, both ways.
REQUEST_ID_HEADER = "X-Request-ID"
#: The longest id the service accepts from a caller.
MAX_REQUEST_ID_LENGTH = 128

_REQUEST_ID = re.compile(rf"[A-Za-z0-9\-_.:/+=]{{1,{MAX_REQUEST_ID_LENGTH}}}")


def valid_request_id(value: str) -> bool:
    """True if ``value`` may be used as a request id as it is."""
    return _REQUEST_ID.fullmatch(value) is not None


def new_request_id() -> str:
    """A fresh random id: 32 lowercase hex digits (a UUID4 without dashes)."""
    return uuid.uuid4().hex

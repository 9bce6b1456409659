"""Storage failures as reasons: the one classification of fsspec backends' exceptions.

botocore, aiohttp, gcsfs and the OS raise different exceptions for the same event; each is
turned into a :class:`~recordkeeper.errors.StorageError` with a ``reason`` (``missing``,
``denied``, ``unreachable``, ``throttled``, ``transport``, ``error``).  The reasons a retry may
cure are :data:`recordkeeper.core.retry.RETRYABLE_REASONS`; which layer retries them is each
profile's :attr:`~recordkeeper.backends.StorageProfile.retried_by`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from recordkeeper.core.errors import StorageCredentialsMissing, StorageError, UnsupportedFormat
from recordkeeper.core.secrets import redact_url_in, strip_credentials

__all__ = ["classify", "storage_errors"]


#: exception class names (anywhere in the chain) of an answer damaged or cut on the way
_TRANSPORT_NAMES = (
    "ConnectionClosedError",  # botocore: the connection closed before a whole answer
    "ServerDisconnectedError",
    "ClientPayloadError",  # aiohttp: a body shorter than its Content-Length, or broken
    "ContentLengthError",
    "ConnectionResetError",
    "BrokenPipeError",
    "IncompleteRead",
    "ResponseStreamingError",
    "ReadTimeoutError",
    "ResponseParserError",  # a listing cut mid-XML
    "ServerTimeoutError",
    "TimeoutError",
)
_TRANSPORT_TEXT = (
    "connection reset",
    "connection was closed",
    "server disconnected",
    "response payload is not completed",
    "not enough data to satisfy content length",
    "xamzcontentsha256mismatch",
)
_THROTTLED_TEXT = ("slowdown", "reduce your request rate", "toomanyrequests", "rate limit")


def _statuses(exc: BaseException) -> set[int]:
    """The HTTP statuses the exceptions in ``exc``'s chain carry (botocore, gcsfs, aiohttp)."""
    found: set[int] = set()
    for c in _chain(exc):
        response = getattr(c, "response", None)
        if isinstance(response, dict):
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(status, int):
                found.add(status)
            code = response.get("Error", {}).get("Code")
            if isinstance(code, str) and code.isdigit():
                found.add(int(code))
        for attr in ("code", "status"):
            value = getattr(c, attr, None)
            if isinstance(value, int) and 100 <= value < 600:
                found.add(value)
    return found


#: exception class names (anywhere in the chain) of "no credentials were found at all"
_NO_CREDENTIALS_NAMES = ("NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError")


def _classify(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "missing"
    if isinstance(exc, PermissionError):
        return "denied"
    names = " ".join(type(c).__name__ for c in _chain(exc))
    if any(name in names for name in _NO_CREDENTIALS_NAMES):
        return "no_credentials"
    text = " ".join(str(c) for c in _chain(exc)).lower()
    if "FSTimeoutError" in names:  # the event loop did not answer in time: not the store's
        return "error"
    statuses = _statuses(exc)
    if statuses & {429, 503} or any(word in text for word in _THROTTLED_TEXT):
        return "throttled"
    if (
        statuses & {502, 504}
        or any(name in names for name in _TRANSPORT_NAMES)
        or any(word in text for word in _TRANSPORT_TEXT)
    ):
        return "transport"
    if "Connect" in names or "connection refused" in text or "cannot connect" in text:
        return "unreachable"
    code = getattr(exc, "code", None)
    if code in (401, 403) or any(
        word in text
        for word in (
            "accessdenied",
            "access denied",
            "invalidaccesskeyid",
            "signaturedoesnotmatch",
            "forbidden",
            "unauthorized",
            "invalid credentials",
        )
    ):
        return "denied"
    if code == 404 or "nosuchbucket" in text or "not found" in text or "nosuchkey" in text:
        return "missing"
    return "error"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


_DENIED_DETAIL = (
    ("invalidaccesskeyid", "the access key id is unknown to the store"),
    ("access key id you provided does not exist", "the access key id is unknown to the store"),
    ("signaturedoesnotmatch", "the secret key does not match the access key"),
    ("signature we calculated does not match", "the secret key does not match the access key"),
    ("expiredtoken", "the session token has expired"),
)


def _denied_detail(exc: BaseException) -> str:
    """What exactly was refused, when the backend says (S3 error codes/messages)."""
    parts = []
    for c in _chain(exc):
        parts.append(str(c))
        error = getattr(c, "response", None)
        if isinstance(error, dict):
            parts.append(str(error.get("Error", {}).get("Code", "")))
    text = " ".join(parts).lower()
    for needle, detail in _DENIED_DETAIL:
        if needle in text:
            return f" ({detail})"
    return ""


_REASON_TEXT = {
    "missing": "not found",
    "denied": (
        "access denied: the storage credentials were refused or lack permission; check the "
        "credentials in storage_options or the environment"
    ),
    "unreachable": "storage endpoint unreachable; check the endpoint URL",
    "throttled": "the store is throttling requests (it asked to slow down) and kept doing so",
    "transport": (
        "the store answered, but the answer was cut or damaged on the way (a reset, a closed "
        "connection, a body shorter than announced), again on every retry"
    ),
    "error": "storage error",
}

#: Where each store's client looks for credentials: the hint of ``no_credentials``.
_CREDENTIALS_HINT = {
    "s3": (
        "no S3 credentials were found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
        "AWS_PROFILE with ~/.aws/credentials), or pass key/secret in storage_options (CLI: "
        "--storage-option key=... --storage-option secret=...); for a public bucket pass "
        "anon=true"
    ),
    "gs": (
        "no Google Cloud credentials were found; set GOOGLE_APPLICATION_CREDENTIALS to a "
        "service-account key file, run `gcloud auth application-default login`, or pass "
        "token= in storage_options (token=anon for a public bucket)"
    ),
}


def _no_credentials_text(uri: str) -> str:
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
    scheme = {"s3a": "s3", "gcs": "gs"}.get(scheme, scheme)
    return _CREDENTIALS_HINT.get(
        scheme, "no storage credentials were found; pass them in storage_options"
    )


@contextlib.contextmanager
def storage_errors(uri: str) -> Iterator[None]:
    """Turn backend exceptions raised inside the block into :class:`StorageError`.  The error
    names ``uri`` without credentials (userinfo, signed-URL parameters) and takes them out of
    the backend's own message too (:mod:`recordkeeper.core.secrets`): errors are printed and
    logged."""
    try:
        yield
    except (StorageError, UnsupportedFormat):  # ours: a format's reader refusing what it read
        raise
    except Exception as exc:
        # Anything from botocore/aiohttp/gcsfs/OS counts as a storage failure here.
        if isinstance(exc, (KeyboardInterrupt, MemoryError)):
            raise
        reason = _classify(exc)
        message = redact_url_in(str(exc).strip() or type(exc).__name__, uri)
        uri = strip_credentials(uri)
        if reason == "no_credentials":
            raise StorageCredentialsMissing(
                f"{uri}: {_no_credentials_text(uri)} ({type(exc).__name__}: {message[:300]})",
                uri=uri,
                reason=reason,
            ) from exc
        text = _REASON_TEXT[reason]
        if reason == "denied":
            text += _denied_detail(exc)
        raise StorageError(
            f"{uri}: {text} ({type(exc).__name__}: {message[:300]})",
            uri=uri,
            reason=reason,
        ) from exc


#: the public name of the classification
classify = _classify

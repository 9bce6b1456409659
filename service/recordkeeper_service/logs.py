"""Service logs: one JSON object per line (or plain text), and the one line per request.

``RECORDKEEPER_LOG_FORMAT=json`` (the default) renders every record of the service and of
uvicorn as one JSON object per line::

    {"time": "2026-11-30T15:40:01.123Z", "level": "info",
     "logger": "recordkeeper_service.requests", "message": "GET /api/v1/versions/{ref} 200",
     "method": "GET", "route": "/api/v1/versions/{ref}", "path": "/api/v1/versions/coco@latest",
     "status": 200, "duration_ms": 1.84, "request_id": "0c6f…", "token": "ci",
     "client": "127.0.0.1"}

``text`` renders ``time level logger: message key=value …`` for people at a terminal.  A record
logged while a request is served carries that request's id.  Secrets never reach a log line: the
request line names the token (its ``name``), never its value, and no header is logged.

:func:`logging_config` is the ``dictConfig`` handed to uvicorn (so each worker process sets
it up the same way); :func:`log_request` writes the request line.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

import orjson

from recordkeeper_service.request_ids import current_request_id

__all__ = [
    "REQUEST_LOGGER",
    "JsonFormatter",
    "LogFormat",
    "TextFormatter",
    "log_request",
    "logging_config",
]

LogFormat = Literal["json", "text"]

#: The logger of the one-line-per-request log.
REQUEST_LOGGER = "recordkeeper_service.requests"
#: Paths longer than this are cut in the request line.
MAX_LOGGED_PATH = 512

_request_log = logging.getLogger(REQUEST_LOGGER)

#: Attributes every LogRecord has; anything else was passed with ``extra=`` and is a field.
_RECORD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "color_message",
}


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = {k: v for k, v in record.__dict__.items() if k not in _RECORD_ATTRIBUTES}
    if "request_id" not in fields:
        request_id = current_request_id()
        if request_id is not None:
            fields["request_id"] = request_id
    return fields


_second: tuple[int, str] = (-1, "")


def _timestamp(created: float) -> str:
    """``2026-11-30T15:40:01.123Z`` (UTC); the part up to the second is formatted once a second."""
    global _second
    whole = int(created)
    second = _second  # one read: threads may replace it
    if second[0] != whole:
        second = _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return f"{second[1]}.{int((created - whole) * 1000):03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time``, ``level``, ``logger``, ``message``, the record's
    ``extra=`` fields, the current request id, and ``exception`` (the traceback) if any."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _fields(record).items():
            out.setdefault(key, value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode("utf-8")


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value …`` (fields as in :class:`JsonFormatter`)."""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        line = (
            f"{_timestamp(record.created)} {record.levelname.lower()} {record.name}: "
            f"{record.getMessage()}"
        )
        if fields:
            line = f"{line} {fields}"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


def logging_config(level: str, log_format: LogFormat) -> dict[str, Any]:
    """The ``logging.config.dictConfig`` of the service and uvicorn, for uvicorn's
    ``log_config``: every record to standard error, in ``log_format``."""
    formatter = JsonFormatter if log_format == "json" else TextFormatter
    handler = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": {"()": f"{formatter.__module__}.{formatter.__qualname__}"}},
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "formatter": "default",
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {
            "uvicorn": handler,
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": handler,
            "recordkeeper_service": handler,
        },
    }


def log_request(
    *,
    method: str,
    route: str,
    path: str,
    status: int,
    duration_ms: float,
    request_id: str,
    token: str | None,
    client: str | None,
) -> None:
    """Write the request line (logger :data:`REQUEST_LOGGER`, level INFO)."""
    if not _request_log.isEnabledFor(logging.INFO):
        return
    _request_log.info(
        "%s %s %d",
        method,
        route,
        status,
        extra={
            "method": method,
            "route": route,
            "path": path[:MAX_LOGGED_PATH],
            "status": status,
            "duration_ms": round(duration_ms, 3),
            "request_id": request_id,
            "token": token,
            "client": client,
        },
    )

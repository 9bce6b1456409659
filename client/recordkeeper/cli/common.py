"""What every command module of the CLI shares, defined once.

* the shared options (:data:`JsonOpt`, :data:`StorageOpt`) and :func:`parse_storage_options`;
* :func:`connect`: the :class:`~recordkeeper.client.Client` for the ``--url``/``--token`` given
  to the main app (set by its callback before any command runs);
* output helpers (:func:`console`, :func:`print_json`, :func:`size`);
* :class:`CliError` and the one error handler, :func:`handle_errors`, which the main app's group
  runs around every command.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from recordkeeper.client import Client
from recordkeeper.core.errors import RecordkeeperError

__all__ = [
    "CliError",
    "JsonOpt",
    "StorageOpt",
    "connect",
    "console",
    "handle_errors",
    "parse_storage_options",
    "print_json",
    "set_connection",
    "size",
]

T = TypeVar("T")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
StorageOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--storage-option",
        "-o",
        help="fsspec storage option KEY=VALUE (repeatable; VALUE may be JSON; "
        "dotted keys nest: client_kwargs.endpoint_url=http://…).",
    ),
]

_connection: dict[str, str | None] = {"url": None, "token": None}


class CliError(Exception):
    """A user error found by the CLI itself: printed as ``error: <message>``, exit status 1."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def set_connection(url: str | None, token: str | None) -> None:
    """Remember the main app's ``--url``/``--token`` for :func:`connect`."""
    _connection["url"] = url
    _connection["token"] = token


def connect(storage_options: dict[str, Any] | None = None) -> Client:
    """The client for this invocation's ``--url``/``--token`` (environment otherwise)."""
    return Client(_connection["url"], _connection["token"], storage_options=storage_options)


def parse_storage_options(pairs: list[str] | None) -> dict[str, Any]:
    """``["anon=true", "client_kwargs.endpoint_url=http://x"]`` → nested options dict."""
    options: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"storage option {pair!r} is not KEY=VALUE")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        target = options
        *parents, leaf = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
    return options


def console(stderr: bool = False) -> Any:
    """A rich console; pipes and logs get a wide one so names and URIs are never cropped."""
    from rich.console import Console

    out = Console(stderr=stderr, soft_wrap=False)
    if not out.is_terminal:
        out = Console(stderr=stderr, soft_wrap=False, width=max(out.width, 240))
    return out


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def size(n: int) -> str:
    """``1536`` → ``1.5 KiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _fail(message: str, code: str | None = None, request_id: str | None = None) -> NoReturn:
    suffix = f" [{code}]" if code else ""
    if request_id:
        suffix += f" (request id {request_id})"
    sys.stderr.write(f"error: {message}{suffix}\n")
    raise typer.Exit(1)


def handle_errors(run: Callable[[], T]) -> T:
    """Run a command; turn user errors into ``error: <detail> [<code>]`` (and ``(request id
    <id>)`` when the service answered it) and exit status 1.

    User errors are :class:`~recordkeeper.errors.RecordkeeperError` (with its stable code),
    :class:`CliError`, an :class:`OSError` (a missing or unreadable file) and a missing optional
    dependency.  Anything else — ``TypeError``, ``KeyError``, ``AttributeError``… — is a bug and
    propagates with its traceback.
    """
    try:
        return run()
    except RecordkeeperError as exc:
        _fail(exc.detail, exc.code, exc.request_id)
    except CliError as exc:
        _fail(exc.message, exc.code)
    except ImportError as exc:  # fsspec: "Install s3fs to access S3"
        _fail(f"{exc}; install the matching extra (recordkeeper[s3], [gcs], [tf])")
    except OSError as exc:
        _fail(str(exc))

"""What every command module of the CLI shares, defined once.

* the shared options (:data:`JsonOpt`, :data:`StorageOpt`) and :func:`parse_storage_options`;
* :func:`connect`: the :class:`~recordkeeper.client.Client` for the ``--url``/``--token`` given
  to the main app (set by its callback before any command runs);
* output helpers (:func:`console`, :func:`print_json`, :func:`size`);
* :class:`ExitCode`, the exit statuses (documented in docs/cli.md), and :func:`exit_code_for`;
* :class:`CliError` and the one error handler, :func:`handle_errors`, which the main app's group
  runs around every command: ``error: <detail> [<code>]`` on stderr, or with ``--json`` the JSON
  object ``{"code": …, "detail": …}`` on stderr (stdout only ever carries a command's result);
  an unexpected exception too (``[unexpected_error]``; its traceback with
  ``RECORDKEEPER_DEBUG=1``);
* :func:`arrange_global_options`: ``--url``/``--token`` after the subcommand, ``--json`` before it.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import json
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, NoReturn, TextIO, TypeVar

import typer

from recordkeeper.client import Client
from recordkeeper.core.display import binary_size
from recordkeeper.core.errors import (
    AuthenticationRequired,
    Conflict,
    CorruptShard,
    DigestMismatch,
    LeakageWarning,
    NotFound,
    PermissionDenied,
    RecordkeeperError,
    ServiceUnavailable,
    StaleLock,
    StorageError,
    StorageRootNotAllowed,
    VersionDeprecated,
)
from recordkeeper.core.flags import parse_flag

__all__ = [
    "DEBUG_ENV",
    "GLOBAL_VALUE_OPTIONS",
    "CliError",
    "ExitCode",
    "JsonOpt",
    "RootOpt",
    "StorageOpt",
    "arrange_global_options",
    "connect",
    "connection",
    "console",
    "exit_code_for",
    "fail",
    "handle_errors",
    "json_errors",
    "leakage_warnings",
    "parse_storage_options",
    "print_json",
    "print_library_warnings",
    "report_error",
    "set_connection",
    "set_json_errors",
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

#: ``--root`` of the commands that delete storage (``gc --delete``, ``retention apply``): where
#: this machine may delete, intersected with the service's roots
#: (:func:`recordkeeper.gc.deletion_roots`).
RootOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--root",
        help="a root this command may delete in (repeatable; default: "
        "RECORDKEEPER_ALLOWED_ROOTS here); intersected with the service's roots, never "
        "widened by them",
    ),
]

#: Set to 1 to let an unexpected exception end the command with its traceback.
DEBUG_ENV = "RECORDKEEPER_DEBUG"

#: What ends a command or reports a usage error for the parser to print: never "unexpected"
#: (click's ClickException found through typer, which may vendor click).
_CLI_EXITS: tuple[type[BaseException], ...] = (
    typer.Exit,
    typer.Abort,
    *(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"),
)

_connection: dict[str, str | None] = {"url": None, "token": None, "profile": None}
_json_errors = {"on": False}


class ExitCode(enum.IntEnum):
    """The exit statuses of ``recordkeeper`` (the table in docs/cli.md)."""

    #: the command did what was asked
    OK = 0
    #: any other error: invalid input, a storage or server error, a missing extra
    ERROR = 1
    #: the command line itself is wrong: unknown command or option, missing argument
    USAGE = 2
    #: a dataset, version, alias, checkpoint or local file does not exist
    NOT_FOUND = 3
    #: data is not what was registered or pinned: verification problems, a digest mismatch,
    #: a stale lock, a pinned version since deprecated
    VERIFICATION_FAILED = 4
    #: the service did not answer (or answered 503)
    SERVICE_UNREACHABLE = 5
    #: the service refused: authentication, permission, storage root, or a conflict with the
    #: registry's state (version in use, immutable, duplicate content, …)
    REFUSED = 6


#: Most specific first: the first class an error is an instance of gives its exit status.
_EXIT_CODES: tuple[tuple[type[BaseException], ExitCode], ...] = (
    (StaleLock, ExitCode.VERIFICATION_FAILED),
    (VersionDeprecated, ExitCode.VERIFICATION_FAILED),
    (DigestMismatch, ExitCode.VERIFICATION_FAILED),
    (CorruptShard, ExitCode.VERIFICATION_FAILED),
    (NotFound, ExitCode.NOT_FOUND),
    (FileNotFoundError, ExitCode.NOT_FOUND),
    (ServiceUnavailable, ExitCode.SERVICE_UNREACHABLE),
    (AuthenticationRequired, ExitCode.REFUSED),
    (PermissionDenied, ExitCode.REFUSED),
    (StorageRootNotAllowed, ExitCode.REFUSED),
    (Conflict, ExitCode.REFUSED),
)


def exit_code_for(error: BaseException) -> ExitCode:
    """The exit status a user error ends the command with."""
    for cls, code in _EXIT_CODES:
        if isinstance(error, cls):
            return code
    if isinstance(error, StorageError) and error.extra.get("reason") == "missing":
        return ExitCode.NOT_FOUND  # a local file or an object that does not exist
    return ExitCode.ERROR


class CliError(Exception):
    """A user error found by the CLI itself: printed as ``error: <message> [<code>]``, exit
    status ``exit_code`` (1 unless given).  ``code`` is required: every error the CLI prints
    has one (docs/cli.md), preferably a code of :mod:`recordkeeper.core.errors`."""

    def __init__(self, message: str, code: str, exit_code: ExitCode = ExitCode.ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.exit_code = exit_code


#: Options of the main app that take a value; accepted before or after the subcommand.
GLOBAL_VALUE_OPTIONS = ("--url", "--token", "--profile")
_JSON_FLAG = "--json"


def arrange_global_options(args: Sequence[str], commands: Sequence[str]) -> list[str]:
    """Put global options where the parser expects them.

    ``--url``/``--token``/``--profile`` (with their values) given after the subcommand move in
    front of it;
    ``--json`` given before the subcommand moves after it (every command printing data has
    ``--json``).  Nothing after ``--`` is touched.
    """
    args = list(args)
    end = args.index("--") if "--" in args else len(args)
    head, tail = args[:end], args[end:]
    front: list[str] = []
    rest: list[str] = []
    json_before = False
    seen_command = False
    i = 0
    while i < len(head):
        arg = head[i]
        name = arg.split("=", 1)[0]
        if name in GLOBAL_VALUE_OPTIONS:
            width = 1 if "=" in arg else 2
            front.extend(head[i : i + width])
            i += width
            continue
        if arg == _JSON_FLAG and not seen_command:
            json_before = True
        else:
            seen_command = seen_command or arg in commands
            rest.append(arg)
        i += 1
    if json_before:
        rest.append(_JSON_FLAG)
    return front + rest + tail


def json_errors() -> bool:
    """True when errors are printed as JSON (``--json`` was given)."""
    return _json_errors["on"]


def set_json_errors(on: bool) -> None:
    """Print errors as JSON from now on (the main app's group sets it from the arguments)."""
    _json_errors["on"] = on


def set_connection(url: str | None, token: str | None, profile: str | None = None) -> None:
    """Remember the main app's ``--url``/``--token``/``--profile`` for :func:`connect`."""
    _connection["url"] = url
    _connection["token"] = token
    _connection["profile"] = profile


def connection() -> dict[str, str | None]:
    """This invocation's ``url``, ``token`` and ``profile`` as given (None: not given)."""
    return dict(_connection)


def connect(storage_options: dict[str, Any] | None = None) -> Client:
    """The client for this invocation's ``--url``/``--token`` (environment otherwise)."""
    return Client(
        _connection["url"],
        _connection["token"],
        storage_options=storage_options,
        profile=_connection["profile"],
    )


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


#: Characters a terminal acts on instead of showing: C0 and C1 controls but tab and newline
#: (ESC starts the sequences that move the cursor, retitle the window, rewrite or hide what
#: was printed; CR overprints a line) and the bidirectional overrides and isolates.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on shown as its escape (``\\x1b``,
    ``\\u202e``): what the CLI prints comes from the registry, where anyone with a write token
    puts descriptions, notes, commands and reasons."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


@functools.cache
def _console_class() -> type:
    """rich's ``Console``, turning every string it renders (``print`` arguments, table cells,
    titles) printable first: one place for the ~150 places that print registry text."""
    from rich.console import Console

    class PrintableConsole(Console):
        def render_str(self, text: str, **options: Any) -> Any:
            return super().render_str(printable(text), **options)

    return PrintableConsole


def console(stderr: bool = False) -> Any:
    """A rich console; pipes and logs get a wide one so names and URIs are never cropped.

    Text is printed as written: no ``:name:`` emoji codes (``coco_v3:train: 0/40`` showed a
    train emoji) and no automatic highlighting (it coloured parts of digests and numbers as
    if they were IP addresses); only the ``[bold]…[/]`` markup a command writes styles it.
    Characters a terminal would act on (ESC sequences, CR, bidirectional overrides) are shown
    as escapes (:func:`printable`)."""
    Console = _console_class()
    out = Console(stderr=stderr, soft_wrap=False, emoji=False, highlight=False)
    if not out.is_terminal:
        out = Console(
            stderr=stderr,
            soft_wrap=False,
            emoji=False,
            highlight=False,
            width=max(out.width, 240),
        )
    return out


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def size(n: int) -> str:
    """``1536`` → ``1.5 KiB`` (:func:`recordkeeper.core.display.binary_size`)."""
    return binary_size(n)


def fail(
    message: str,
    code: str,
    exit_code: ExitCode,
    extra: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> NoReturn:
    """Print an error (text, or JSON with ``--json``) on stderr and exit with ``exit_code``."""
    report_error(message, code, extra, request_id)
    raise typer.Exit(int(exit_code))


def report_error(
    message: str,
    code: str,
    extra: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> None:
    """Print an error on stderr: ``error: <message> [<code>] (request id <id>)``, or with
    ``--json`` the object ``{"code": …, "detail": …, "request_id": …, **extra}`` on one line."""
    if json_errors():
        body = {"code": code, "detail": message, **(extra or {})}
        if request_id:
            body["request_id"] = request_id
        sys.stderr.write(json.dumps(body, default=str) + "\n")
    else:
        suffix = f" [{code}]"
        if request_id:
            suffix += f" (request id {request_id})"
        sys.stderr.write(f"error: {message}{suffix}\n")


def leakage_warnings(caught: Iterable[warnings.WarningMessage]) -> list[str]:
    """The :class:`~recordkeeper.errors.LeakageWarning` messages among ``caught`` (a commit
    under a ``warn`` leakage policy), each also shown as a ``warning:`` line on stderr."""
    found = [str(w.message) for w in caught if issubclass(w.category, LeakageWarning)]
    for message in found:
        sys.stderr.write(f"warning: {message}\n")
    return found


def print_library_warnings() -> None:
    """Show recordkeeper's own warnings (a deprecated version used, identical content kept…) as
    ``warning: <message>`` lines on stderr, not in Python's ``file:line: Category`` form;
    other warnings are shown as Python would."""
    shown = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if category.__module__.split(".")[0] == "recordkeeper":
            sys.stderr.write(f"warning: {message}\n")
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def _silence_stdout() -> None:
    """Point stdout's file descriptor at /dev/null (what is left in its buffer goes nowhere)."""
    # no real file descriptor under a test runner's capture: nothing to point anywhere
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def handle_errors(run: Callable[[], T]) -> T:
    """Run a command; turn user errors into ``error: <detail> [<code>]`` (and ``(request id
    <id>)`` when the service answered it), or JSON with ``--json``, and the exit status of
    :func:`exit_code_for`.

    User errors are :class:`~recordkeeper.errors.RecordkeeperError` (with its stable code),
    :class:`CliError`, an :class:`OSError` (a missing or unreadable file) and a missing optional
    dependency.  Anything else — ``TypeError``, ``KeyError``, ``AttributeError``… — is a bug
    (the client turns what it cannot read in the service's answers into
    :class:`~recordkeeper.errors.InvalidResponse` where it reads them): it is printed as
    ``error: unexpected <type>: <message> … [unexpected_error]`` with exit status 1, and with
    ``RECORDKEEPER_DEBUG=1`` it propagates with its traceback instead.
    """
    try:
        return run()
    except RecordkeeperError as exc:
        extra = {k: v for k, v in exc.extra.items() if k != "request_id"}
        fail(exc.detail, exc.code, exit_code_for(exc), extra, exc.request_id)
    except CliError as exc:
        fail(exc.message, exc.code, exc.exit_code)
    except ImportError as exc:  # fsspec: "Install s3fs to access S3"
        fail(
            f"{exc}; install the matching extra (recordkeeper[s3], [gcs], [tf], [tfds])",
            "missing_extra",
            ExitCode.ERROR,
        )
    except BrokenPipeError:
        # Whoever read stdout stopped (`recordkeeper log coco --json | head`): end quietly
        # with status 1, as rich's console and click's --help already do, not with an error
        # about the pipe (and no second one when Python flushes stdout at exit).
        _silence_stdout()
        raise typer.Exit(int(ExitCode.ERROR)) from None
    except OSError as exc:
        code = "file_not_found" if isinstance(exc, FileNotFoundError) else "os_error"
        fail(str(exc), code, exit_code_for(exc))
    except _CLI_EXITS:
        raise  # a command's own exit status, a usage error: the parser prints them
    except Exception as exc:
        if _debug():
            raise
        fail(
            f"unexpected {type(exc).__name__}: {exc}; this is a bug in recordkeeper (or an "
            f"answer of the service it does not expect): {DEBUG_ENV}=1 shows the traceback to "
            "report",
            "unexpected_error",
            ExitCode.ERROR,
        )


def _debug() -> bool:
    try:
        return parse_flag(DEBUG_ENV, os.environ.get(DEBUG_ENV))
    except RecordkeeperError:
        return True  # a value it cannot read: show more, not less

"""The ``recordkeeper`` Typer app: the main options, the error handler, and every command.

One way to add a command: a module of this package defines ``register(app)``, which adds its
commands (or its sub-app) to the main app, and is listed in :data:`COMMANDS`.  The service's
``serve``/``db``/``token`` commands come the same way from :mod:`recordkeeper_service.cli` when
the ``server`` extra is installed.

Every command runs inside :func:`recordkeeper.cli.common.handle_errors` (via the app's group),
so user errors print ``error: <detail> [<code>]`` (JSON with ``--json``) and exit with the
status of :class:`~recordkeeper.cli.common.ExitCode`, and bugs keep their traceback.  The group
also accepts the global options after the subcommand
(:func:`~recordkeeper.cli.common.arrange_global_options`) and, with ``--json``, prints usage
errors as JSON too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from recordkeeper.cli import (
    alias,
    auth,
    cache,
    check_model,
    derive,
    gc,
    lineage,
    records,
    retention,
    saved_models,
    versions,
)
from recordkeeper.cli.common import (
    ExitCode,
    arrange_global_options,
    handle_errors,
    json_errors,
    print_library_warnings,
    report_error,
    set_connection,
    set_json_errors,
)
from recordkeeper.core.endpoint import DEFAULT_URL
from recordkeeper.core.version import __version__

__all__ = ["COMMANDS", "app", "main"]

Register = Callable[[typer.Typer], None]


class _Group(TyperGroup):
    """The main app's group: runs the invoked command (and its sub-commands) in the handler."""

    # ``ctx`` is typer's vendored click Context, which typer does not export under a public name.
    def invoke(self, ctx: Any) -> Any:
        return handle_errors(lambda: super(_Group, self).invoke(ctx))

    def main(self, args: Sequence[str] | None = None, *rest: Any, **kwargs: Any) -> Any:
        """Arrange the global options, and with ``--json`` print usage errors as JSON."""
        argv = arrange_global_options(sys.argv[1:] if args is None else args, list(self.commands))
        set_json_errors("--json" in argv[: argv.index("--") if "--" in argv else None])
        if not json_errors() or kwargs.get("standalone_mode", True) is False:
            return super().main(argv, *rest, **kwargs)
        kwargs["standalone_mode"] = False
        try:
            result = super().main(argv, *rest, **kwargs)
        except typer.Abort:
            report_error("aborted", "aborted")
            sys.exit(ExitCode.ERROR)
        except Exception as exc:  # typer's vendored click.ClickException has no public name
            if not hasattr(exc, "format_message") or not hasattr(exc, "exit_code"):
                raise
            report_error(exc.format_message(), "usage")
            sys.exit(exc.exit_code)
        sys.exit(result if isinstance(result, int) else ExitCode.OK)


def _service_commands() -> list[Register]:
    try:
        from recordkeeper_service.cli import register
    except ImportError:
        return []  # base install: no server extra
    return [register]


#: Every command module's ``register``, in the order ``recordkeeper --help`` lists them.
COMMANDS: list[Register] = [
    versions.register,  # publish, resolve, show, ls, verify, diff
    derive.register,  # derive
    alias.register,  # alias set|ls
    *_service_commands(),  # serve, db, token
    lineage.register,  # lineage, consumers, impact, lock, checkpoints
    gc.register,  # gc
    retention.register,  # retention set|show|plan|apply|pin|unpin|pins
    check_model.register,  # check-model
    saved_models.register,  # compare, inspect-model
    records.register,  # index, check-leakage, head
    auth.register,  # login, logout, profiles
    cache.register,  # pull, cache ls|du|clear
]

app = typer.Typer(
    name="recordkeeper",
    cls=_Group,
    help="Dataset versioning and lineage for TFRecord training data.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (docs/cli.md)
    pretty_exceptions_enable=False,
    context_settings={"show_default": True},
)


def _print_version(value: bool) -> None:
    if value:
        print(f"recordkeeper {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(
            envvar="RECORDKEEPER_URL",
            help=f"Service URL (default {DEFAULT_URL}; also accepted after the command).",
            show_default=False,
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="RECORDKEEPER_TOKEN",
            help="API token (also accepted after the command).",
            show_default=False,
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            envvar="RECORDKEEPER_PROFILE",
            help="Saved profile (URL + token) to use, from `recordkeeper login` "
            "[default: default].",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
            show_default=False,
        ),
    ] = False,
) -> None:
    """Dataset versioning and lineage for TFRecord training data.

    --json (before or after the command) prints results as JSON, and errors as a JSON object
    {"code", "detail"} on stderr.  Exit statuses: 0 ok, 1 error, 2 usage, 3 not found,
    4 verification failed, 5 service unreachable, 6 refused (see docs/cli.md).
    """

    def source(name: str) -> str:  # typer's vendored click ParameterSource, by name
        found = ctx.get_parameter_source(name)
        return found.name if found is not None else ""

    if source("profile") == "COMMANDLINE":
        # --profile on the command line beats RECORDKEEPER_URL/RECORDKEEPER_TOKEN
        if source("url") == "ENVIRONMENT":
            url = None
        if source("token") == "ENVIRONMENT":
            token = None
    else:
        profile = None  # RECORDKEEPER_PROFILE: the client reads it, after the URL variables
    set_connection(url, token, profile)
    print_library_warnings()


for _register in COMMANDS:
    _register(app)


def main() -> None:
    """Console-script entry point (also ``python -m recordkeeper.cli``: the same program name,
    so shell completion answers to ``_RECORDKEEPER_COMPLETE`` either way)."""
    app(prog_name="recordkeeper")

"""The ``recordkeeper`` Typer app: the main options, the error handler, and every command.

One way to add a command: a module of this package defines ``register(app)``, which adds its
commands (or its sub-app) to the main app, and is listed in :data:`COMMANDS`.  The service's
``serve``/``db``/``token`` commands come the same way from :mod:`recordkeeper_service.cli` when
the ``server`` extra is installed.

Every command runs inside :func:`recordkeeper.cli.common.handle_errors` (via the app's group),
so user errors print ``error: <detail> [<code>]`` and exit 1, and bugs keep their traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from recordkeeper.cli import alias, check_model, gc, lineage, models, versions
from recordkeeper.cli.common import handle_errors, set_connection

__all__ = ["COMMANDS", "app", "main"]

Register = Callable[[typer.Typer], None]


class _Group(TyperGroup):
    """The main app's group: runs the invoked command (and its sub-commands) in the handler."""

    # ``ctx`` is typer's vendored click Context, which typer does not export under a public name.
    def invoke(self, ctx: Any) -> Any:
        return handle_errors(lambda: super(_Group, self).invoke(ctx))


def _service_commands() -> list[Register]:
    try:
        from recordkeeper_service.cli import register
    except ImportError:
        return []  # base install: no server extra
    return [register]


#: Every command module's ``register``, in the order ``recordkeeper --help`` lists them.
COMMANDS: list[Register] = [
    versions.register,  # publish, resolve, show, ls, verify, diff
    alias.register,  # alias set|ls
    *_service_commands(),  # serve, db, token
    lineage.register,  # lineage, consumers, lock, checkpoints
    gc.register,  # gc
    check_model.register,  # check-model
    models.register,  # compare, inspect-model
]

app = typer.Typer(
    name="recordkeeper",
    cls=_Group,
    help="Dataset versioning and lineage for TFRecord training data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _main(
    url: Annotated[
        str | None,
        typer.Option(
            envvar="RECORDKEEPER_URL", help="Service URL [default: http://127.0.0.1:8080]"
        ),
    ] = None,
    token: Annotated[
        str | None, typer.Option(envvar="RECORDKEEPER_TOKEN", help="API token.", show_default=False)
    ] = None,
) -> None:
    """Dataset versioning and lineage for TFRecord training data."""
    set_connection(url, token)


for _register in COMMANDS:
    _register(app)


def main() -> None:
    """Console-script entry point."""
    app()

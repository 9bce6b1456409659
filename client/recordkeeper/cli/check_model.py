"""``recordkeeper check-model CHECKPOINT [--data REF ...]``: will this model accept this data?

Compares the serving inputs recorded with a checkpoint's SavedModel exports (what their
signatures parse) with the schema of every version along its lineage and of each ``--data``
version; prints one line per problem.  Exits 1 when a problem would make serving fail
(severity ``error``).  Added to the main app by :func:`register` (listed in
:data:`recordkeeper.cli.app.COMMANDS`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from recordkeeper.checkpoint_lineage import ModelCheck, check_model_json
from recordkeeper.cli.common import JsonOpt, connect, console, print_json

__all__ = ["check_model_cmd", "model_check_table", "register"]

#: how each severity is shown (``recordkeeper.core.model_inputs.SEVERITIES``)
_COLOURS = {"error": "red", "warning": "yellow", "info": "dim"}


def register(app: typer.Typer) -> None:
    """Add ``check-model`` to the main ``recordkeeper`` app."""
    app.command("check-model")(check_model_cmd)


def model_check_table(result: ModelCheck) -> object:
    """A rich Table: one row per (export, version) with its problems."""
    from rich.markup import escape
    from rich.table import Table

    table = Table("saved model", "version", "role", "result", title=f"{result.checkpoint}")
    for check in result.checks:
        if not check.problems:
            verdict = "[green]ok[/]"
        else:
            verdict = "\n".join(
                f"[{_COLOURS.get(p.severity, 'yellow')}]{p.problem}[/] {escape(p.detail)}"
                for p in check.problems
            )
        table.add_row(check.saved_model, check.version, check.role, verdict)
    return table


def check_model_cmd(
    checkpoint: Annotated[str, typer.Argument(help="MODEL/CHECKPOINT or MODEL@RUN/CHECKPOINT")],
    data: Annotated[
        list[str] | None,
        typer.Option("--data", help="a version to check too (repeatable), e.g. coco@v5"),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Will a checkpoint's SavedModel accept its training data and the versions given?"""
    answer = check_model_json(connect().http, checkpoint, data or ())
    result = ModelCheck.from_dict(answer)
    if json_out:
        print_json(answer)
    else:
        console().print(model_check_table(result))
        errors = sum(1 for p in result.problems if p.severity == "error")
        console().print(
            f"{result.checkpoint}: {len(result.checks)} check(s), {errors} error(s)"
            + ("" if result.ok else ": serving would fail")
        )
    if not result.ok:
        raise typer.Exit(1)

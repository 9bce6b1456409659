"""``recordkeeper alias set|ls``: movable names for versions."""

from __future__ import annotations

from typing import Annotated

import typer

from recordkeeper.cli.common import JsonOpt, connect, console, print_json

__all__ = ["alias_app", "register"]

alias_app = typer.Typer(help="Movable names for versions (prod, golden, …).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add ``alias`` to the main app."""
    app.add_typer(alias_app, name="alias")


@alias_app.command("set")
def alias_set(
    dataset: Annotated[str, typer.Argument(help="Dataset name.")],
    alias: Annotated[str, typer.Argument(help="Alias name, e.g. prod.")],
    ref: Annotated[str, typer.Argument(help="Version reference to point at.")],
    as_json: JsonOpt = False,
) -> None:
    """Point DATASET@ALIAS at a committed version."""
    result = connect().set_alias(dataset, alias, ref)
    if as_json:
        print_json(result)
        return
    print(f"{dataset}@{alias} -> {result.get('version')}")


@alias_app.command("ls")
def alias_ls(
    dataset: Annotated[str, typer.Argument(help="Dataset name.")],
    as_json: JsonOpt = False,
) -> None:
    """List a dataset's aliases (latest included)."""
    from rich.table import Table

    aliases = connect().aliases(dataset)
    if as_json:
        print_json(aliases)
        return
    table = Table("alias", "version", "updated")
    for a in aliases:
        table.add_row(a.get("alias", ""), a.get("version", ""), str(a.get("updated_at") or ""))
    console().print(table)

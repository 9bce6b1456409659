"""``recordkeeper retention set|show|plan|apply|pin|unpin|pins``: retention of committed versions.

``plan`` (a ``read`` token) changes nothing: it lists what ``apply`` would delete, why every
other version is kept, and the objects and bytes freed.  ``apply`` (an ``admin`` token) deletes
through the service's claims; deleting data a checkpoint that is not deleted trained on takes
``--force --reason "..."`` (recorded in the audit log).  Added to the main app by
:func:`register` (listed in :data:`recordkeeper.cli.app.COMMANDS`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from recordkeeper.cli.common import (
    JsonOpt,
    RootOpt,
    StorageOpt,
    connect,
    console,
    parse_storage_options,
    print_json,
    size,
)

__all__ = ["register", "retention_app"]

retention_app = typer.Typer(
    help="Retention of committed versions: policies, plan, apply, pins.", no_args_is_help=True
)

DatasetArg = Annotated[
    str | None,
    typer.Argument(help="Dataset (default: the service-wide policy / every dataset)."),
]


def register(app: typer.Typer) -> None:
    """Add ``retention`` to the main app."""
    app.add_typer(retention_app, name="retention")


@retention_app.command("set")
def retention_set(
    dataset: DatasetArg = None,
    keep_last: Annotated[
        int | None, typer.Option("--keep-last", help="keep the N highest-numbered versions")
    ] = None,
    keep_days: Annotated[
        int | None, typer.Option("--keep-days", help="keep versions newer than D days")
    ] = None,
    keep_aliased: Annotated[
        bool, typer.Option("--keep-aliased/--no-keep-aliased", help="keep aliased versions")
    ] = True,
    keep_trained: Annotated[
        bool,
        typer.Option("--keep-trained/--no-keep-trained", help="keep data checkpoints trained on"),
    ] = True,
    keep_pinned: Annotated[
        bool, typer.Option("--keep-pinned/--no-keep-pinned", help="keep pinned versions")
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Set DATASET's retention policy (no DATASET: the service-wide default; admin token)."""
    info = connect().set_retention_policy(
        dataset,
        keep_last=keep_last,
        keep_days=keep_days,
        keep_aliased=keep_aliased,
        keep_trained=keep_trained,
        keep_pinned=keep_pinned,
    )
    if as_json:
        print_json(info.to_dict())
        return
    print(f"{info.scope}: {info.describe}")


@retention_app.command("show")
def retention_show(dataset: DatasetArg = None, as_json: JsonOpt = False) -> None:
    """The policy in force for DATASET (its own, else the default), or every policy set."""
    client = connect()
    infos = [client.retention_policy(dataset)] if dataset else client.retention_policies()
    if as_json:
        print_json([i.to_dict() for i in infos])
        return
    if not infos:
        print("no retention policy: nothing expires")
    for info in infos:
        source = "" if info.source in ("dataset", "default") else f" ({info.source})"
        print(f"{info.scope}{source}: {info.describe}")


def _kept(rules: tuple[tuple[str, str], ...]) -> str:
    return "; ".join(f"{rule}: {detail}" for rule, detail in rules)


@retention_app.command("plan")
def retention_plan(
    dataset: DatasetArg = None,
    force: Annotated[
        bool, typer.Option("--force", help="as apply --force would (data checkpoints trained on)")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """What apply would delete, why every other version is kept, objects and bytes freed."""
    from rich.table import Table

    plan = connect().retention_plan(dataset, force=force)
    if as_json:
        print_json(plan.to_dict())
        return
    table = Table("version", "action", "objects", "size", "why kept / shared")
    for item in plan.items:
        why = _kept(item.kept_by)
        if item.action == "needs_force":
            why = f"trained {', '.join(item.trained[:3])}: apply --force --reason"
        elif item.shared:
            why = (why + "; " if why else "") + f"{item.shared} object(s) shared, kept"
        table.add_row(item.name, item.action, str(item.objects), size(item.bytes), why)
    out = console()
    if plan.items:
        out.print(table)
    out.print(
        f"would delete {len(plan.to_delete)} version(s): {plan.objects} object(s), "
        f"{size(plan.bytes)}; keep {len(plan.kept)}"
        + (f"; {plan.data_deleted} already deleted" if plan.data_deleted else "")
    )


@retention_app.command("apply")
def retention_apply(
    dataset: DatasetArg = None,
    force: Annotated[
        bool, typer.Option("--force", help="also delete data checkpoints trained on")
    ] = False,
    reason: Annotated[
        str | None, typer.Option("--reason", help="why (required with --force; audited)")
    ] = None,
    root: RootOpt = None,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete the data of expired versions (admin token); rerun to finish an interrupted run."""
    from rich.table import Table

    if force and not reason:
        raise typer.BadParameter("--force needs --reason (it is recorded in the audit log)")
    client = connect(parse_storage_options(storage_option) or None)
    report = client.apply_retention(dataset, force=force, reason=reason, allowed_roots=root or None)
    if as_json:
        print_json(report.to_dict())
    else:
        table = Table("version", "action", "objects", "size", "kept", "error")
        for item in report.items:
            table.add_row(
                item.name,
                item.action + (" (resumed)" if item.resumed else ""),
                str(item.objects),
                size(item.bytes),
                str(item.kept),
                item.error or "",
            )
        out = console()
        if report.items:
            out.print(table)
        done = sum(i.action == "deleted" for i in report.items)
        out.print(
            f"deleted {report.objects} object(s), {size(report.bytes)} from {done} version(s)"
            + ("" if report.ok else "; some are unfinished: run apply again")
        )
    if not report.ok:
        raise typer.Exit(1)


@retention_app.command("pin")
def retention_pin(
    lock: Annotated[Path, typer.Argument(help="A lock file (recordkeeper lock writes one).")],
    label: Annotated[
        str | None, typer.Option("--label", help="the pin's name (default: the path)")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Pin the versions a lock file names: retention keeps their data (write token)."""
    pins = connect().pin_lock(lock, label=label)
    if as_json:
        print_json(pins)
        return
    for pin in pins:
        print(f"pinned {pin['version']} ({pin['label']})")


@retention_app.command("unpin")
def retention_unpin(
    label: Annotated[str, typer.Argument(help="The pin's label (a lock file's path).")],
) -> None:
    """Remove every pin called LABEL."""
    print(f"removed {connect().unpin(label)} pin(s)")


@retention_app.command("pins")
def retention_pins(dataset: DatasetArg = None, as_json: JsonOpt = False) -> None:
    """Registered pins (of DATASET)."""
    pins = connect().pins(dataset)
    if as_json:
        print_json(pins)
        return
    for pin in pins:
        print(f"{pin['label']}\t{pin['version']}\t{pin['created_by']}")

"""``recordkeeper gc``: delete the storage of versions that never became visible.

Dry run by default (lists what would be removed, with sizes; a ``read`` token will do);
``--delete`` asks the service to claim the candidates (an ``admin`` token: any other is refused
before anything is abandoned or deleted) and removes only the storage it releases.  Added to
the main app by :func:`register` (listed in :data:`recordkeeper.cli.app.COMMANDS`).  Deleting
happens only inside ``--root`` (or ``RECORDKEEPER_ALLOWED_ROOTS`` here) intersected with the
service's roots; objects another live version references are kept and counted as kept.
"""

from __future__ import annotations

import re
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

__all__ = ["gc_cmd", "parse_duration", "register"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> int:
    """``90`` (seconds), ``30m``, ``24h``, ``7d``, ``2w`` → seconds."""
    match = re.fullmatch(r"\s*([0-9]{1,12})\s*([smhdw]?)\s*", text.lower())
    if match is None:
        raise typer.BadParameter(f"{text!r} is not a duration like 3600, 30m, 24h, 7d or 2w")
    return int(match[1]) * _UNITS[match[2] or "s"]


def register(app: typer.Typer) -> None:
    """Add ``gc`` to the main ``recordkeeper`` app."""
    app.command("gc")(gc_cmd)


def gc_cmd(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            help="staged versions idle longer than this are collected (24h, 7d, 3600); the "
            "service never releases one active within its own minimum (1h)",
        ),
    ] = "24h",
    delete: Annotated[
        bool,
        typer.Option(
            "--delete", help="claim and delete (admin token; default: dry run, list only)"
        ),
    ] = False,
    root: RootOpt = None,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete storage of abandoned and idle staged versions (dry run unless --delete)."""
    from rich.table import Table

    seconds = parse_duration(older_than)
    client = connect(parse_storage_options(storage_option) or None)
    report = client.collect_garbage(
        staged_older_than=seconds, dry_run=not delete, allowed_roots=root or None
    )
    if as_json:
        print_json(report.to_dict())
    else:
        table = Table(
            "version", "state", "action", "objects", "size", "kept", "storage prefix / error"
        )
        for item in report.items:
            table.add_row(
                item.name,
                item.state,
                item.action,
                str(item.objects),
                size(item.bytes),
                str(item.kept),
                item.error or item.storage_prefix,
            )
        out = console()
        if report.items:
            out.print(table)
        verb = "would remove" if report.dry_run else "removed"
        out.print(
            f"{verb} {report.objects} object(s), {size(report.bytes)} "
            f"from {report.versions} version(s)"
            + (
                f"; {'would keep' if report.dry_run else 'kept'} {report.kept} object(s) "
                "other versions reference"
                if report.kept
                else ""
            )
            + ("; run with --delete to remove them" if report.dry_run else "")
        )
    if not report.ok:
        raise typer.Exit(1)

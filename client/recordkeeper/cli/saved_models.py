"""``recordkeeper compare`` and ``recordkeeper inspect-model``: a model's checkpoints by data.

* ``compare MODEL --metric loss [--role train] [--run R ...] [--plot out.png]``: the metric of
  the model's checkpoints grouped by the data version each trained on, per run
  (:mod:`recordkeeper.compare`); ``--plot`` draws it (needs matplotlib, extra ``plot``).
* ``inspect-model PATH``: what trained a SavedModel export, read from the export itself
  (``assets.extra/recordkeeper.json``, :mod:`recordkeeper.exports`) — no service needed.

Added to the main app by :func:`register` (listed in :data:`recordkeeper.cli.app.COMMANDS`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from recordkeeper.cli.common import (
    JsonOpt,
    StorageOpt,
    connect,
    console,
    parse_storage_options,
    print_json,
)
from recordkeeper.compare import Comparison
from recordkeeper.exports import ModelLineage, model_lineage

__all__ = ["compare_cmd", "inspect_model_cmd", "register"]


def register(app: typer.Typer) -> None:
    """Add ``compare`` and ``inspect-model`` to the main ``recordkeeper`` app."""
    app.command("compare")(compare_cmd)
    app.command("inspect-model")(inspect_model_cmd)


def comparison_table(result: Comparison) -> object:
    """A rich Table of the groups: data, run, checkpoints, steps, first, last, best, mean."""
    from rich.table import Table

    table = Table(*Comparison.HEADER, title=result.title)
    for row in result.rows():
        table.add_row(*row)
    return table


def compare_cmd(
    model: Annotated[str, typer.Argument(help="the model whose checkpoints to compare")],
    metric: Annotated[
        str, typer.Option("--metric", help="a metric recorded with checkpoints")
    ] = "loss",
    role: Annotated[str, typer.Option("--role", help="group by the data of this role")] = "train",
    run: Annotated[
        list[str] | None, typer.Option("--run", help="only these runs (repeatable)")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="also draw the metric by step into this file")
    ] = None,
    direction: Annotated[
        str | None,
        typer.Option(
            "--direction",
            help="which value is best: min (lower is better) or max; default: from the "
            "metric's name (loss: min, accuracy: max)",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """A metric of a model's checkpoints, grouped by the data version each trained on."""
    result = connect().compare(model, metric=metric, role=role, runs=run, direction=direction)
    if json_out:
        print_json(result.to_json())
    else:
        console().print(comparison_table(result))
        if result.without_metric:
            console().print(f"{result.without_metric} checkpoint(s) recorded no {metric!r}")
    if plot is not None:
        written = result.plot(plot)
        if not json_out:
            console().print(f"plot written to {written}")


def lineage_text(lineage: ModelLineage) -> object:
    """A rich Table of what trained the export."""
    from rich.table import Table

    table = Table(
        "role", "version", "content digest", "splits", title=f"{lineage.ref} · {lineage.export}"
    )
    for entry in lineage.data:
        table.add_row(
            str(entry.get("role") or ""),
            str(entry["version"]),
            str(entry.get("content_digest") or ""),
            ", ".join(entry.get("splits") or ()) or "all",
        )
    return table


def inspect_model_cmd(
    path: Annotated[str, typer.Argument(help="a SavedModel export directory (local or URL)")],
    storage_options: StorageOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """What trained a SavedModel export, read from the export (works without the service)."""
    lineage = model_lineage(path, storage_options=parse_storage_options(storage_options))
    if json_out:
        print_json(lineage.to_json())
        return
    console().print(lineage_text(lineage))
    console().print(
        f"step {lineage.step}  checkpoint {lineage.checkpoint_uri}\n"
        f"versions along its chain: {', '.join(lineage.versions)}\n"
        f"registered with {lineage.registry} at {lineage.written_at}"
    )

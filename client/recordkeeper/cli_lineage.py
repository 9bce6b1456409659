"""Lineage commands of the ``recordkeeper`` CLI, added to the main app by :func:`register`.

* ``recordkeeper lineage MODEL/CKPT`` — which data trained a checkpoint (a tree: the chain of
  checkpoints, each with the data of its own segment), ``--json`` for the full answer;
* ``recordkeeper consumers REF`` / ``--shard URI_OR_SHA256`` — checkpoints and models trained on
  a version or a shard (``--direct`` leaves out checkpoints that only inherited it);
* ``recordkeeper lock CONFIG`` — pin a training config's data (``--inplace``, ``--update``);
* ``recordkeeper checkpoints ls [MODEL]`` — models, or one model's checkpoints;
* ``recordkeeper checkpoints flush`` — send registrations queued while the service was down.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from recordkeeper.lineage import Consumers, Lineage

__all__ = ["consumers_tree", "lineage_tree", "register"]

checkpoints_app = typer.Typer(help="Registered checkpoints.", no_args_is_help=True)
# Module-level: typer evaluates these annotations in this module's namespace.
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a tree or table.")]


def _splits(names: tuple[str, ...] | list[str]) -> str:
    return f"[{', '.join(names)}]"


def _short(digest: str | None) -> str:
    return (digest or "")[: len("sha256:") + 12]


def lineage_tree(result: Lineage) -> Any:
    """A rich Tree: the queried checkpoint, then each checkpoint up its chain with its data."""
    from rich.markup import escape
    from rich.tree import Tree

    own: dict[tuple[str, str], list[str]] = {}
    for entry in result.data:
        for segment in entry.segments:
            label = (
                f"[bold]{entry.version}[/]  {entry.role} {escape(_splits(segment.splits))}  "
                f"[dim]{_short(entry.content_digest)}[/]"
                + ("  [red]deprecated[/]" if entry.state == "deprecated" else "")
            )
            own.setdefault((segment.model, segment.checkpoint), []).append(label)
    head = result.checkpoint
    title = (
        f"[bold cyan]{head.model}/{head.checkpoint}[/]  "
        f"{len(result.chain)} checkpoint(s) in its chain, {len(result.versions)} version(s)"
    )
    tree = Tree(title)
    for link in result.chain:
        step = f"step {link['step']}" if link.get("step") is not None else "no step"
        parent = f"  [dim]{link['parent_kind']}[/]" if link.get("parent_kind") else "  [dim]root[/]"
        node = tree.add(f"{link['model']}/{link['checkpoint']}  {step}{parent}")
        for label in own.get((link["model"], link["checkpoint"]), []) or ["[dim](no data)[/]"]:
            node.add(label)
    return tree


def consumers_tree(result: Consumers, title: str) -> Any:
    """A rich Tree: models, each with its checkpoints (``*`` marks direct consumers)."""
    from rich.markup import escape
    from rich.tree import Tree

    tree = Tree(
        f"[bold]{escape(title)}[/]  {result.count} checkpoint(s), {len(result.models)} model(s)"
    )
    by_model: dict[str, Any] = {}
    for summary in result.models:
        by_model[summary["model"]] = tree.add(
            f"[bold cyan]{summary['model']}[/]  {summary['checkpoints']} checkpoint(s), "
            f"{summary['direct']} trained on it directly"
        )
    for consumer in result.checkpoints:
        node = by_model.get(consumer.model) or tree.add(consumer.model)
        how = (
            f"* {', '.join(consumer.roles)} {escape(_splits(consumer.splits))}"
            if consumer.direct
            else f"[dim]via {consumer.parent}[/]"
        )
        step = f"step {consumer.step}" if consumer.step is not None else ""
        node.add(f"{consumer.checkpoint}  {step}  {how}")
    return tree


def register(app: typer.Typer) -> None:
    """Add the lineage commands to the main ``recordkeeper`` app."""
    from recordkeeper.cli import _console, _handle_errors, _print_json

    @app.command("lineage")
    @_handle_errors
    def lineage_cmd(
        checkpoint: Annotated[str, typer.Argument(help="MODEL/CHECKPOINT, e.g. det/ckpt-1234")],
        json_out: JsonOpt = False,
    ) -> None:
        """Which data trained a checkpoint: every version along its complete parent chain."""
        from recordkeeper.lineage import lineage

        client = _client()
        if json_out:
            _print_json(client._request("GET", _lineage_path(checkpoint)))
            return
        _console().print(lineage_tree(lineage(client, checkpoint)))

    @app.command("consumers")
    @_handle_errors
    def consumers_cmd(
        ref: Annotated[str | None, typer.Argument(help="a version reference")] = None,
        shard: Annotated[
            str | None, typer.Option("--shard", help="a shard URI or sha256 instead of a version")
        ] = None,
        direct: Annotated[
            bool, typer.Option("--direct", help="only checkpoints whose own segment used it")
        ] = False,
        json_out: JsonOpt = False,
    ) -> None:
        """Checkpoints and models trained on a version (or on one shard)."""
        from recordkeeper.lineage import consumers, shard_consumers

        if (ref is None) == (shard is None):
            raise typer.BadParameter("give a version reference or --shard, not both")
        client = _client()
        if shard is not None:
            result = shard_consumers(client, shard, transitive=not direct)
            title = f"shard {shard}"
        else:
            assert ref is not None
            result = consumers(client, ref, transitive=not direct)
            title = ", ".join(v["name"] for v in result.versions) or ref
        if json_out:
            _print_json(_consumers_json(result))
            return
        _console().print(consumers_tree(result, title))

    @app.command("lock")
    @_handle_errors
    def lock_cmd(
        config: Annotated[Path, typer.Argument(help="training config (YAML or JSON)")],
        inplace: Annotated[
            bool, typer.Option("--inplace", help="rewrite CONFIG instead of CONFIG.lock")
        ] = False,
        output: Annotated[
            Path | None, typer.Option("--output", help="write the locked config here")
        ] = None,
        update: Annotated[
            bool, typer.Option("--update", help="re-resolve entries locked before")
        ] = False,
        key: Annotated[str, typer.Option("--key", help="dotted path of the data section")] = "data",
        json_out: JsonOpt = False,
    ) -> None:
        """Pin the data references of a training config to exact versions and digests."""
        from rich.table import Table

        from recordkeeper.pinned import lock_config

        target, pinned = lock_config(
            _client(), config, inplace=inplace, output=output, update=update, key=key
        )
        rows = [
            {
                "entry": e.key,
                "role": e.role,
                "version": e.ref,
                "digest": e.digest,
                "locked_from": e.locked_from,
            }
            for e in pinned.entries
        ]
        if json_out:
            _print_json({"path": str(target), "data": rows})
            return
        table = Table("entry", "role", "version", "digest", "from", title=f"locked {target}")
        for row in rows:
            table.add_row(
                row["entry"],
                row["role"],
                row["version"],
                _short(row["digest"]),
                row["locked_from"] or "",
            )
        _console().print(table)

    @checkpoints_app.command("ls")
    @_handle_errors
    def checkpoints_ls(
        model: Annotated[str | None, typer.Argument(help="a model; omit to list models")] = None,
        limit: Annotated[int | None, typer.Option("--limit", min=1)] = None,
        json_out: JsonOpt = False,
    ) -> None:
        """List models, or the checkpoints of one model (highest step first)."""
        from rich.table import Table

        from recordkeeper.lineage import checkpoints, models

        client = _client()
        if model is None:
            found = models(client, limit=limit)
            if json_out:
                _print_json([m.__dict__ for m in found])
                return
            table = Table("model", "checkpoints", "latest", "created")
            for m in found:
                table.add_row(
                    m.name, str(m.checkpoint_count), m.latest_checkpoint or "", m.created_at or ""
                )
            _console().print(table)
            return
        items = checkpoints(client, model, limit=limit)
        if json_out:
            _print_json([_checkpoint_json(c) for c in items])
            return
        table = Table("checkpoint", "step", "parent", "data", "saved models", "created")
        for c in items:
            data = ", ".join(f"{d['version']} ({d['role']})" for d in c.data)
            parent = f"{c.parent} ({c.parent_kind})" if c.parent else ""
            table.add_row(
                c.checkpoint,
                "" if c.step is None else str(c.step),
                parent,
                data,
                ", ".join(s.name for s in c.saved_models),
                c.created_at or "",
            )
        _console().print(table)

    @checkpoints_app.command("flush")
    @_handle_errors
    def checkpoints_flush(
        queue: Annotated[
            Path | None, typer.Option("--queue", help="queue file [default: per-user data dir]")
        ] = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Send checkpoint registrations queued while the service was unreachable."""
        from recordkeeper.lineage_queue import RegistrationQueue

        pending_queue = RegistrationQueue(_client(), queue)
        result = pending_queue.flush()
        registered = [f"{c.model}/{c.checkpoint}" for c in result.registered]
        if json_out:
            _print_json(
                {
                    "queue": str(pending_queue.path),
                    "registered": registered,
                    "pending": result.pending,
                    "rejected": result.rejected,
                }
            )
        else:
            _console().print(
                f"registered {len(registered)}, still pending {result.pending}, "
                f"rejected {result.rejected} ({pending_queue.path})"
            )
        if result.pending:
            raise typer.Exit(1)

    app.add_typer(checkpoints_app, name="checkpoints")


def _client() -> Any:
    """The CLI's client (looked up at call time: ``--url``/``--token`` are set by then)."""
    from recordkeeper import cli

    return cli._client()


def _lineage_path(checkpoint: str) -> str:
    from recordkeeper._http import quote_segment
    from recordkeeper.core.lineage import parse_checkpoint_ref

    ref = parse_checkpoint_ref(checkpoint)
    return f"/models/{quote_segment(ref.model)}/checkpoints/{quote_segment(ref.checkpoint)}/lineage"


def _checkpoint_json(c: Any) -> dict[str, Any]:
    return {
        "model": c.model,
        "checkpoint": c.checkpoint,
        "step": c.step,
        "uri": c.uri,
        "run": c.run,
        "parent": str(c.parent) if c.parent else None,
        "parent_kind": c.parent_kind,
        "data": list(c.data),
        "saved_models": [s.to_json() for s in c.saved_models],
        "metrics": dict(c.metrics),
        "created_at": c.created_at,
    }


def _consumers_json(result: Consumers) -> dict[str, Any]:
    return {
        "versions": list(result.versions),
        "shards": list(result.shards),
        "models": list(result.models),
        "count": result.count,
        "checkpoints": [
            {
                "ref": str(c.ref),
                "model": c.model,
                "checkpoint": c.checkpoint,
                "step": c.step,
                "uri": c.uri,
                "direct": c.direct,
                "roles": list(c.roles),
                "splits": list(c.splits),
                "parent": str(c.parent) if c.parent else None,
            }
            for c in result.checkpoints
        ],
    }

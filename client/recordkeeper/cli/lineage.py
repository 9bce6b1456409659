"""Lineage commands of the ``recordkeeper`` CLI, added to the main app by :func:`register`
(listed in :data:`recordkeeper.cli.app.COMMANDS`).

* ``recordkeeper lineage MODEL[@RUN]/CKPT`` — which data trained a checkpoint (a tree: the chain
  of checkpoints, each with the data of its own segment; its end is ``root``, or the parent it
  records that was never registered; then the data's history, each version down its parents
  to the raw sources and producers), ``--json`` for the full answer;
* ``recordkeeper impact REF`` / ``--source URI [--prefix]`` — what a version or a raw source
  affects: every version derived from it and every checkpoint trained on one of them;
* ``recordkeeper consumers REF`` / ``--shard URI_OR_SHA256`` — checkpoints and models trained on
  a version or a shard (``--direct`` leaves out checkpoints that only inherited it);
* ``recordkeeper lock CONFIG`` — pin a training config's data into its lock file
  (``train.yaml`` → ``train.lock.yaml``; ``--inplace``, ``--update``), printing what changed;
  ``--check`` only checks the lock (stale, deprecated, changed content) and exits 4 if not ok;
* ``recordkeeper checkpoints ls [MODEL]`` — models, or one model's checkpoints (``--run``);
* ``recordkeeper checkpoints check MODEL`` — mark checkpoints whose files are gone as deleted
  (a storage error leaves a checkpoint unchecked, with its reason, and the check goes on);
* ``recordkeeper checkpoints flush`` — send registrations queued while the service was down.

Checkpoints are shown as ``model@run/ckpt-N`` (the run tells reruns of a model name apart);
deleted ones are marked ``deleted``.  A version whose data retention deleted stays in every
answer, marked ``(data deleted 2026-12-01 (retention))``; ``--json`` carries its
``data_state``, ``data_deleted_at`` and ``data_deleted_reason``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from recordkeeper.checkpoint_lineage import (
    CheckpointInfo,
    Consumers,
    Impact,
    Lineage,
    checkpoint_ref_or_path,
)
from recordkeeper.cli.common import ExitCode, JsonOpt, connect, console, print_json
from recordkeeper.core.data_lineage import HistoryEntry, describe
from recordkeeper.core.display import counted
from recordkeeper.core.lineage import CheckpointRef, Consumer
from recordkeeper.core.retention import data_status
from recordkeeper.lineage_queue import RegistrationQueue
from recordkeeper.locking import LockStatus, check_lock, lock_config
from recordkeeper.provenance import source_uri

if TYPE_CHECKING:
    from recordkeeper.client import Client

__all__ = [
    "checkpoints_app",
    "consumers_cmd",
    "consumers_tree",
    "history_tree",
    "impact_cmd",
    "impact_tree",
    "lineage_cmd",
    "lineage_tree",
    "lock_cmd",
    "register",
    "unregistered_parents",
]

checkpoints_app = typer.Typer(help="Registered checkpoints.", no_args_is_help=True)


def _splits(names: tuple[str, ...] | list[str]) -> str:
    return f"[{', '.join(names)}]"


def _short(digest: str | None) -> str:
    return (digest or "")[: len("sha256:") + 12]


def _deleted(state: str | None) -> str:
    return "  [red]deleted[/]" if state == "deleted" else ""


def _data_note(version: Mapping[str, Any]) -> str:
    """`` (data deleted 2026-12-01 (retention))`` for a version answer's mapping (a consumers
    answer's ``versions``, a checkpoint's ``data``) whose data was deleted, else ``""``."""
    state = version.get("data_state") or "stored"
    if state == "stored":
        return ""
    text = data_status(state, version.get("data_deleted_at"), version.get("data_deleted_reason"))
    return f" ({text})"


def _chain_end(link: Mapping[str, Any], unregistered: Mapping[str, str]) -> str:
    """How a chain link names what it descends from: its parent kind, the parent it records
    but the service does not know (``metadata.unregistered_parent``), or ``root``."""
    from rich.markup import escape

    if link.get("parent_kind"):
        return f"  [dim]{link['parent_kind']}[/]"
    ref = str(CheckpointRef(link["model"], link["checkpoint"], link.get("run")))
    if ref in unregistered:
        return f"  [yellow]parent not registered: {escape(unregistered[ref])}[/]"
    return "  [dim]root[/]"


def unregistered_parents(client: Client, result: Lineage) -> dict[str, str]:
    """``{ref: parent}`` for the end of ``result``'s chain when it records a parent the service
    does not know (trained from a checkpoint never registered): that checkpoint is not a root,
    its chain is cut there.  Asks the service for the end's metadata (the chain carries none)."""
    if not result.chain or result.chain[-1].get("parent_kind"):
        return {}
    end = result.chain[-1]
    ref = CheckpointRef(end["model"], end["checkpoint"], end.get("run"))
    head = result.checkpoint
    info = head if head.ref == ref else client.checkpoint(ref)
    parent = (info.metadata or {}).get("unregistered_parent")
    return {str(ref): str(parent)} if parent else {}


def lineage_tree(result: Lineage, unregistered: Mapping[str, str] | None = None) -> Any:
    """A rich Tree: the queried checkpoint, then each checkpoint up its chain with its data.

    The end of the chain is marked ``root``, or — when ``unregistered`` names a parent it
    records that was never registered (:func:`unregistered_parents`) — with that parent."""
    from rich.markup import escape
    from rich.tree import Tree

    seen: dict[tuple[str, str, str], str] = {}  # (checkpoint, version, role) → "0.30 epochs"
    for used in result.consumed:
        for seg in used["segments"]:
            if seg.get("epochs") is not None:
                seen[(seg["checkpoint"], used["version"], used["role"])] = (
                    f"  {seg['records']} records, {seg['epochs']:.2f} epochs"
                )
    own: dict[str, list[str]] = {}
    for entry in result.data:
        for segment in entry.segments:
            label = (
                f"[bold]{entry.version}[/]  {entry.role} {escape(_splits(segment.splits))}  "
                f"[dim]{_short(entry.content_digest)}[/]"
                + seen.get((str(segment.ref), entry.version, entry.role), "")
                + ("  [red]deprecated[/]" if entry.state == "deprecated" else "")
                + (f"  [red]({entry.data_status()})[/]" if entry.data_deleted else "")
            )
            own.setdefault(str(segment.ref), []).append(label)
    head = result.checkpoint
    title = (
        f"[bold cyan]{head.ref}[/]{_deleted(head.state)}  "
        f"{len(result.chain)} checkpoint(s) in its chain, {len(result.versions)} version(s)"
    )
    tree = Tree(title)
    for link in result.chain:
        ref = str(CheckpointRef(link["model"], link["checkpoint"], link.get("run")))
        step = f"step {link['step']}" if link.get("step") is not None else "no step"
        parent = _chain_end(link, unregistered or {})
        node = tree.add(f"{ref}  {step}{parent}{_deleted(link.get('state'))}")
        for label in own.get(ref, []) or ["[dim](no data)[/]"]:
            node.add(label)
    for used in result.consumed:
        if not used["counted_segments"]:
            continue
        bound = (
            f", at least: {used['unknown_segments']} segment(s) not counted"
            if used["unknown_segments"]
            else ""
        )
        tree.add(
            f"saw {used['epochs']:.2f} epochs of [bold]{used['version']}[/] as {used['role']} "
            f"({used['records']} records{bound})"
        )
    if result.history:
        history_tree(tree.add("[bold]data history[/]"), result.history)
        if result.history_truncated:
            tree.add("[yellow]data history cut at its guard (100,000 versions)[/]")
    return tree


def history_tree(node: Any, history: Sequence[HistoryEntry]) -> None:
    """Add each version of ``history`` that the chain trained on (depth 0) under ``node``, then
    its parents under it, to the raw sources and producers: one
    :func:`~recordkeeper.core.data_lineage.describe` line per version, with its sources'
    identities and its producer's branch and entry script."""
    from rich.markup import escape

    by_name = {e.version: e for e in history}

    def add(parent: Any, entry: HistoryEntry, seen: frozenset[str]) -> None:
        child = parent.add(f"[bold]{escape(describe(entry))}[/]")
        detail = []
        producer = entry.producer or {}
        if producer.get("commit"):
            where = " ".join(str(x) for x in (producer.get("branch"), producer.get("entry")) if x)
            detail.append(f"code {entry.commit} {where}".rstrip())
        if entry.params_digest:
            detail.append(f"params {_short(entry.params_digest)}")
        for line in detail:
            child.add(f"[dim]{escape(line)}[/]")
        for source in entry.sources:
            identity = source.get("identity") or {}
            note = (
                f"  {identity.get('files')} file(s), {identity.get('method')} "
                f"{_short(identity.get('digest'))}"
                if identity
                else ""
            )
            child.add(f"[dim]source {escape(str(source['uri']))}{escape(note)}[/]")
        for p in entry.parents_base_first:
            up = by_name.get(p["version"])
            if up is not None and up.version not in seen:
                add(child, up, seen | {up.version})

    for entry in history:
        if entry.depth == 0:
            add(node, entry, frozenset({entry.version}))


def impact_tree(result: Impact, title: str) -> Any:
    """A rich Tree: the matched sources, the affected versions (derived ones under what they
    derive from), then models with their checkpoints (``*``: trained on an affected version)."""
    from rich.markup import escape
    from rich.tree import Tree

    tree = Tree(
        f"[bold]{escape(title)}[/]  {len(result.versions)} version(s), "
        f"{result.count} checkpoint(s), {len(result.models)} model(s)"
    )
    for source in result.sources:
        tree.add(f"source {escape(source['uri'])}  recorded by [bold]{source['version']}[/]")
    versions = tree.add("[bold]versions[/]")
    for v in result.versions:
        via = ", ".join(f"{p['version']} ({p['role']})" for p in v.get("via") or ())
        how = f"  [dim]from {escape(via)}[/]" if via else ""
        state = "" if v.get("state") == "committed" else f"  [yellow]{v.get('state')}[/]"
        versions.add("  " * int(v.get("depth") or 0) + f"{v['name']}{how}{state}")
    by_model: dict[str, Any] = {}
    for summary in result.models:
        by_model[summary["model"]] = tree.add(
            f"[bold cyan]{summary['model']}[/]  {summary['checkpoints']} checkpoint(s), "
            f"{summary['direct']} trained on an affected version"
        )
    for consumer in result.checkpoints:
        node = by_model.get(consumer.model) or tree.add(consumer.model)
        used = result.checkpoint_versions.get(str(consumer.ref), ())
        how = (
            f"* {', '.join(used) or ', '.join(consumer.roles)}"
            if consumer.direct
            else f"[dim]via {consumer.parent}[/]"
        )
        node.add(_consumer_line(consumer, how))
    return tree


def _consumer_line(consumer: Consumer, how: str) -> str:
    """One checkpoint under its model in a consumers or impact tree: ``@run/ckpt``, its step,
    how it used the data (``how``) and whether it was deleted."""
    step = f"step {consumer.step}" if consumer.step is not None else ""
    name = f"@{consumer.run}/{consumer.checkpoint}" if consumer.run else consumer.checkpoint
    return f"{name}  {step}  {how}{_deleted(consumer.state)}"


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
        node.add(_consumer_line(consumer, how))
    return tree


def register(app: typer.Typer) -> None:
    """Add the lineage commands to the main ``recordkeeper`` app."""
    app.command("lineage")(lineage_cmd)
    app.command("consumers")(consumers_cmd)
    app.command("impact")(impact_cmd)
    app.command("lock")(lock_cmd)
    app.add_typer(checkpoints_app, name="checkpoints")


def lineage_cmd(
    checkpoint: Annotated[
        str,
        typer.Argument(
            help="MODEL/CHECKPOINT or MODEL@RUN/CHECKPOINT (det/ckpt-1234), or the path a "
            "training script printed (checkpoints/mnist/ckpt-2): the registered checkpoint "
            "stored there"
        ),
    ],
    json_out: JsonOpt = False,
) -> None:
    """Which data trained a checkpoint: every version along its complete parent chain."""
    client = connect()
    checkpoint = str(checkpoint_ref_or_path(client.http, checkpoint))
    if json_out:
        print_json(client.lineage_json(checkpoint))
        return
    result = client.lineage(checkpoint)
    console().print(lineage_tree(result, unregistered_parents(client, result)))


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
    if (ref is None) == (shard is None):
        raise typer.BadParameter("give a version reference or --shard: exactly one of them")
    client = connect()
    if shard is not None:
        result = client.shard_consumers(shard, transitive=not direct)
        title = f"shard {shard}"
    else:
        assert ref is not None
        result = client.consumers(ref, transitive=not direct)
        title = ", ".join(v["name"] + _data_note(v) for v in result.versions) or ref
    if json_out:
        print_json(_consumers_json(result))
        return
    console().print(consumers_tree(result, title))
    if ref is not None and not result.checkpoints:
        derived = client.children(ref)
        if derived:  # "which checkpoints used this data?" goes on through them: say where
            names = ", ".join(d["name"] for d in derived[:3]) + (", …" if len(derived) > 3 else "")
            console().print(
                f"{counted(len(derived), 'version')} derived from it ({names}): "
                f"`recordkeeper impact {ref}` lists the checkpoints trained on those",
                markup=False,
                highlight=False,
            )


def impact_cmd(
    version: Annotated[str | None, typer.Argument(help="a version reference")] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="a raw source URI or local path (a file or a prefix) instead of a version: "
            "the versions that recorded it, or a prefix it lies under",
        ),
    ] = None,
    prefix: Annotated[
        bool,
        typer.Option("--prefix", help="with --source: also sources recorded under it"),
    ] = False,
    direct: Annotated[
        bool,
        typer.Option("--direct", help="only checkpoints whose own segment used a version"),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """What a version or a raw source affects: every version derived from it (through
    provenance parents, any depth) and every checkpoint trained on one of them."""
    if (version is None) == (source is None):
        raise typer.BadParameter("give a version reference or --source URI: exactly one of them")
    if prefix and source is None:
        raise typer.BadParameter("--prefix goes with --source")
    if source is not None:
        source = source_uri(source)  # a local path, as publish --source recorded it
    client = connect()
    if json_out:
        print_json(
            client.impact_json(version=version, source=source, prefix=prefix, transitive=not direct)
        )
        return
    result = client.impact(version=version, source=source, prefix=prefix, transitive=not direct)
    title = f"source {source}{' (prefix)' if prefix else ''}" if source else str(version)
    console().print(impact_tree(result, title))


def lock_cmd(
    config: Annotated[Path, typer.Argument(help="training config (YAML or JSON)")],
    inplace: Annotated[
        bool,
        typer.Option(
            "--inplace",
            help="rewrite CONFIG itself instead of its lock file (train.yaml → train.lock.yaml)",
        ),
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            help="write the lock here instead of beside CONFIG",
            show_default="CONFIG's lock file: train.yaml → train.lock.yaml",
        ),
    ] = None,
    update: Annotated[
        bool,
        typer.Option("--update", help="move pins to what their references resolve to now"),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="write nothing; exit 4 if the lock is missing or stale, or a pinned version "
            "is deprecated, gone or holds other content (for CI)",
        ),
    ] = False,
    key: Annotated[str, typer.Option("--key", help="dotted path of the data section")] = "data",
    json_out: JsonOpt = False,
) -> None:
    """Pin a training config's data references to exact versions and content digests, in the
    config's lock file beside it (train.yaml → train.lock.yaml, train.json → train.lock.json).

    Pins already in the lock never move without --update; what changed is printed.
    """
    if check:
        if update or inplace:
            raise typer.BadParameter("--check writes nothing: drop --update/--inplace")
        _print_check(check_lock(connect(), config, output=output, key=key), json_out)
        return
    target, pinned = lock_config(
        connect(), config, inplace=inplace, output=output, update=update, key=key
    )
    if json_out:
        print_json(
            {
                "path": str(target),
                "data": [
                    {
                        "entry": e.key,
                        "role": e.role,
                        "version": e.ref,
                        "digest": e.digest,
                        "locked_from": e.locked_from,
                    }
                    for e in pinned.entries
                ],
                "changes": [c.to_dict() for c in pinned.changes],
            }
        )
        return
    from rich.markup import escape
    from rich.table import Table

    marks = {
        "added": "[green]added[/]",
        "removed": "[red]removed[/]",
        "updated": "[yellow]updated[/]",
        "relocked": "[yellow]config changed[/]",
        "unchanged": "unchanged",
    }
    table = Table("entry", "change", "version", "digest", "from", title=f"locked {target}")
    for change in pinned.changes:
        if change.change in ("updated", "relocked"):
            version = f"{change.old_version} → {change.new_version}"
        else:
            version = change.new_version or change.old_version or ""
        note = f" (now {change.available}: --update moves it)" if change.available else ""
        table.add_row(
            change.key,
            marks[change.change],
            escape(version) + note,
            _short(change.new_digest or change.old_digest),
            change.requested or "",
        )
    console().print(table)


def _print_check(status: LockStatus, json_out: bool) -> None:
    """Print a :class:`~recordkeeper.pinned.LockStatus`; exit 4 unless it is ok."""
    if json_out:
        print_json(status.to_dict())
    else:
        out = console()
        if status.missing:
            out.print(f"[red]no lock[/] {status.lock}: run `recordkeeper lock {status.config}`")
        for key, why in status.stale.items():
            where = f"data.{key}: " if key != "*" else ""
            out.print(f"[red]stale[/] {where}{why}")
        for entry in status.entries:
            if entry.ok:
                note = f"  ({entry.available} is newer: lock --update)" if entry.available else ""
                out.print(f"[green]ok[/]    data.{entry.key}: {entry.version}{note}")
            else:
                out.print(f"[red]{entry.code}[/] data.{entry.key}: {entry.problem}")
        verdict = "[green]lock ok[/]" if status.ok else "[red]lock not ok[/]"
        out.print(f"{verdict}: {status.lock}")
    if not status.ok:
        raise typer.Exit(int(ExitCode.VERIFICATION_FAILED))


@checkpoints_app.command("ls")
def checkpoints_ls(
    model: Annotated[str | None, typer.Argument(help="a model; omit to list models")] = None,
    run: Annotated[str | None, typer.Option("--run", help="only this run's checkpoints")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1)] = None,
    json_out: JsonOpt = False,
) -> None:
    """List models, or the checkpoints of one model (highest step first)."""
    from rich.table import Table

    client = connect()
    if model is None:
        found = client.models(limit=limit)
        if json_out:
            print_json([m.__dict__ for m in found])
            return
        table = Table("model", "checkpoints", "latest", "created")
        for m in found:
            table.add_row(
                m.name, str(m.checkpoint_count), m.latest_checkpoint or "", m.created_at or ""
            )
        console().print(table)
        return
    items = client.checkpoints(model, run=run, limit=limit)
    if json_out:
        print_json([_checkpoint_json(c) for c in items])
        return
    table = Table("checkpoint", "run", "state", "step", "parent", "data", "saved models", "created")
    for c in items:
        data = ", ".join(f"{d['version']} ({d['role']}){_data_note(d)}" for d in c.data)
        parent = f"{c.parent} ({c.parent_kind})" if c.parent else ""
        table.add_row(
            c.checkpoint,
            c.run or "",
            c.state if not c.deleted else f"deleted {c.deleted_at or ''}".strip(),
            "" if c.step is None else str(c.step),
            parent,
            data,
            ", ".join(s.name for s in c.saved_models),
            c.created_at or "",
        )
    console().print(table)


@checkpoints_app.command("check")
def checkpoints_check(
    model: Annotated[str, typer.Argument(help="the model whose checkpoints to look for")],
    run: Annotated[str | None, typer.Option("--run", help="only this run's checkpoints")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="report missing files without recording anything")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Look at storage for a model's checkpoints; mark those whose files are gone as deleted.

    A checkpoint storage cannot answer for (no filesystem for its scheme, access denied,
    endpoint unreachable) is listed unchecked with the reason, and the others are still checked.
    Exits 1 when some were missing (recorded now, or only reported with --dry-run) or could not
    be checked because of a storage error.
    """
    report = connect().check_checkpoints(model, run=run, dry_run=dry_run)
    if json_out:
        print_json(report.to_json())
    else:
        from rich.markup import escape

        out = console()
        verb = "missing (not recorded, --dry-run)" if dry_run else "missing, marked deleted"
        for ref in report.missing:
            out.print(f"{ref}  [red]{verb}[/]")
        for ref in report.errors:
            out.print(f"{ref}  [yellow]unchecked[/]: {escape(report.reasons[ref])}")
        no_uri = len(report.unchecked) - len(report.errors)
        out.print(
            f"{model}: {len(report.present)} present, {len(report.missing)} {verb}, "
            f"{len(report.errors)} unchecked (storage error), {no_uri} without a URI"
        )
    if not report.ok:
        raise typer.Exit(int(ExitCode.ERROR))


@checkpoints_app.command("flush")
def checkpoints_flush(
    queue: Annotated[
        Path | None, typer.Option("--queue", help="queue file [default: per-user data dir]")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Send checkpoint registrations queued while the service was unreachable."""
    pending_queue = RegistrationQueue(connect(), queue)
    result = pending_queue.flush()
    registered = [str(c.ref) for c in result.registered]
    if json_out:
        print_json(
            {
                "queue": str(pending_queue.path),
                "registered": registered,
                "pending": result.pending,
                "rejected": result.rejected,
            }
        )
    else:
        console().print(
            f"registered {len(registered)}, still pending {result.pending}, "
            f"rejected {result.rejected} ({pending_queue.path})"
        )
    if result.pending:
        raise typer.Exit(1)


def _checkpoint_json(c: CheckpointInfo) -> dict[str, Any]:
    return {
        "ref": str(c.ref),
        "model": c.model,
        "run": c.run,
        "checkpoint": c.checkpoint,
        "state": c.state,
        "deleted_at": c.deleted_at,
        "deleted_reason": c.deleted_reason,
        "step": c.step,
        "uri": c.uri,
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
                "run": c.run,
                "checkpoint": c.checkpoint,
                "state": c.state,
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

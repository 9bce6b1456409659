"""The lineage graph around one node: breadth-first, level by level, bounded.

Nodes are checkpoints (``checkpoint:<model>@<run>/<ckpt>``) and versions (``version:<name>``).
Edges point the way data flows: ``version → checkpoint`` (``trained_on``, with role and splits) and
``parent → child`` (``restored_from`` / ``initialized_from``).  *Upstream* walks edges backwards
(what went into the node), *downstream* forwards (what came out of it); ``both`` does the two
walks from the root separately, so siblings are not pulled in.  Each level costs two queries over
the whole frontier, reading at most ``ROWS_PER_NODE`` rows per node the answer may hold; the walk
stops at ``depth`` hops or ``max_nodes`` nodes (``truncated``), so a version with 100,000
consumers costs what ``max_nodes`` of them cost.

A version node carries its data state (``data_state``, ``data_deleted_at``,
``data_deleted_reason``): retention may have deleted its objects, never its place in the graph.

Every node carries ``upstream_count`` and ``downstream_count``: how many distinct neighbours it has
on each side in the whole registry, whether or not they are in the answer.  A viewer shows a
graph one hop deep and offers "N more" on each node from these counts (expand on demand).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import distinct, func, select
from sqlalchemy.orm import Session

from recordkeeper_service import models as m
from recordkeeper_service.domain import data_state_json
from recordkeeper_service.models.lineage import Checkpoint, CheckpointData, Model, Run
from recordkeeper_service.repository.lineage.records import GraphRecord

__all__ = ["build_graph"]

NodeKey = tuple[str, int]  # ("checkpoint" | "version", id)
EdgeKey = tuple[NodeKey, NodeKey, str, str | None]  # source, target, kind, role


def _ids(frontier: Iterable[NodeKey], kind: str) -> list[int]:
    return sorted(i for k, i in frontier if k == kind)


#: Rows read per query and level, per node the answer may hold: a checkpoint's segment lists one
#: row per (version, role, split); beyond this the level is cut (``truncated``).
ROWS_PER_NODE = 16


def _step(
    session: Session,
    frontier: set[NodeKey],
    upstream: bool,
    edges: dict[EdgeKey, set[str]],
    max_rows: int,
) -> tuple[set[NodeKey], bool]:
    """Expand one level; record edges; return the nodes reached, and whether a query stopped
    at ``max_rows`` rows (a version with more consumers than an answer may hold)."""
    reached: set[NodeKey] = set()
    cut = False
    ckpts = _ids(frontier, "checkpoint")
    versions = _ids(frontier, "version")
    if ckpts:
        link = Checkpoint.id.in_(ckpts) if upstream else Checkpoint.parent_id.in_(ckpts)
        links = session.execute(
            select(Checkpoint.id, Checkpoint.parent_id, Checkpoint.parent_kind)
            .where(link, Checkpoint.parent_id.is_not(None))
            .order_by(Checkpoint.id)
            .limit(max_rows)
        ).all()
        cut |= len(links) == max_rows
        for child, parent, kind in links:
            # the query's filter, and the constraint ``parent_kind`` (a parent has a kind)
            assert parent is not None and kind is not None
            source, target = ("checkpoint", parent), ("checkpoint", child)
            edges.setdefault((source, target, kind, None), set())
            reached.add(source if upstream else target)
    data_filter = None
    if upstream and ckpts:
        data_filter = CheckpointData.checkpoint_id.in_(ckpts)
    elif not upstream and versions:
        data_filter = CheckpointData.version_id.in_(versions)
    if data_filter is not None:
        rows = session.execute(
            select(
                CheckpointData.checkpoint_id,
                CheckpointData.version_id,
                CheckpointData.role,
                CheckpointData.split,
            )
            .where(data_filter)
            .order_by(CheckpointData.checkpoint_id, CheckpointData.version_id)
            .limit(max_rows)
        ).all()
        cut |= len(rows) == max_rows
        for ckpt, version, role, split in rows:
            source, target = ("version", version), ("checkpoint", ckpt)
            edges.setdefault((source, target, "trained_on", role), set()).add(split)
            reached.add(source if upstream else target)
    return reached, cut


def _walk(
    session: Session,
    root: NodeKey,
    *,
    upstream: bool,
    depth: int,
    max_nodes: int,
    nodes: set[NodeKey],
    edges: dict[EdgeKey, set[str]],
) -> bool:
    """One direction's breadth-first walk; True if it stopped at ``max_nodes``."""
    frontier = {root}
    seen = {root}
    for _ in range(depth):
        if not frontier:
            break
        reached, cut = _step(session, frontier, upstream, edges, max_nodes * ROWS_PER_NODE)
        reached -= seen
        if cut or len(nodes | reached) > max_nodes:
            room = max_nodes - len(nodes)
            reached = set(sorted(reached)[: max(room, 0)])
            nodes.update(reached)
            return True
        nodes.update(reached)
        seen.update(reached)
        frontier = reached
    return False


def _attributes(session: Session, nodes: set[NodeKey]) -> dict[NodeKey, dict[str, Any]]:
    attrs: dict[NodeKey, dict[str, Any]] = {}
    ckpts = _ids(nodes, "checkpoint")
    if ckpts:
        for cid, model, run, name, step, uri, state in session.execute(
            select(
                Checkpoint.id,
                Model.name,
                Run.name,
                Checkpoint.name,
                Checkpoint.step,
                Checkpoint.uri,
                Checkpoint.state,
            )
            .join(Model, Model.id == Checkpoint.model_id)
            .join(Run, Run.id == Checkpoint.run_id)
            .where(Checkpoint.id.in_(ckpts))
        ):
            attrs[("checkpoint", cid)] = {
                "id": f"checkpoint:{model}@{run}/{name}",
                "kind": "checkpoint",
                "model": model,
                "run": run,
                "checkpoint": name,
                "state": state,
                "step": step,
                "uri": uri,
            }
    versions = _ids(nodes, "version")
    if versions:
        for vid, name, dataset, number, digest, state, released, collected, why in session.execute(
            select(
                m.Version.id,
                m.Version.name,
                m.Dataset.name,
                m.Version.number,
                m.Version.content_digest,
                m.Version.state,
                m.Version.gc_claimed_at,
                m.Version.collected_at,
                m.Version.collected_reason,
            )
            .join(m.Dataset, m.Dataset.id == m.Version.dataset_id)
            .where(m.Version.id.in_(versions))
        ):
            attrs[("version", vid)] = {
                "id": f"version:{name}",
                "kind": "version",
                "name": name,
                "dataset": dataset,
                "number": number,
                "content_digest": digest,
                "state": state,
                **data_state_json(state, released, collected, why),
            }
    return attrs


def _neighbour_counts(session: Session, nodes: set[NodeKey]) -> dict[NodeKey, tuple[int, int]]:
    """(upstream, downstream) distinct neighbours of each node, in the whole registry.

    A checkpoint's upstream neighbours are its parent and the versions its segment used; its
    downstream ones the checkpoints restored or initialised from it.  A version has no upstream;
    downstream are the checkpoints whose segments used it.  Four grouped queries in all.
    """
    up: dict[NodeKey, int] = defaultdict(int)
    down: dict[NodeKey, int] = defaultdict(int)
    ckpts = _ids(nodes, "checkpoint")
    versions = _ids(nodes, "version")
    if ckpts:
        for cid, has_parent in session.execute(
            select(Checkpoint.id, Checkpoint.parent_id.is_not(None)).where(Checkpoint.id.in_(ckpts))
        ):
            up[("checkpoint", cid)] += int(bool(has_parent))
        for cid, used in session.execute(
            select(CheckpointData.checkpoint_id, func.count(distinct(CheckpointData.version_id)))
            .where(CheckpointData.checkpoint_id.in_(ckpts))
            .group_by(CheckpointData.checkpoint_id)
        ):
            up[("checkpoint", cid)] += int(used)
        for parent, children in session.execute(
            select(Checkpoint.parent_id, func.count(Checkpoint.id))
            .where(Checkpoint.parent_id.in_(ckpts))
            .group_by(Checkpoint.parent_id)
        ):
            assert parent is not None  # the filter: children of the given checkpoints
            down[("checkpoint", parent)] += int(children)
    if versions:
        for vid, consumers in session.execute(
            select(CheckpointData.version_id, func.count(distinct(CheckpointData.checkpoint_id)))
            .where(CheckpointData.version_id.in_(versions))
            .group_by(CheckpointData.version_id)
        ):
            down[("version", vid)] += int(consumers)
    return {key: (up[key], down[key]) for key in nodes}


def build_graph(
    session: Session, root: NodeKey, *, depth: int, direction: str, max_nodes: int
) -> GraphRecord:
    """The graph within ``depth`` hops of ``root`` (see the module docstring)."""
    nodes: set[NodeKey] = {root}
    edges: dict[EdgeKey, set[str]] = defaultdict(set)
    truncated = False
    for upstream in (True, False):
        if direction == ("downstream" if upstream else "upstream"):
            continue
        truncated |= _walk(
            session,
            root,
            upstream=upstream,
            depth=depth,
            max_nodes=max_nodes,
            nodes=nodes,
            edges=edges,
        )
    attrs = _attributes(session, nodes)
    for key, (upstream_count, downstream_count) in _neighbour_counts(session, nodes).items():
        attrs[key]["upstream_count"] = upstream_count
        attrs[key]["downstream_count"] = downstream_count
    edge_json = []
    for (source, target, kind, role), splits in sorted(
        edges.items(), key=lambda item: (item[0][0], item[0][1], item[0][2], item[0][3] or "")
    ):
        if source not in nodes or target not in nodes:
            continue
        edge: dict[str, Any] = {
            "source": attrs[source]["id"],
            "target": attrs[target]["id"],
            "kind": kind,
        }
        if kind == "trained_on":
            edge["role"] = role
            edge["splits"] = sorted(splits)
        edge_json.append(edge)
    ordered = sorted(nodes, key=lambda key: (key != root, attrs[key]["id"]))
    return GraphRecord(
        root=attrs[root]["id"],
        depth=depth,
        direction=direction,
        nodes=tuple(attrs[key] for key in ordered),
        edges=tuple(edge_json),
        truncated=truncated,
    )

"""The lineage graph around one node: breadth-first, level by level, bounded.

Nodes are checkpoints (``checkpoint:<model>@<run>/<ckpt>``), versions (``version:<name>``, with
their desc, producer and params digest) and raw sources (``source:<uri>``).  Edges point the way
data flows: ``version → checkpoint`` (``trained_on``, with role and splits), ``parent → child``
(``restored_from`` / ``initialized_from``), ``parent version → version`` (``derived_from``, with
the parent's role) and ``source → version`` (``source_of``).  *Upstream* walks edges backwards
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

from recordkeeper_service import tables as m
from recordkeeper_service.domain import data_state_json
from recordkeeper_service.repository.lineage.records import GraphRecord
from recordkeeper_service.repository.provenance import load_provenances
from recordkeeper_service.tables.lineage import Checkpoint, CheckpointData, Model, Run
from recordkeeper_service.tables.provenance import VersionParent, VersionSource

__all__ = ["build_graph"]

NodeKey = tuple[str, Any]  # ("checkpoint" | "version", id) or ("source", uri)
EdgeKey = tuple[NodeKey, NodeKey, str, str | None]  # source, target, kind, role


def _ids(frontier: Iterable[NodeKey], kind: str) -> list[Any]:
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
    uris = _ids(frontier, "source")
    if uris and not upstream:  # a raw source's downstream: the versions that recorded it
        recorded = session.execute(
            select(VersionSource.version_id, VersionSource.uri)
            .where(VersionSource.uri.in_(uris))
            .order_by(VersionSource.version_id, VersionSource.position)
            .limit(max_rows)
        ).all()
        cut |= len(recorded) == max_rows
        for version, uri in recorded:
            edges.setdefault((("source", uri), ("version", version), "source_of", None), set())
            reached.add(("version", version))
    if versions:
        # the data's own history: parent version → derived version, raw source → version
        link = (
            VersionParent.version_id.in_(versions)
            if upstream
            else VersionParent.parent_id.in_(versions)
        )
        derived = session.execute(
            select(VersionParent.version_id, VersionParent.parent_id, VersionParent.role)
            .where(link)
            .order_by(VersionParent.version_id, VersionParent.position)
            .limit(max_rows)
        ).all()
        cut |= len(derived) == max_rows
        for child, parent, role in derived:
            source, target = ("version", parent), ("version", child)
            edges.setdefault((source, target, "derived_from", role), set())
            reached.add(source if upstream else target)
        if upstream:
            raw = session.execute(
                select(VersionSource.version_id, VersionSource.uri)
                .where(VersionSource.version_id.in_(versions))
                .order_by(VersionSource.version_id, VersionSource.position)
                .limit(max_rows)
            ).all()
            cut |= len(raw) == max_rows
            for version, uri in raw:
                raw_node: NodeKey = ("source", uri)
                edges.setdefault((raw_node, ("version", version), "source_of", None), set())
                reached.add(raw_node)
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
                "desc": None,
                "producer": None,
                "params_digest": None,
            }
        for vid, document in load_provenances(session, versions).items():
            producer = document.get("producer")
            attrs[("version", vid)]["producer"] = (
                {k: producer.get(k) for k in ("vcs", "commit", "branch", "dirty", "entry")}
                if producer
                else None
            )
            attrs[("version", vid)]["params_digest"] = document.get("params_digest")
        for vid, desc in session.execute(
            select(m.Version.id, m.Version.desc).where(m.Version.id.in_(versions))
        ):
            attrs[("version", vid)]["desc"] = desc
    for uri in _ids(nodes, "source"):
        attrs[("source", uri)] = {"id": f"source:{uri}", "kind": "source", "uri": uri}
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
        for vid, parents in session.execute(
            select(VersionParent.version_id, func.count(VersionParent.parent_id))
            .where(VersionParent.version_id.in_(versions))
            .group_by(VersionParent.version_id)
        ):
            up[("version", vid)] += int(parents)
        for vid, sources in session.execute(
            select(VersionSource.version_id, func.count(distinct(VersionSource.uri)))
            .where(VersionSource.version_id.in_(versions))
            .group_by(VersionSource.version_id)
        ):
            up[("version", vid)] += int(sources)
        for pid, children in session.execute(
            select(VersionParent.parent_id, func.count(VersionParent.version_id))
            .where(VersionParent.parent_id.in_(versions))
            .group_by(VersionParent.parent_id)
        ):
            down[("version", pid)] += int(children)
    uris = _ids(nodes, "source")
    if uris:
        for uri, versions_from in session.execute(
            select(VersionSource.uri, func.count(distinct(VersionSource.version_id)))
            .where(VersionSource.uri.in_(uris))
            .group_by(VersionSource.uri)
        ):
            down[("source", uri)] += int(versions_from)
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

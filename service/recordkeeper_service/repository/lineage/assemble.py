"""Turn query rows into lineage records (pure functions plus small session look-ups).

Kept apart from the SQL (:mod:`.queries`) and the transactions (:mod:`.repository`).  The
upstream assembly runs on ~1,000 rows per call at benchmark scale, so it works on plain tuples
and builds each record once.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from recordkeeper.core.lineage import CONSUMED_COLUMN, LINEAGE_COLUMNS, CheckpointRef, Consumer
from recordkeeper_service.repository.lineage import queries
from recordkeeper_service.repository.lineage.data import DataHistory
from recordkeeper_service.repository.lineage.records import (
    ChainLinkRecord,
    CheckpointRecord,
    DataRecord,
    LineageRecord,
)

__all__ = ["checkpoint_records", "consumer_records", "lineage_record", "refs_of"]


def _group_data(rows: Iterable[queries.SegmentDataRow]) -> dict[int, tuple[DataRecord, ...]]:
    """(checkpoint id, version, dataset, digest, role, split, version state) rows →
    DataRecords per checkpoint."""
    grouped: dict[
        int, dict[tuple[str, str], tuple[str, str | None, queries.VersionState, set[str]]]
    ] = defaultdict(dict)
    for ckpt_id, version, dataset, digest, role, split, shown in rows:
        entry = grouped[ckpt_id].setdefault((version, role), (dataset, digest, shown, set()))
        entry[3].add(split)
    return {
        ckpt_id: tuple(
            DataRecord(version, dataset, digest, role, tuple(sorted(splits)), *shown[1:])
            for (version, role), (dataset, digest, shown, splits) in sorted(entries.items())
        )
        for ckpt_id, entries in grouped.items()
    }


def refs_of(session: Session, ids: Iterable[int]) -> dict[int, CheckpointRef]:
    """``model@run/checkpoint`` of each checkpoint id."""
    return {
        r.id: CheckpointRef(r.model, r.checkpoint, r.run)
        for r in queries.checkpoint_rows(session, ids)
    }


def _record(
    row: queries.CheckpointRow, parent: str | None, data: tuple[DataRecord, ...]
) -> CheckpointRecord:
    return CheckpointRecord(
        model=row.model,
        checkpoint=row.checkpoint,
        step=row.step,
        uri=row.uri,
        run=row.run,
        parent=parent,
        parent_kind=row.parent_kind,
        data=data,
        saved_models=tuple(dict(s) for s in row.saved_models or ()),
        metrics=dict(row.metrics or {}),
        metadata=dict(row.metadata or {}),
        created_at=row.created_at,
        created_by=row.created_by,
        state=row.state,
        deleted_at=row.deleted_at,
        deleted_reason=row.deleted_reason,
    )


def checkpoint_records(
    session: Session, rows: Sequence[queries.CheckpointRow]
) -> list[CheckpointRecord]:
    """Records for checkpoint rows: one query for parent names, one for every segment's data."""
    if not rows:
        return []
    parent_ids = {r.parent_id for r in rows if r.parent_id is not None}
    parents = {pid: str(ref) for pid, ref in refs_of(session, parent_ids).items()}
    data = _group_data(queries.segment_data_rows(session, {r.id for r in rows}))
    return [
        _record(
            r, parents.get(r.parent_id) if r.parent_id is not None else None, data.get(r.id, ())
        )
        for r in rows
    ]


def lineage_record(
    start: queries.CheckpointRow,
    upstream: queries.Upstream,
    facts: Mapping[int, queries.VersionFacts],
    states: Mapping[int, queries.VersionState],
    history: DataHistory | None = None,
    sizes: Mapping[int, Mapping[str, int]] | None = None,
) -> LineageRecord:
    """Order the chain from ``start`` up to its root and group edges per (version, role).

    The entries come out as the compact form's columns (:class:`LineageRecord`), ordered by
    first use (the deepest segment first), then version name and role; each entry's segments
    deepest first.  ``facts`` and ``states`` hold what is shown of each version; with
    ``sizes`` (each version's records per split) the columns also hold what each segment read
    (:data:`~recordkeeper.core.lineage.CONSUMED_COLUMN`, from the walk's counts).
    """
    nodes = {r.checkpoint_id: r for r in upstream.checkpoints}
    ids = _chain_ids(start.id, nodes)
    chain = tuple(
        ChainLinkRecord(
            node.model,
            node.checkpoint,
            node.step,
            node.uri,
            depth,
            node.parent_kind,
            node.run,
            node.checkpoint_state,
        )
        for depth, node in enumerate(nodes[i] for i in ids)
    )
    ordered = _entries(upstream.edges, {cid: depth for depth, cid in enumerate(ids)}, facts)
    columns = _columns(ordered, facts, states)
    if sizes is not None:
        columns[CONSUMED_COLUMN] = _consumed(ordered, ids, upstream.counts, sizes)
    own: list[queries.SegmentDataRow] = []
    for checkpoint_id, version_id, split, role in upstream.edges:
        if checkpoint_id == start.id:
            f = facts[version_id]
            own.append(
                (start.id, f.version, f.dataset, f.content_digest, role, split, states[version_id])
            )
    parent = None
    if start.parent_id in nodes:
        p = nodes[start.parent_id]
        parent = str(CheckpointRef(p.model, p.checkpoint, p.run))
    record = _record(start, parent, _group_data(own).get(start.id, ()))
    return LineageRecord(
        checkpoint=record,
        chain=chain,
        columns=columns,
        history=history.entries if history is not None else (),
        history_truncated=history.truncated if history is not None else False,
    )


def _chain_ids(start: int, nodes: Mapping[int, queries.ChainRow]) -> list[int]:
    """The checkpoint ids from ``start`` up its parents, by depth (0: ``start``); a link the
    walk did not reach, or one seen before (a corrupted cycle), ends it."""
    ids: list[int] = []
    seen: set[int] = set()
    current: int | None = start
    while current is not None and current in nodes and current not in seen:
        seen.add(current)
        ids.append(current)
        current = nodes[current].parent_id
    return ids


#: One entry of an answer: (-first use depth, version name, role, version id, uses), where
#: ``uses`` is ``[depth, split, depth, split, …]`` deepest first, then by split.  Sorting the
#: tuples orders the entries (a version name and role are one entry: nothing after them is
#: compared).
Entry = tuple[int, str, str, int, list[Any]]


def _entries(
    edges: Sequence[queries.Edge],
    depth_of: Mapping[int, int],
    facts: Mapping[int, queries.VersionFacts],
) -> list[Entry]:
    """The edges grouped per (version id, role), in entry order (first use, the deepest
    segment first, then version name and role): one pass over the edges, one sort in C."""
    grouped: dict[tuple[int, str], list[Any]] = {}
    found = grouped.get
    for checkpoint_id, version_id, split, role in edges:
        key = (version_id, role)
        uses = found(key)
        if uses is None:
            grouped[key] = [depth_of[checkpoint_id], split]
        else:
            uses += (depth_of[checkpoint_id], split)
    entries: list[Entry] = []
    for (version_id, role), uses in grouped.items():
        if len(uses) > 2:  # most versions are used once, by one split
            uses = _deepest_first(uses)
        entries.append((-uses[0], facts[version_id].version, role, version_id, uses))
    entries.sort()
    return entries


def _consumed(
    entries: Sequence[Entry],
    ids: Sequence[int],
    counts: Mapping[tuple[int, int, str], int],
    sizes: Mapping[int, Mapping[str, int]],
) -> list[list[int | None]]:
    """Per entry ``[split_records, records, …]``, one pair per segment of its ``uses`` (the
    column :func:`recordkeeper.core.lineage.consumed_from_columns` expands): the records of
    the splits the segment used, and what it counted (None: not counted)."""
    column: list[list[int | None]] = []
    for _, _, role, version_id, used in entries:
        of_version = sizes.get(version_id) or {}
        if len(used) == 2:  # one segment, one split: most entries
            records = counts.get((ids[used[0]], version_id, role)) if counts else None
            column.append([of_version.get(used[1], 0), records])
            continue
        pairs: list[int | None] = []
        i, n = 0, len(used)
        while i < n:
            depth, size = used[i], 0
            while i < n and used[i] == depth:
                size += of_version.get(used[i + 1], 0)
                i += 2
            pairs += (size, counts.get((ids[depth], version_id, role)) if counts else None)
        column.append(pairs)
    return column


def _pick(mapping: Mapping[int, Any], keys: Sequence[int]) -> tuple[Any, ...]:
    """``mapping[key]`` for each of ``keys`` (at least one), looked up in C."""
    return operator.itemgetter(*keys)(mapping) if len(keys) > 1 else (mapping[keys[0]],)


def _columns(
    entries: Sequence[Entry],
    facts: Mapping[int, queries.VersionFacts],
    states: Mapping[int, queries.VersionState],
) -> dict[str, list[Any]]:
    """The compact form's columns of ``entries``: the facts and states looked up and
    transposed in C (``itemgetter``, ``zip(*…)``), not read field by field."""
    if not entries:
        return {name: [] for name in LINEAGE_COLUMNS}
    _, names, roles, version_ids, uses = zip(*entries, strict=True)
    _, datasets, numbers, digests = zip(*_pick(facts, version_ids), strict=True)
    now = _pick(states, version_ids)
    shown: Sequence[Sequence[Any]]
    if now.count(now[0]) == len(now):  # one state for all (every version committed, stored)
        shown = [[value] * len(now) for value in now[0]]
    else:
        shown = list(zip(*now, strict=True))
    state, data_state, deleted_at, deleted_reason = shown
    return {
        "version": list(names),
        "dataset": list(datasets),
        "number": list(numbers),
        "content_digest": list(digests),
        "state": list(state),
        "data_state": list(data_state),
        "data_deleted_at": list(deleted_at),
        "data_deleted_reason": list(deleted_reason),
        "role": list(roles),
        "uses": list(uses),
    }


def _deepest_first(uses: list[Any]) -> list[Any]:
    """``[depth, split, …]`` pairs, deepest first, then by split."""
    pairs = sorted(zip(uses[::2], uses[1::2], strict=True), key=lambda p: (-p[0], p[1]))
    return [x for pair in pairs for x in pair]


def consumer_records(
    session: Session,
    direct: Sequence[queries.ConsumerRow],
    below: Sequence[queries.DescendantRow] = (),
) -> tuple[Consumer, ...]:
    """Merge direct consumers (one row per edge) and their descendants into records.

    Ordered by model, step, checkpoint.  Runs on ~5,000 rows per call at benchmark scale, so
    inherited checkpoints take a short path (no edges to group), and each parent's reference is
    built once.
    """
    roles: dict[int, set[str]] = defaultdict(set)
    splits: dict[int, set[str]] = defaultdict(set)
    base: dict[int, Any] = {}
    parents: dict[int, CheckpointRef] = {}
    for r in direct:
        cid = r.checkpoint_id
        base.setdefault(cid, r)
        if r.role is not None:
            roles[cid].add(r.role)
        if r.split is not None:
            splits[cid].add(r.split)
        pid, parent_model, parent_checkpoint = r.parent_id, r.parent_model, r.parent_checkpoint
        if pid is not None and pid not in parents and parent_model and parent_checkpoint:
            parents[pid] = CheckpointRef(parent_model, parent_checkpoint, r.parent_run)
    for b in below:
        if b.checkpoint_id not in base:
            base[b.checkpoint_id] = b
    missing: set[int] = set()
    for r in base.values():
        pid = r.parent_id
        if pid is not None and pid not in parents:
            p = base.get(pid)
            if p is None:
                missing.add(pid)
            else:
                parents[pid] = CheckpointRef(p.model, p.checkpoint, p.run)
    parents.update(refs_of(session, missing))
    ordered = sorted(
        base.values(),
        key=lambda r: (r.model, -1 if r.step is None else r.step, r.checkpoint, r.run),
    )
    records = []
    for r in ordered:
        cid = r.checkpoint_id
        parent = parents.get(r.parent_id) if r.parent_id is not None else None
        if cid in roles:
            records.append(
                Consumer(
                    r.model,
                    r.checkpoint,
                    r.step,
                    r.uri,
                    True,
                    tuple(sorted(roles[cid])),
                    tuple(sorted(splits[cid])),
                    parent,
                    r.run,
                    r.state,
                )
            )
        else:
            records.append(
                Consumer(
                    r.model, r.checkpoint, r.step, r.uri, False, (), (), parent, r.run, r.state
                )
            )
    return tuple(records)

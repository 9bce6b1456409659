"""Turn query rows into lineage records (pure functions plus small session look-ups).

Kept apart from the SQL (:mod:`.queries`) and the transactions (:mod:`.repository`).  The
upstream assembly runs on ~1,000 rows per call at benchmark scale, so it works on plain tuples
and builds each record once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy.orm import Session

from recordkeeper.core.lineage import CheckpointRef, Consumer, LineageEntry, Segment
from recordkeeper_service.repository.lineage import queries
from recordkeeper_service.repository.lineage.records import (
    ChainLinkRecord,
    CheckpointRecord,
    DataRecord,
    LineageRecord,
)

__all__ = ["checkpoint_records", "consumer_records", "lineage_record", "refs_of"]


def _group_data(
    rows: Iterable[tuple[int, str, str, str | None, str, str]],
) -> dict[int, tuple[DataRecord, ...]]:
    """(checkpoint id, version, dataset, digest, role, split) rows → DataRecords per checkpoint."""
    grouped: dict[int, dict[tuple[str, str], tuple[str, str | None, set[str]]]] = defaultdict(dict)
    for ckpt_id, version, dataset, digest, role, split in rows:
        entry = grouped[ckpt_id].setdefault((version, role), (dataset, digest, set()))
        entry[2].add(split)
    return {
        ckpt_id: tuple(
            DataRecord(version, dataset, digest, role, tuple(sorted(splits)))
            for (version, role), (dataset, digest, splits) in sorted(entries.items())
        )
        for ckpt_id, entries in grouped.items()
    }


def _sorted(items: set[str]) -> tuple[str, ...]:
    return tuple(items) if len(items) == 1 else tuple(sorted(items))


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


def lineage_record(start: queries.CheckpointRow, rows: Sequence[queries.ChainRow]) -> LineageRecord:
    """Order the chain from ``start`` up to its root and group edges per (version, role)."""
    nodes: dict[int, queries.ChainRow] = {}
    for r in rows:
        nodes.setdefault(r.checkpoint_id, r)
    depth_of: dict[int, int] = {}
    chain: list[ChainLinkRecord] = []
    current: int | None = start.id
    while current is not None and current in nodes and current not in depth_of:
        node = nodes[current]
        depth = len(chain)
        depth_of[current] = depth
        chain.append(
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
        )
        current = node.parent_id
    # (version id, role) → [first row, splits, {checkpoint id: splits}, oldest depth]
    entries: dict[tuple[int, str], list[Any]] = {}
    own: list[tuple[int, str, str, str | None, str, str]] = []
    start_id = start.id
    for r in rows:
        version_id = r.version_id
        if version_id is None:
            continue
        # checkpoint_data and its version and dataset (foreign keys): all set when version_id is
        version, dataset, role, split = r.version, r.dataset, r.role, r.split
        assert version is not None and dataset is not None
        assert role is not None and split is not None
        cid = r.checkpoint_id
        depth = depth_of.get(cid, -1)
        key = (version_id, role)
        entry = entries.get(key)
        if entry is None:
            entries[key] = [r, {split}, {cid: {split}}, depth]
        else:
            entry[1].add(split)
            seg = entry[2].get(cid)
            if seg is None:
                entry[2][cid] = {split}
            else:
                seg.add(split)
            if depth > entry[3]:
                entry[3] = depth
        if cid == start_id:
            own.append((cid, version, dataset, r.content_digest, role, split))
    segment_cache: dict[tuple[int, tuple[str, ...]], Segment] = {}

    def segment(cid: int, splits: set[str]) -> Segment:
        names = _sorted(splits)
        found = segment_cache.get((cid, names))
        if found is None:
            node = nodes[cid]
            found = Segment(
                node.model,
                node.checkpoint,
                node.step,
                depth_of.get(cid, -1),
                names,
                node.run,
                node.checkpoint_state,
            )
            segment_cache[(cid, names)] = found
        return found

    data = []
    for first, splits, segments, _ in sorted(
        entries.values(), key=lambda e: (-e[3], e[0].version, e[0].role)
    ):
        if len(segments) == 1:
            ((cid, seg_splits),) = segments.items()
            segs: tuple[Segment, ...] = (segment(cid, seg_splits),)
        else:
            segs = tuple(
                segment(cid, seg_splits)
                for cid, seg_splits in sorted(
                    segments.items(), key=lambda item: -depth_of.get(item[0], -1)
                )
            )
        data.append(
            LineageEntry(
                first.version,
                first.dataset,
                first.number or 0,
                first.content_digest,
                first.state,
                first.role,
                _sorted(splits),
                segs,
            )
        )
    parent = None
    if start.parent_id in nodes:
        p = nodes[start.parent_id]
        parent = str(CheckpointRef(p.model, p.checkpoint, p.run))
    record = _record(start, parent, _group_data(own).get(start.id, ()))
    return LineageRecord(checkpoint=record, chain=tuple(chain), data=tuple(data))


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

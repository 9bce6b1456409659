"""How much of the data a checkpoint saw: segment record counts and epochs along its chain.

A registration's data entry may say how many records its segment read (``records``: counted by
the tracked checkpoint manager as steps * batch size, or given).  :func:`record_consumption`
stores them (``checkpoint_consumption``) beside the segment's ``checkpoint_data`` edges;
:func:`consumption` answers for a checkpoint's whole parent chain:

* per segment and (version, role): ``records``, the records of the splits that segment used
  (``split_records``, from the version's shards) and ``epochs`` = records / split_records;
* per (version, role) along the chain: the sums (``epochs`` is the sum of the segments'
  epochs), and ``unknown_segments``: segments that used the version without counting (their
  share is not guessed, so ``epochs`` is then a lower bound).

Counts never change after registration, so the answer can be kept with the lineage answer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.orm import Session

from recordkeeper.core.errors import InvalidCheckpoint
from recordkeeper.core.limits import MAX_INT64
from recordkeeper.core.lineage import CheckpointRef
from recordkeeper.core.refs import parse_reference
from recordkeeper_service import tables as m
from recordkeeper_service.repository.common import table_of
from recordkeeper_service.repository.lineage import queries
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.tables.consumption import CheckpointConsumption

__all__ = ["SplitRecordsCache", "consumption", "record_consumption", "split_records"]


def record_consumption(session: Session, checkpoint_id: int, entries: Sequence[Any]) -> None:
    """Store the counted entries (``entry.records`` not None) of a new registration."""
    rows: dict[tuple[int, str], int] = {}
    for position, entry in enumerate(entries):
        records = getattr(entry, "records", None)
        if records is None:
            continue
        if isinstance(records, bool) or not isinstance(records, int) or records < 0:
            raise InvalidCheckpoint(
                f"data[{position}].records must be a non-negative integer, got {records!r}"
            )
        row = find_version(session, parse_reference(entry.version), published_only=True)
        key = (row.id, entry.role)
        rows[key] = rows.get(key, 0) + records
        if rows[key] > MAX_INT64:  # entries of one version and role are stored as one count
            raise InvalidCheckpoint(
                f"data[{position}].records: the data entries naming {row.name} as {entry.role} "
                f"count {rows[key]} records together, over {MAX_INT64} (2^63-1)"
            )
    if rows:
        session.execute(
            table_of(CheckpointConsumption).insert(),
            [
                {"checkpoint_id": checkpoint_id, "version_id": v, "role": r, "records": n}
                for (v, r), n in sorted(rows.items())
            ],
        )


#: Versions whose split sizes :class:`SplitRecordsCache` keeps (a few hundred bytes each).
DEFAULT_MAX_VERSIONS = 50_000

#: ``load(ids)``: each version's records per split, read from its shards (a query)
SplitLoader = Callable[[set[int]], dict[int, dict[str, int]]]


class SplitRecordsCache:
    """``version id → {split: records}``, per process; safe across threads.

    Only committed versions train checkpoints, and a committed version's shards never change
    (rows are kept when retention deletes the data), so what is read is kept with no
    invalidation.  Bounded by a number of versions: when full it starts again empty.
    """

    def __init__(self, max_versions: int = DEFAULT_MAX_VERSIONS) -> None:
        self._max = max(0, max_versions)
        self._kept: dict[int, dict[str, int]] = {}
        self._lock = threading.Lock()

    def lookup(self, ids: Collection[int], load: SplitLoader) -> Mapping[int, Mapping[str, int]]:
        """The split sizes of ``ids``: those kept, and ``load(the others)``, kept in turn."""
        kept = self._kept
        missing = {vid for vid in ids if vid not in kept}
        if not missing:
            return kept
        found = {vid: kept[vid] for vid in ids if vid not in missing}
        loaded = load(missing)
        for vid in missing:  # a version without shards has no splits: kept as that
            found[vid] = loaded.get(vid, {})
        if len(missing) <= self._max:
            with self._lock:
                if len(self._kept) + len(missing) > self._max:
                    self._kept = {}
                self._kept.update((vid, found[vid]) for vid in missing)
        return found


def split_records(
    conn: Connection | Session, version_ids: Iterable[int]
) -> dict[int, dict[str, int]]:
    """Each version's records per split, summed over its shards."""
    ids = sorted(set(version_ids))
    if not ids:
        return {}
    stmt = (
        select(m.Shard.version_id, m.Shard.split, func.sum(m.Shard.record_count))
        .where(m.Shard.version_id.in_(ids))
        .group_by(m.Shard.version_id, m.Shard.split)
    )
    out: dict[int, dict[str, int]] = {}
    for v, s, n in conn.execute(stmt):
        out.setdefault(v, {})[s] = int(n or 0)
    return out


def consumption(
    conn: Connection,
    checkpoint_id: int,
    upstream: queries.Upstream,
    names: Mapping[int, str],
    split_sizes: Callable[[set[int]], Mapping[int, Mapping[str, int]]],
) -> list[dict[str, Any]]:
    """Per (version, role) along the chain of ``checkpoint_id``: records, epochs, segments
    (see the module docstring), in the order the versions were first used (oldest first).

    ``upstream``: the chain's walk, as the lineage answer read it; ``names``: the names of its
    versions; ``split_sizes(ids)``: their records per split (:class:`SplitRecordsCache`).
    Only the chain's counts are read here."""
    chain = {c.checkpoint_id: c for c in upstream.checkpoints}
    if not chain:
        return []
    counted = {
        (c, v, r): n
        for c, v, r, n in conn.execute(
            select(
                CheckpointConsumption.checkpoint_id,
                CheckpointConsumption.version_id,
                CheckpointConsumption.role,
                CheckpointConsumption.records,
            ).where(CheckpointConsumption.checkpoint_id.in_(sorted(chain)))
        )
    }
    splits: dict[tuple[int, int, str], list[str]] = {}
    for c, v, s, r in upstream.edges:
        splits.setdefault((c, v, r), []).append(s)
    sizes = split_sizes({v for _, v, _ in splits})
    depth = {cid: i for i, cid in enumerate(_chain_order(chain, checkpoint_id))}
    labels = {cid: str(CheckpointRef(c.model, c.checkpoint, c.run)) for cid, c in chain.items()}
    out: dict[tuple[int, str], dict[str, Any]] = {}
    for (c, v, r), used in sorted(splits.items(), key=lambda kv: -depth.get(kv[0][0], 0)):
        of_version = sizes.get(v, {})
        size = sum(of_version.get(s, 0) for s in used)
        records = counted.get((c, v, r))
        total = out.setdefault(
            (v, r),
            {
                "version": names.get(v),
                "role": r,
                "records": 0,
                "epochs": 0.0,
                "counted_segments": 0,
                "unknown_segments": 0,
                "segments": [],
            },
        )
        epochs = records / size if records is not None and size else None
        total["segments"].append(
            {
                "checkpoint": labels[c],
                "step": chain[c].step,
                "splits": sorted(used),
                "split_records": size,
                "records": records,
                "epochs": epochs,
            }
        )
        if records is None:
            total["unknown_segments"] += 1
        else:
            total["counted_segments"] += 1
            # Each count is at most 2^63-1; a chain's sum is answered as a 64-bit integer too,
            # so it stops there (as a lower bound, like the epochs beside it).
            total["records"] = min(total["records"] + records, MAX_INT64)
            total["epochs"] += epochs or 0.0
    return list(out.values())


def _chain_order(chain: dict[int, queries.ChainRow], start: int) -> list[int]:
    """The chain from ``start`` up to its root (depth 0 = ``start``)."""
    order, seen, at = [], set(), start
    while at in chain and at not in seen:
        seen.add(at)
        order.append(at)
        parent = chain[at].parent_id
        if parent is None:
            break
        at = parent
    return order

"""How much of the data a checkpoint saw: segment record counts and epochs along its chain.

A registration's data entry may say how many records its segment read (``records``: counted by
the tracked checkpoint manager as steps * batch size, or given).  :func:`record_consumption`
stores them (``checkpoint_consumption``) beside the segment's ``checkpoint_data`` edges; an
upstream answer reads them with its walk (:func:`.queries.upstream_rows`) and shows, for the
whole parent chain (``LineageRecord.consumed``, built by
:func:`recordkeeper.core.lineage.consumed_from_columns`):

* per segment and (version, role): ``records``, the records of the splits that segment used
  (``split_records``, from the version's shards: :func:`split_records`, kept per process by
  :class:`SplitRecordsCache`) and ``epochs`` = records / split_records;
* per (version, role) along the chain: the sums (``epochs`` is the sum of the segments'
  epochs), and ``unknown_segments``: segments that used the version without counting (their
  share is not guessed, so ``epochs`` is then a lower bound).

Counts never change after registration, so the answer can be kept with the lineage answer.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Select, func, select
from sqlalchemy.orm import Session

from recordkeeper.core.errors import InvalidCheckpoint
from recordkeeper.core.limits import MAX_INT64
from recordkeeper.core.refs import parse_reference
from recordkeeper_service import tables as m
from recordkeeper_service.repository.common import table_of
from recordkeeper_service.repository.lineage.queries import _conn, ids_in
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.tables.consumption import CheckpointConsumption

__all__ = ["SplitRecordsCache", "record_consumption", "split_records"]

_shard = m.Shard.__table__


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

    def missing(self, ids: Collection[int]) -> set[int]:
        """Which of ``ids`` are not kept."""
        return set(ids).difference(self._kept)  # in C

    def lookup(self, ids: Collection[int], load: SplitLoader) -> Mapping[int, Mapping[str, int]]:
        """The split sizes of ``ids``: those kept, and ``load(the others)``, kept in turn."""
        kept = self._kept
        missing = set(ids).difference(kept)
        if not missing:
            return kept
        loaded = load(missing)
        # a version without shards has no splits: kept as that
        sized = {vid: loaded.get(vid, {}) for vid in missing}
        if len(missing) <= self._max:
            with self._lock:
                if len(self._kept) + len(missing) > self._max:
                    self._kept = {}
                self._kept.update(sized)
                if self._kept is kept:
                    return kept  # it now holds every id: no copy
        found = {vid: kept[vid] for vid in ids if vid not in missing}
        found.update(sized)
        return found


@functools.cache
def _split_records_stmt(dialect: str) -> Select[Any]:
    return (
        select(_shard.c.version_id, _shard.c.split, func.sum(_shard.c.record_count))
        .where(ids_in(_shard.c.version_id, "ids", dialect))
        .group_by(_shard.c.version_id, _shard.c.split)
    )


def split_records(
    conn: Connection | Session, version_ids: Iterable[int]
) -> dict[int, dict[str, int]]:
    """Each version's records per split, summed over its shards."""
    ids = sorted(set(version_ids))
    if not ids:
        return {}
    out: dict[int, dict[str, int]] = {}
    reader = _conn(conn)
    for v, s, n in reader.execute(_split_records_stmt(reader.dialect.name), {"ids": ids}):
        out.setdefault(v, {})[s] = int(n or 0)
    return out

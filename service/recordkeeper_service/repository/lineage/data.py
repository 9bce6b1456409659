"""Lineage through the data: versions' histories (upstream) and what a version or a raw source
affects (downstream).

* **History** (:class:`DataHistory`): from the versions a checkpoint trained on, up
  ``version_parents`` to every ancestor, with what each recorded (parents, sources, producer,
  params digest — its provenance document).  A committed version's provenance never changes, so
  what was read of a version is kept per process by id (:class:`HistoryCache`); a walk reads
  only the versions it has not seen, in one recursive statement that reaches all their ancestors
  (``UNION``: a corrupted cyclic chain still terminates).  The walk itself runs over the kept
  facts in Python, breadth first with a set of seen ids, and stops at
  :data:`~recordkeeper.core.data_lineage.MAX_HISTORY_VERSIONS` (then says so).  Only versions
  that recorded provenance, and their ancestors, are answered: a version trained on that
  recorded nothing adds no entry.
* **Impact** (:func:`impact_versions`): from a version, or the versions that recorded a source
  URI (exactly, a prefix it lies under, or — asked as a prefix — any URI under it), down
  ``version_parents`` (``ix_version_parents_parent_id``) to every derived version, at any depth.
  The checkpoints trained on any of them are the repository's consumers query over the set.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, NamedTuple

from sqlalchemy import Select, and_, bindparam, func, or_, select

from recordkeeper.core.data_lineage import (
    MAX_HISTORY_VERSIONS,
    HistoryEntry,
    order_history,
    source_candidates,
)
from recordkeeper_service import tables as m
from recordkeeper_service.repository.lineage.queries import Reader, VersionState, _conn
from recordkeeper_service.tables import provenance as pm

__all__ = [
    "DataHistory",
    "HistoryCache",
    "HistoryFacts",
    "derived_versions",
    "source_versions",
]

_v = m.Version.__table__
_ds = m.Dataset.__table__
_vp = pm.VersionParent.__table__
_vs = pm.VersionSource.__table__
_prov = pm.VersionProvenance.__table__

#: Versions kept by :class:`HistoryCache` before it starts again empty.
DEFAULT_MAX_HISTORY = 50_000


class HistoryFacts(NamedTuple):
    """What a version recorded of where it came from: fixed once committed."""

    version: str
    dataset: str
    number: int | None
    desc: str | None
    content_digest: str | None
    #: ``(parent id, role)`` in recorded order
    parent_ids: tuple[tuple[int, str], ...]
    #: the provenance document (None: it recorded none)
    document: Mapping[str, Any] | None


class DataHistory(NamedTuple):
    """The history of some versions: each entry, nearest first, and whether the guard stopped
    the walk."""

    entries: tuple[HistoryEntry, ...]
    truncated: bool = False

    def to_json(self) -> list[dict[str, Any]]:
        return [e.to_json() for e in self.entries]


@functools.cache
def _ancestry_stmt() -> Select[Any]:
    """The ids of the versions of ``ids`` that recorded provenance and of every version up
    their parents (recursive, ``UNION``: a corrupted cyclic table still terminates).

    Only ids: PostgreSQL estimates a recursive CTE at a fixed size and, joined to ``versions``
    in the same statement, hash-joins the whole table (a sequential scan of every version, tens
    of milliseconds at 10,000 versions); :func:`_facts_stmt` then reads the few found by
    primary key.
    """
    # anchored on version_provenance: of the versions asked about, only those that recorded
    # provenance start a walk (one primary-key probe each for the others, in this statement)
    anc = select(_prov.c.version_id.label("id")).where(
        _prov.c.version_id.in_(bindparam("ids", expanding=True))
    )
    anc_cte = anc.cte("anc", recursive=True)
    up = select(_vp.c.parent_id).join(anc_cte, _vp.c.version_id == anc_cte.c.id)
    anc_cte = anc_cte.union(up)
    return select(anc_cte.c.id)


@functools.cache
def _facts_stmt() -> Select[Any]:
    """Facts and provenance document of versions by id (primary-key look-ups)."""
    return (
        select(
            _v.c.id,
            _v.c.name,
            _ds.c.name,
            _v.c.number,
            _v.c.desc,
            _v.c.content_digest,
            _prov.c.document,
        )
        .join(_ds, _ds.c.id == _v.c.dataset_id)
        .outerjoin(_prov, _prov.c.version_id == _v.c.id)
        .where(_v.c.id.in_(bindparam("ids", expanding=True)))
    )


@functools.cache
def _parents_stmt() -> Select[Any]:
    return (
        select(_vp.c.version_id, _vp.c.parent_id, _vp.c.role)
        .where(_vp.c.version_id.in_(bindparam("ids", expanding=True)))
        .order_by(_vp.c.version_id, _vp.c.position)
    )


def _load(session: Reader, ids: Collection[int]) -> dict[int, HistoryFacts | None]:
    """Facts of ``ids`` and of all their ancestors; ``None`` for a version that recorded no
    provenance (most versions a long chain trained on: one primary-key probe each, nothing
    more).  One statement when none did; else two more (facts by id, parent links)."""
    conn = _conn(session)
    found = {int(vid) for (vid,) in conn.execute(_ancestry_stmt(), {"ids": sorted(ids)})}
    out: dict[int, HistoryFacts | None] = {vid: None for vid in ids if vid not in found}
    if not found:
        return out
    rows = conn.execute(_facts_stmt(), {"ids": sorted(found)}).all()
    with_parents = [r[0] for r in rows if r[6] is not None and r[6].get("parents")]
    parents: dict[int, list[tuple[int, str]]] = {}
    if with_parents:
        for vid, pid, role in conn.execute(_parents_stmt(), {"ids": sorted(with_parents)}):
            parents.setdefault(vid, []).append((int(pid), str(role)))
    for vid, name, dataset, number, desc, digest, document in rows:
        out[int(vid)] = HistoryFacts(
            name, dataset, number, desc, digest, tuple(parents.get(vid, ())), document
        )
    return out


class HistoryCache:
    """``version id → HistoryFacts`` for committed versions; safe across threads.

    Only versions reached from committed ones are asked for (checkpoints train on committed
    versions, parents are committed before their children), and their provenance is
    immutable: nothing is invalidated.  Bounded: when full it starts again empty.

    Also the histories answered per lineage epoch (:meth:`history` with ``epoch``): the
    checkpoints of a team train on the same few versions, so their answers share histories;
    what a history shows changes only with its versions' states, that is with the epoch.
    Bounded by entries held (``max_versions``): when full it starts again empty.
    """

    def __init__(self, max_versions: int = DEFAULT_MAX_HISTORY) -> None:
        self._max = max(0, max_versions)
        #: ``None``: the version recorded no provenance (nothing to walk from it)
        self._facts: dict[int, HistoryFacts | None] = {}
        #: histories by (epoch, limit, starting ids), and how many entries they hold
        self._answered: dict[tuple[int, ...], DataHistory] = {}
        self._answered_entries = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._facts)

    def facts(self, session: Reader, ids: Collection[int]) -> Mapping[int, HistoryFacts | None]:
        """Facts of ``ids`` and every ancestor (those kept, plus one load for the others)."""
        kept = self._facts
        missing = {vid for vid in ids if vid not in kept}
        # an id kept has its ancestors kept too (they were loaded with it), unless the cache
        # started again since: the walk asks again for any id it cannot find
        if not missing:
            return kept
        loaded = _load(session, missing)
        if len(loaded) <= self._max:
            with self._lock:
                if len(self._facts) + len(loaded) > self._max:
                    self._facts = {}
                self._facts.update(loaded)
        merged = dict(kept)
        merged.update(loaded)
        return merged

    def history(
        self,
        session: Reader,
        ids: Iterable[int],
        states: Callable[[set[int]], Mapping[int, VersionState]] | None = None,
        *,
        limit: int = MAX_HISTORY_VERSIONS,
        epoch: int | None = None,
    ) -> DataHistory:
        """The history of ``ids``: entries for those that recorded provenance and for every
        ancestor of one.  ``states(ids)`` gives the state each answered version shows (default:
        ``committed``); with ``epoch``, the lineage epoch those states are as of (at least),
        the history is kept and answered again for the same ids at the same epoch."""
        start = sorted(set(ids))
        if not start:
            return DataHistory(())
        if epoch is None:
            return self._walk(session, start, states, limit)
        key = (epoch, limit, *start)
        found = self._answered.get(key)
        if found is None:
            found = self._walk(session, start, states, limit)
            self._keep(key, found)
        return found

    def _keep(self, key: tuple[int, ...], answer: DataHistory) -> None:
        size = len(answer.entries) + 1
        if size > self._max:
            return
        with self._lock:
            if self._answered_entries + size > self._max:
                self._answered, self._answered_entries = {}, 0
            if key not in self._answered:
                self._answered[key] = answer
                self._answered_entries += size

    def _walk(
        self,
        session: Reader,
        start: list[int],
        states: Callable[[set[int]], Mapping[int, VersionState]] | None,
        limit: int,
    ) -> DataHistory:
        """:meth:`history` of the sorted ids ``start`` (not empty), computed."""
        facts = self.facts(session, start)
        depth: dict[int, int] = {}
        frontier = [vid for vid in start if _recorded(facts.get(vid))]
        for vid in frontier:
            depth[vid] = 0
        truncated = False
        level = 0
        while frontier:
            level += 1
            following: list[int] = []
            for vid in frontier:
                known = facts[vid]
                for pid, _role in known.parent_ids if known is not None else ():
                    if pid in depth:
                        continue
                    if len(depth) >= limit:
                        truncated = True
                        break
                    depth[pid] = level
                    following.append(pid)
            absent = [pid for pid in following if pid not in facts]
            if absent:  # the kept facts started again meanwhile: read them (and theirs)
                facts = {**facts, **_load(session, absent)}
            frontier = [pid for pid in following if facts.get(pid) is not None]
        shown = states(set(depth)) if states is not None and depth else None
        entries = []
        for vid, d in depth.items():
            known = facts.get(vid)
            if known is not None:
                entries.append(_entry(vid, known, d, facts, shown))
        return DataHistory(tuple(order_history(entries)), truncated)


def _recorded(facts: HistoryFacts | None) -> bool:
    return facts is not None and facts.document is not None


def _entry(
    vid: int,
    f: HistoryFacts,
    depth: int,
    facts: Mapping[int, HistoryFacts | None],
    states: Mapping[int, VersionState] | None,
) -> HistoryEntry:
    document = f.document or {}
    parents = []
    for position, (pid, role) in enumerate(f.parent_ids):
        parent = facts.get(pid)
        recorded = (document.get("parents") or [{}] * (position + 1))[position]
        parents.append(
            {
                "version": parent.version if parent else recorded.get("name"),
                "dataset": parent.dataset if parent else recorded.get("dataset"),
                "number": parent.number if parent else recorded.get("number"),
                "role": role,
            }
        )
    producer = document.get("producer")
    state = states.get(vid) if states else None
    return HistoryEntry(
        version=f.version,
        dataset=f.dataset,
        number=f.number,
        desc=f.desc,
        content_digest=f.content_digest,
        state=state.state if state is not None else "committed",
        depth=depth,
        parents=tuple(parents),
        sources=tuple(
            {"uri": s["uri"], "identity": s.get("identity")} for s in document.get("sources") or ()
        ),
        producer=_producer(producer) if producer else None,
        params_digest=document.get("params_digest"),
    )


def _producer(producer: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("vcs", "commit", "remote", "branch", "dirty", "diff_digest", "entry")
    return {k: producer.get(k) for k in keys}


# -- downstream ---------------------------------------------------------------------------


class DerivedRow(NamedTuple):
    """A version at or below the versions asked about: ``depth`` parent links down, ``via``
    the ``(parent id, role)`` links that reached it (empty for a starting version)."""

    id: int
    depth: int
    via: tuple[tuple[int, str], ...]


def derived_versions(
    session: Reader, start: Iterable[int], *, limit: int = MAX_HISTORY_VERSIONS
) -> tuple[list[DerivedRow], bool]:
    """``start`` and every version derived from one of them (through parents, any depth),
    breadth first: one index query per level.  Returns the rows and whether ``limit`` stopped
    the walk."""
    conn = _conn(session)
    rows: dict[int, DerivedRow] = {vid: DerivedRow(vid, 0, ()) for vid in sorted(set(start))}
    frontier = list(rows)
    level = 0
    truncated = False
    while frontier:
        level += 1
        found = conn.execute(
            select(_vp.c.version_id, _vp.c.parent_id, _vp.c.role)
            .where(_vp.c.parent_id.in_(frontier))
            .order_by(_vp.c.version_id, _vp.c.position)
        ).all()
        following: list[int] = []
        for child, parent, role in found:
            existing = rows.get(child)
            if existing is not None:
                if existing.depth == level:  # another link at the same depth
                    rows[child] = existing._replace(via=(*existing.via, (parent, role)))
                continue
            if len(rows) >= limit:
                truncated = True
                break
            rows[child] = DerivedRow(child, level, ((parent, role),))
            following.append(child)
        frontier = following
    return list(rows.values()), truncated


def source_versions(
    session: Reader, uri: str, *, prefix: bool = False, limit: int | None = None
) -> list[tuple[int, str, str | None]]:
    """``(version id, recorded uri, identity digest)`` of the versions whose sources hold
    ``uri``: recorded as it, or as a prefix it lies under; with ``prefix``, also any source
    recorded under it (the first ``limit`` such records, oldest version first, if given).
    Index lookups on ``ix_version_sources_uri``."""
    clauses: list[Any] = [_vs.c.uri.in_(source_candidates(uri))]
    if prefix:
        # LIKE finds the candidates (by the index where the database can); it ignores ASCII
        # case on SQLite, and sources are matched by their exact text (S3 and GCS keys are
        # case-sensitive): the leading characters must equal the prefix, on both databases.
        clauses.append(
            and_(
                _vs.c.uri.startswith(uri, autoescape=True),
                func.substr(_vs.c.uri, 1, len(uri)) == uri,
            )
        )
    stmt = (
        select(_vs.c.version_id, _vs.c.uri, _vs.c.identity_digest)
        .where(or_(*clauses))
        .order_by(_vs.c.version_id, _vs.c.position)
    )
    if limit is not None:
        stmt = stmt.limit(limit)
    return [(int(v), str(u), d) for v, u, d in _conn(session).execute(stmt)]

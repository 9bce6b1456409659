"""Derived versions at commit: the base's kept shards become the version's, in SQL.

A version staged with ``base`` (:meth:`.versions.VersionRepository.stage`) holds only the shards
it adds; its commit (:mod:`.commit`) first calls :func:`materialize` in the same transaction:

1. the base's splits and shard counts are read with one grouped query, URIs to remove are
   looked up on the ``uri`` index, and the change set is planned by the core rule
   (:func:`recordkeeper.core.derive.plan_changes`);
2. the added shards of a split the base keeps are moved after the kept ones (only those rows);
3. every kept base shard is copied as a *row* — ``INSERT … SELECT`` per split, renamed and
   renumbered in SQL (``ROW_NUMBER()`` where shards were removed) — so no shard is read by the
   service, nor copied, re-read or re-hashed by anyone: the new row names the same object.

The version's rows are then what commit checks, digests and numbers like any other version's,
and an error anywhere rolls all of it back with the commit.  A stored object listed by several
versions is one object referenced by all of them: the deletion rule
(:mod:`.deletion`) keeps it while any live version lists it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from sqlalchemy import delete, func, insert, literal, select
from sqlalchemy.orm import Session

from recordkeeper.core.derive import Changes, SplitPlan, plan_changes, summary
from recordkeeper.core.errors import (
    ParentNotCommitted,
    ShardConflict,
    ShardNotFound,
    VersionIncomplete,
)
from recordkeeper_service import tables as m
from recordkeeper_service.repository.common import PUBLISHED_STATES, table_of
from recordkeeper_service.repository.deletion import ensure_data_stored

__all__ = ["Derivation", "added_uris", "base_splits", "materialize"]

#: Columns a kept shard's row copies from the base's row as they are.
_COPIED = [
    c.name
    for c in table_of(m.Shard).columns
    if c.name not in ("id", "version_id", "split", "index", "count")
]


def base_splits(session: Session, version_id: int) -> dict[str, int]:
    """``{split: shard count}`` of a version, from one grouped query."""
    return {
        split: int(n)
        for split, n in session.execute(
            select(m.Shard.split, func.count(m.Shard.id))
            .where(m.Shard.version_id == version_id)
            .group_by(m.Shard.split)
        )
    }


def _lock_base(session: Session, base_id: int) -> m.Version:
    """The base row, read ``FOR SHARE`` (a gc or retention claim locks it ``FOR UPDATE``)."""
    base = session.scalars(
        select(m.Version).where(m.Version.id == base_id).with_for_update(read=True)
    ).one()
    if base.state not in PUBLISHED_STATES:  # committed versions stay published; defensive
        raise ParentNotCommitted(
            f"the base {base.name} is {base.state}", parent=base.name, state=base.state
        )
    ensure_data_stored(base)  # its objects may be deleted at any moment: reference none
    return base


def _positions_of(session: Session, base_id: int, uris: list[str]) -> list[tuple[str, int]]:
    """The base positions of the shards named by URI (``shard_not_found`` for any other)."""
    if not uris:
        return []
    found = {
        uri: (split, int(index))
        for uri, split, index in session.execute(
            select(m.Shard.uri, m.Shard.split, m.Shard.index).where(
                m.Shard.version_id == base_id, m.Shard.uri.in_(uris)
            )
        )
    }
    for uri in uris:
        if uri not in found:
            raise ShardNotFound(f"remove_shards: the base has no shard {uri!r}", shard=uri)
    return list(found.values())


def _added(session: Session, version: m.Version) -> dict[str, int]:
    """``{split: count}`` of the shards registered on the staged version, each split whole."""
    added: dict[str, int] = {}
    missing: dict[str, list[int]] = {}
    for split, count, n in session.execute(
        select(m.Shard.split, func.max(m.Shard.count), func.count(m.Shard.id))
        .where(m.Shard.version_id == version.id)
        .group_by(m.Shard.split)
    ):
        if int(n) != int(count):
            missing[split] = []
        added[split] = int(count)
    if missing:
        raise VersionIncomplete(
            f"{version.name}: the added shards of {', '.join(sorted(missing))} are incomplete; "
            "register every shard of an added split first",
            missing=missing,
        )
    return added


def _check_no_duplicates(
    session: Session, added: list[str], base_id: int, plans: list[SplitPlan]
) -> None:
    """No added shard may be an object the derived version keeps from its base.

    Driven by the few added URIs, each looked up on the ``uri`` index: a join from the base's
    side would probe the index once per *base* shard and read every version listing that object
    (a derivation chain lists it in each), a commit growing with the number of derived versions.
    """
    kept_from = {p.base_split: p for p in plans if p.base_split is not None}
    for start in range(0, len(added), _URIS_PER_QUERY):
        rows = session.execute(
            select(m.Shard.uri, m.Shard.split, m.Shard.index).where(
                m.Shard.uri.in_(added[start : start + _URIS_PER_QUERY]),
                # "+ 0": not the version's index (its 100,000 rows), the uri index (a few)
                m.Shard.version_id + 0 == base_id,
            )
        ).all()
        for uri, split, index in rows:
            plan = kept_from.get(split)
            if plan is not None and index not in plan.removed:
                raise ShardConflict(
                    f"{uri!r} is added, but the base's shard {split}:{index} is that object and "
                    "is kept; a version lists an object once",
                    uri=uri,
                )


#: URIs per ``IN`` list (SQLite allows 32,766 bound values; PostgreSQL 65,535).
_URIS_PER_QUERY = 1000


def _move_added(session: Session, version: m.Version, plan: SplitPlan) -> None:
    """Put the added shards of ``plan.split`` after its ``plan.kept`` base shards."""
    table = table_of(m.Shard)
    rows = [
        dict(row._mapping)
        for row in session.execute(
            select(table).where(table.c.version_id == version.id, table.c.split == plan.split)
        )
    ]
    session.execute(
        delete(table).where(table.c.version_id == version.id, table.c.split == plan.split)
    )
    for row in rows:
        del row["id"]
        row["index"] += plan.kept
        row["count"] = plan.count
    session.execute(insert(table), rows)


def _copy_kept(session: Session, version: m.Version, base_id: int, plan: SplitPlan) -> None:
    """``INSERT … SELECT`` the kept base shards of one split as rows of ``version``."""
    table = table_of(m.Shard)
    source = table.c
    where = [source.version_id == base_id, source.split == plan.base_split]
    if plan.removed:
        where.append(source.index.not_in(plan.removed))
        index: Any = func.row_number().over(order_by=source.index) - 1
    else:
        index = source.index
    chosen = select(
        literal(version.id, type_=source.version_id.type),
        literal(plan.split, type_=source.split.type),
        index,
        literal(plan.count, type_=source.count.type),
        *(source[name] for name in _COPIED),
    ).where(*where)
    columns = ["version_id", "split", "index", "count", *_COPIED]
    session.execute(insert(table).from_select(columns, chosen))


#: SQLite's page cache while kept rows are copied (KiB): each copied row adds an entry to
#: the indexes of ``sha256`` (random keys) and ``uri``, which the default ~2 MiB cache
#: thrashes; 32 MiB halved the copy of 100,000 rows (session 9), 256 MiB holds the pages the
#: copy touches in a table of several 100,000-shard versions (docs/performance.md, session
#: 12).  Set on the commit's connection for the copy only, then put back (the pages are given
#: back); only the pages the copy reads are ever allocated.
SQLITE_COPY_CACHE_KIB = 256 * 1024


@contextmanager
def _copy_cache(session: Session) -> Iterator[None]:
    """A larger SQLite page cache for the duration of the block (nothing on PostgreSQL)."""
    connection = session.connection()
    if connection.dialect.name != "sqlite":
        yield
        return
    before = int(connection.exec_driver_sql("PRAGMA cache_size").scalar_one())
    connection.exec_driver_sql(f"PRAGMA cache_size=-{SQLITE_COPY_CACHE_KIB}")
    try:
        yield
    finally:
        connection.exec_driver_sql(f"PRAGMA cache_size={before}")


def added_uris(session: Session, version_id: int) -> list[str]:
    """The URIs of the shards registered on a staged derived version (before materialize)."""
    return list(session.scalars(select(m.Shard.uri).where(m.Shard.version_id == version_id)))


class Derivation(NamedTuple):
    """What :func:`materialize` did: the audit detail of the change, and per split of the
    derived version its :attr:`~recordkeeper.core.derive.SplitPlan.base_prefix` (what commit
    stores in ``version_splits``)."""

    detail: dict[str, Any]
    prefixes: dict[str, int]


def materialize(
    session: Session, version: m.Version, changes: Changes, uris_added: list[str] | None = None
) -> Derivation:
    """Make the staged derived ``version`` (locked) hold its base's kept shards and its added
    ones, numbered per the change set.  ``uris_added``: :func:`added_uris` of the version, if
    already read."""
    assert version.base_version_id is not None
    base = _lock_base(session, version.base_version_id)
    splits = base_splits(session, base.id)
    uris = [text for text in changes.remove_shards if "/" in text]
    positions = _positions_of(session, base.id, uris)
    added = _added(session, version)
    plans = plan_changes(splits, added, changes, positions)
    if uris_added is None:
        uris_added = added_uris(session, version.id)
    _check_no_duplicates(session, uris_added, base.id, plans)
    for plan in plans:
        if plan.kept and plan.added:
            _move_added(session, version, plan)
    with _copy_cache(session):
        for plan in plans:
            if plan.kept:
                _copy_kept(session, version, base.id, plan)
    detail: dict[str, Any] = {
        "base": base.name,
        **summary(plans, splits),
        "changes_digest": changes.digest(),
    }
    if changes.remove_splits:
        detail["removed_splits"] = list(changes.remove_splits)
    if changes.rename_splits:
        detail["renamed_splits"] = dict(changes.rename_splits)
    return Derivation(detail, {plan.split: plan.base_prefix for plan in plans})

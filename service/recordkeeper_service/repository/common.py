"""Session-level helpers shared by the repository modules.

These run *inside* a transaction opened by a repository method; they never commit.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

import orjson
from sqlalchemy import Connection, Insert, Select, Table, bindparam, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from recordkeeper.core.errors import (
    DatasetNotFound,
    InvalidRequest,
    RecordkeeperError,
    VersionImmutable,
)
from recordkeeper_service import tables as m
from recordkeeper_service.domain import PUBLISHED_STATES, ShardRecord, VersionRecord
from recordkeeper_service.repository import convert
from recordkeeper_service.tables import provenance as pm

__all__ = [
    "PUBLISHED_STATES",
    "dataset_row",
    "ensure_renderable",
    "ensure_unpublished",
    "insert_ignoring_conflicts",
    "load_provenance",
    "load_shards",
    "missing_dataset",
    "record_event",
    "state_error",
    "table_of",
    "upsert_for",
    "version_names",
    "version_view",
]


def state_error(
    error: type[RecordkeeperError], row: m.Version, consequence: str
) -> RecordkeeperError:
    """``error`` for a version in the wrong state: ``"<name> is <state>; <consequence>"``."""
    return error(f"{row.name} is {row.state}; {consequence}", state=row.state)


def ensure_unpublished(row: m.Version, consequence: str) -> None:
    """Refuse to change a committed or deprecated version: ``409 version_immutable``."""
    if row.state in PUBLISHED_STATES:
        raise state_error(VersionImmutable, row, consequence)


def record_event(
    session: Session,
    actor: str,
    action: str,
    *,
    dataset: str | None = None,
    version: str | None = None,
    **detail: Any,
) -> None:
    """Add one audit event to the current transaction."""
    session.add(
        m.AuditEvent(actor=actor, action=action, dataset=dataset, version=version, detail=detail)
    )


def dataset_row(session: Session, name: str, *, for_update: bool = False) -> m.Dataset:
    """The dataset called ``name``, or :class:`DatasetNotFound`."""
    stmt = select(m.Dataset).where(m.Dataset.name == name)
    if for_update:
        stmt = stmt.with_for_update()
    row = session.scalars(stmt).one_or_none()
    if row is None:
        raise missing_dataset(session, name)
    return row


#: Dataset names compared when suggesting one for a name that does not exist.
_SUGGESTION_POOL = 10_000


def missing_dataset(db: Session | Connection, name: str) -> DatasetNotFound:
    """The error for a dataset name that does not exist, naming the closest existing names
    ("did you mean 'coco'?") when some are close."""
    names = db.scalars(select(m.Dataset.name).order_by(m.Dataset.name).limit(_SUGGESTION_POOL))
    close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.75)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return DatasetNotFound(f"there is no dataset named {name!r}{hint}")


def table_of(model: type[m.Base]) -> Table:
    """The ``Table`` an ORM class maps (SQLAlchemy types ``__table__`` only as a ``FromClause``)."""
    table = model.__table__
    if not isinstance(table, Table):
        raise TypeError(f"{model.__name__} maps {type(table).__name__}, not a Table")
    return table


def upsert_for(session: Session, table: Table) -> postgresql.Insert | sqlite.Insert:
    """An ``INSERT`` into ``table`` that can take ``ON CONFLICT`` clauses, for the session's
    dialect (PostgreSQL or SQLite; any other raises :class:`NotImplementedError`)."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported database dialect {dialect!r}")


def insert_ignoring_conflicts(session: Session, table: Table) -> Insert:
    """``INSERT … ON CONFLICT DO NOTHING`` for the session's dialect."""
    return upsert_for(session, table).on_conflict_do_nothing()


def load_shards(db: Session | Connection, version_id: int) -> tuple[ShardRecord, ...]:
    """Every shard of a version, ordered by split and index."""
    rows = db.execute(
        select(*convert.SHARD_COLUMNS)
        .where(m.Shard.version_id == version_id)
        .order_by(m.Shard.split, m.Shard.index)
    )
    return convert.shard_records(rows)


def load_provenance(db: Session | Connection, version_id: int) -> dict[str, Any] | None:
    """The stored provenance document of a version (see :mod:`.provenance`), or None."""
    row = db.execute(
        select(pm.VersionProvenance.document).where(pm.VersionProvenance.version_id == version_id)
    ).first()
    return dict(row[0]) if row is not None else None


def version_names(session: Session, ids: Iterable[int | None]) -> dict[int, str]:
    """Names of the versions with the given ids."""
    wanted = {i for i in ids if i is not None}
    if not wanted:
        return {}
    rows = session.execute(select(m.Version.id, m.Version.name).where(m.Version.id.in_(wanted)))
    return {row.id: row.name for row in rows}


def version_view(
    session: Session, row: m.Version, dataset: str, *, with_shards: bool = False
) -> VersionRecord:
    """Convert a version row, loading its shards and ``duplicate_of`` name as needed."""
    duplicate_of = None
    if row.duplicate_of_id is not None:
        duplicate_of = version_names(session, [row.duplicate_of_id]).get(row.duplicate_of_id)
    shards = load_shards(session, row.id) if with_shards else None
    return convert.version_record(
        row,
        dataset=dataset,
        duplicate_of=duplicate_of,
        shards=shards,
        provenance=load_provenance(session, row.id),
    )


def ensure_renderable(record: Any, what: str) -> None:
    """Raise :class:`~recordkeeper.core.errors.InvalidRequest` unless ``record.to_json()``
    renders as JSON; called inside a write transaction, so an answer that could not be sent
    rolls the write back instead of leaving a row that fails every later read."""
    try:
        orjson.dumps(record.to_json())
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise InvalidRequest(f"{what} cannot be stored: {exc}") from None


def shard_page_statements(*columns: Any) -> tuple[Select[Any], Select[Any]]:
    """A version's shards as ``columns``, a page (``rk_limit`` rows) from the start and one after
    a ``(rk_split, rk_index)`` cursor: keyset paging on the (version_id, split, index) unique
    index, so page 10 costs what page 1 costs."""
    base = select(*columns).where(m.Shard.version_id == bindparam("rk_version"))
    order = (m.Shard.split, m.Shard.index)
    first = base.order_by(*order).limit(bindparam("rk_limit"))
    after = (
        base.where(
            tuple_(m.Shard.split, m.Shard.index)
            > tuple_(bindparam("rk_split", type_=m.Shard.split.type), bindparam("rk_index"))
        )
        .order_by(*order)
        .limit(bindparam("rk_limit"))
    )
    return first, after

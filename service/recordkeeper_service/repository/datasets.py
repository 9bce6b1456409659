"""Datasets: create, get, list (with each dataset's version count and latest version)."""

from __future__ import annotations

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from recordkeeper.core.errors import DatasetExists, InvalidRequest
from recordkeeper.core.limits import MAX_DESCRIPTION_LENGTH
from recordkeeper.core.naming import validate_dataset_name
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import DatasetRecord, Page
from recordkeeper_service.repository import convert
from recordkeeper_service.repository.common import (
    PUBLISHED_STATES,
    dataset_row,
    insert_ignoring_conflicts,
    record_event,
    table_of,
)

__all__ = ["MAX_DESCRIPTION_LENGTH", "DatasetRepository", "ensure_dataset"]


def ensure_dataset(session: Session, name: str, actor: str, description: str = "") -> int:
    """Id of dataset ``name``, creating it (and its audit event) if missing; race-safe."""
    existing = session.scalar(select(m.Dataset.id).where(m.Dataset.name == name))
    if existing is not None:
        return existing
    table = table_of(m.Dataset)
    stmt = (
        insert_ignoring_conflicts(session, table)
        .values(name=name, description=description, next_number=1, created_by=actor)
        .returning(table.c.id)
    )
    created = session.scalar(stmt)
    if created is not None:
        record_event(session, actor, "dataset.created", dataset=name)
        return created
    # Another transaction created it first; its row is visible now that it has committed.
    return session.scalars(select(m.Dataset.id).where(m.Dataset.name == name)).one()


def _summaries() -> Select[m.Dataset, int, str | None]:
    count = (
        select(func.count(m.Version.id))
        .where(m.Version.dataset_id == m.Dataset.id, m.Version.state.in_(PUBLISHED_STATES))
        .correlate(m.Dataset)
        .scalar_subquery()
    )
    latest = (
        select(m.Version.name)
        .where(m.Version.dataset_id == m.Dataset.id, m.Version.state == "committed")
        .order_by(m.Version.number.desc())
        .limit(1)
        .correlate(m.Dataset)
        .scalar_subquery()
    )
    return select(m.Dataset, count, latest)


class DatasetRepository:
    """Dataset operations; each public method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, name: str, description: str, actor: str) -> DatasetRecord:
        """Create a dataset; :class:`DatasetExists` if the name is taken."""
        validate_dataset_name(name)
        if len(description) > MAX_DESCRIPTION_LENGTH:
            raise InvalidRequest(
                f"description is {len(description)} characters; at most "
                f"{MAX_DESCRIPTION_LENGTH} are allowed"
            )
        with self._db.transaction() as session:
            if session.scalar(select(m.Dataset.id).where(m.Dataset.name == name)) is not None:
                raise DatasetExists(f"dataset {name!r} already exists")
            row = m.Dataset(name=name, description=description, next_number=1, created_by=actor)
            session.add(row)
            session.flush()
            record_event(session, actor, "dataset.created", dataset=name)
            return convert.dataset_record(row, version_count=0, latest=None)

    def get(self, name: str) -> DatasetRecord:
        """The dataset ``name`` with its version count and latest committed version."""
        validate_dataset_name(name)
        with self._db.transaction(write=False) as session:
            found = session.execute(_summaries().where(m.Dataset.name == name)).one_or_none()
            if found is None:
                dataset_row(session, name)  # raises DatasetNotFound
            assert found is not None
            row, count, latest = found
            return convert.dataset_record(row, version_count=count, latest=latest)

    def list(self, *, prefix: str | None, limit: int, offset: int) -> Page[DatasetRecord]:
        """Datasets ordered by name, optionally only those whose name starts with ``prefix``."""
        with self._db.transaction(write=False) as session:
            stmt = _summaries()
            total = select(func.count(m.Dataset.id))
            if prefix:
                stmt = stmt.where(m.Dataset.name.startswith(prefix, autoescape=True))
                total = total.where(m.Dataset.name.startswith(prefix, autoescape=True))
            rows = session.execute(stmt.order_by(m.Dataset.name).limit(limit).offset(offset))
            data = [
                convert.dataset_record(row, version_count=count, latest=latest)
                for row, count, latest in rows
            ]
            return Page(data=data, count=session.scalar(total) or 0, limit=limit, offset=offset)

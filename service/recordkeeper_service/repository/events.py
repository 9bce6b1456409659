"""Audit events: read side (events are written by :func:`.common.record_event`)."""

from __future__ import annotations

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import EventRecord, Page
from recordkeeper_service.repository import convert

__all__ = ["EventRepository"]


class EventRepository:
    """Lists audit events, newest first."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def list(
        self,
        *,
        dataset: str | None = None,
        version: str | None = None,
        action: str | None = None,
        limit: int,
        offset: int,
    ) -> Page[EventRecord]:
        where = []
        if dataset:
            where.append(m.AuditEvent.dataset == dataset)
        if action:
            where.append(m.AuditEvent.action == action)
        with self._db.transaction(write=False) as session:
            if version:
                where.append(m.AuditEvent.version.in_(_names_of(session, version)))
            total = session.scalar(select(func.count(m.AuditEvent.id)).where(*where)) or 0
            rows = session.scalars(
                select(m.AuditEvent)
                .where(*where)
                .order_by(m.AuditEvent.id.desc())
                .limit(limit)
                .offset(offset)
            )
            data = [convert.event_record(row) for row in rows]
            return Page(data=data, count=total, limit=limit, offset=offset)


def _names_of(session: Session, version: str) -> set[str]:
    """Every name a version's events are recorded under: the events before its commit carry
    its staged name (``…_staged4``), the later ones its ``rk1`` name; either finds all."""
    names = {version}
    row = session.execute(
        select(m.Version.name, m.Version.staged_name).where(
            or_(m.Version.name == version, m.Version.staged_name == version)
        )
    ).first()
    if row is not None:
        names.update(n for n in row if n)
    return names

"""Garbage collection of storage left by versions that never became visible.

A *candidate* is a version whose storage prefix may be emptied:

* ``abandoned`` versions, and
* ``staged`` versions created longer ago than a threshold (the collector abandons them before
  deleting, so a late writer cannot commit after its files are gone);

never a committed or deprecated version, never one a checkpoint references (the lineage guard's
:func:`~recordkeeper_service.repository.lineage.guard.versions_in_use`), never one already
collected, and never one whose prefix holds shards of a published version (shards registered in
place).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, exists, or_, select
from sqlalchemy.orm import Session

from recordkeeper.core.errors import Conflict, InvalidRequest
from recordkeeper_service import models as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import GcCandidate, Page
from recordkeeper_service.repository import convert
from recordkeeper_service.repository.common import (
    PUBLISHED_STATES,
    ensure_unpublished,
    record_event,
    state_error,
)
from recordkeeper_service.repository.lineage.guard import ensure_not_in_use, versions_in_use
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.repository.versions import parse_version_ref

__all__ = ["DEFAULT_STAGED_OLDER_THAN", "GcCandidate", "GcRepository"]

#: Staged versions older than this (seconds) are candidates unless told otherwise.
DEFAULT_STAGED_OLDER_THAN = 86400
_CHUNK = 500


def _in_use(session: Session, ids: Sequence[int]) -> set[int]:
    found: set[int] = set()
    for start in range(0, len(ids), _CHUNK):
        found |= versions_in_use(session, ids[start : start + _CHUNK])
    return found


def _holds_published_shards(session: Session, prefix: str) -> bool:
    """Whether a committed/deprecated version has a shard stored under ``prefix``."""
    stmt = select(
        exists()
        .where(m.Shard.version_id == m.Version.id)
        .where(m.Version.state.in_(PUBLISHED_STATES))
        .where(m.Shard.uri.startswith(prefix, autoescape=True))
    )
    return bool(session.scalar(stmt))


class GcRepository:
    """Candidates for garbage collection and marking them collected."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def candidates(self, *, staged_older_than: int, limit: int, offset: int) -> Page[GcCandidate]:
        """Uncollected abandoned versions and stale staged ones, oldest first (newest last)."""
        if staged_older_than < 0:
            raise InvalidRequest("staged_older_than must be a number of seconds >= 0")
        now = m.utcnow()
        # No staged version is older than the calendar: clamp, or timedelta/datetime overflow.
        since_year_one = now - datetime.datetime.min.replace(tzinfo=datetime.UTC)
        seconds = min(staged_older_than, int(since_year_one.total_seconds()))
        cutoff = now - datetime.timedelta(seconds=seconds)
        with self._db.transaction(write=False) as session:
            rows = session.execute(
                select(m.Version, m.Dataset.name)
                .join(m.Dataset, m.Dataset.id == m.Version.dataset_id)
                .where(m.Version.collected_at.is_(None))
                .where(
                    or_(
                        m.Version.state == "abandoned",
                        and_(m.Version.state == "staged", m.Version.created_at < cutoff),
                    )
                )
                .order_by(m.Version.created_at, m.Version.id)
            ).all()
            # Explicit even though only committed versions can train checkpoints.
            in_use = _in_use(session, [row.id for row, _ in rows])
            kept = [
                convert.gc_candidate(row, dataset)
                for row, dataset in rows
                if row.id not in in_use
                and row.state not in PUBLISHED_STATES
                and not _holds_published_shards(session, row.storage_prefix)
            ]
        return Page(data=kept[offset : offset + limit], count=len(kept), limit=limit, offset=offset)

    def mark_collected(
        self, version_name: str, *, actor: str, objects: int | None, size: int | None
    ) -> GcCandidate:
        """Record that an abandoned version's storage was deleted (idempotent)."""
        ref = parse_version_ref(version_name)
        with self._db.transaction() as session:
            row = find_version(session, ref, for_update=True)
            ensure_unpublished(row, "its storage is never collected")
            if row.state != "abandoned":
                raise state_error(Conflict, row, "abandon it before collecting its storage")
            # Only committed versions can train checkpoints, but the guard is explicit.
            ensure_not_in_use(session, row)
            if row.collected_at is None:
                row.collected_at = m.utcnow()
                detail: dict[str, Any] = {"storage_prefix": row.storage_prefix}
                if objects is not None:
                    detail["objects"] = objects
                if size is not None:
                    detail["bytes"] = size
                record_event(
                    session,
                    actor,
                    "version.collected",
                    dataset=ref.dataset,
                    version=row.name,
                    **detail,
                )
                session.flush()
            return convert.gc_candidate(row, ref.dataset)

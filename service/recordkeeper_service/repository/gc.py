"""Garbage collection of storage left by versions that never became visible.

A *candidate* is a version whose storage prefix may be emptied:

* ``abandoned`` versions, and
* ``staged`` versions *idle* for longer than a threshold: created, and last given a shard, more
  than ``max(staged_older_than, MIN_STAGED_IDLE)`` seconds ago.  The floor is the server's: a
  collector asking for ``0`` still never gets a version another writer is working on;

never a committed or deprecated version, never one a checkpoint references (the lineage guard's
:func:`~recordkeeper_service.repository.lineage.guard.versions_in_use`), never one already
collected.  A candidate's prefix may hold objects other versions reference (shards registered in
place there): those are kept object by object (:meth:`GcRepository.deletable`), so the prefix
is still collected — what else lies there is deleted.

Deleting is authorized by the server before it happens: :meth:`GcRepository.claim` (admin scope
at the route) selects candidates, re-checks each under its row lock, abandons a staged one (so a
late writer cannot commit after its files are gone), records who claimed it and when, and
releases its storage prefix.  The collector then asks, per batch of the objects it found under
the prefix, which it may delete (:meth:`GcRepository.deletable`, the claimant only): the
answer applies :mod:`~recordkeeper_service.repository.deletion`, the one deletion rule — an
object a live version references (a shard registered in place under the prefix, a derived
version's) is kept.  :meth:`GcRepository.mark_collected` accepts only the claimant's report, and
re-checks that no live shard slipped into the released prefix.  Every step writes an audit
event.  A claim older than :data:`CLAIM_LEASE` seconds (a collector that died) may be taken
over by another claim.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, or_, select
from sqlalchemy.orm import Session

from recordkeeper.core.errors import Conflict, InvalidRequest, StorageReleased
from recordkeeper.core.roots import UriError, UriEscapes, normalize_uri
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import GcCandidate, GcObjects, Page
from recordkeeper_service.repository import convert
from recordkeeper_service.repository.common import (
    PUBLISHED_STATES,
    ensure_unpublished,
    record_event,
    state_error,
)
from recordkeeper_service.repository.deletion import (
    MAX_OBJECTS_PER_QUESTION,
    referencing_versions,
    slipped_under,
)
from recordkeeper_service.repository.lineage.guard import ensure_not_in_use, versions_in_use
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.repository.versions import parse_version_ref

__all__ = [
    "CLAIM_LEASE",
    "DEFAULT_STAGED_OLDER_THAN",
    "MAX_CLAIMS",
    "MIN_STAGED_IDLE",
    "GcCandidate",
    "GcObjects",
    "GcRepository",
]

#: Staged versions older than this (seconds) are candidates unless told otherwise.
DEFAULT_STAGED_OLDER_THAN = 86400
#: A staged version created or given a shard less than this many seconds ago is never a candidate,
#: whatever threshold the collector asks for (another writer may still be writing it).
MIN_STAGED_IDLE = 3600
#: A claim older than this (seconds) may be taken over by another collector's claim.
CLAIM_LEASE = 3600
#: Most versions one claim request releases.
MAX_CLAIMS = 1000
_CHUNK = 500


def _in_use(session: Session, ids: Sequence[int]) -> set[int]:
    found: set[int] = set()
    for start in range(0, len(ids), _CHUNK):
        found |= versions_in_use(session, ids[start : start + _CHUNK])
    return found


def _ago(now: datetime.datetime, seconds: int) -> datetime.datetime:
    # No staged version is older than the calendar: clamp, or timedelta/datetime overflow.
    since_year_one = now - datetime.datetime.min.replace(tzinfo=datetime.UTC)
    return now - datetime.timedelta(seconds=min(seconds, int(since_year_one.total_seconds())))


def _candidate_clause(cutoff: datetime.datetime) -> ColumnElement[bool]:
    """Uncollected, and abandoned or staged with no activity since ``cutoff``."""
    recent_shard = exists().where(
        m.Shard.version_id == m.Version.id, m.Shard.registered_at >= cutoff
    )
    return and_(
        m.Version.collected_at.is_(None),
        or_(
            m.Version.state == "abandoned",
            and_(m.Version.state == "staged", m.Version.created_at < cutoff, ~recent_shard),
        ),
    )


class GcRepository:
    """Candidates for garbage collection, claims on them, and marking them collected."""

    def __init__(self, db: Database) -> None:
        self._db = db

    @staticmethod
    def _cutoff(staged_older_than: int, now: datetime.datetime) -> datetime.datetime:
        if staged_older_than < 0:
            raise InvalidRequest("staged_older_than must be a number of seconds >= 0")
        return _ago(now, max(staged_older_than, MIN_STAGED_IDLE))

    def _select(
        self, session: Session, cutoff: datetime.datetime, *extra: ColumnElement[bool]
    ) -> list[tuple[m.Version, str]]:
        rows = session.execute(
            select(m.Version, m.Dataset.name)
            .join(m.Dataset, m.Dataset.id == m.Version.dataset_id)
            .where(_candidate_clause(cutoff), *extra)
            .order_by(m.Version.created_at, m.Version.id)
        ).all()
        # Explicit even though only committed versions can train checkpoints.
        in_use = _in_use(session, [row.id for row, _ in rows])
        return [
            (row, dataset)
            for row, dataset in rows
            if row.id not in in_use and row.state not in PUBLISHED_STATES
        ]

    def candidates(self, *, staged_older_than: int, limit: int, offset: int) -> Page[GcCandidate]:
        """Uncollected abandoned versions and idle staged ones, oldest first (newest last)."""
        cutoff = self._cutoff(staged_older_than, m.utcnow())
        with self._db.transaction(write=False) as session:
            kept = [convert.gc_candidate(row, ds) for row, ds in self._select(session, cutoff)]
        return Page(data=kept[offset : offset + limit], count=len(kept), limit=limit, offset=offset)

    def claim(self, *, staged_older_than: int, limit: int, actor: str) -> list[GcCandidate]:
        """Claim up to ``limit`` candidates for ``actor``: their prefixes are released to it.

        A staged candidate is abandoned in the same transaction.  Versions claimed by someone
        within :data:`CLAIM_LEASE` are left to their claimant (including ``actor`` itself, so a
        collector calling again gets the next ones).
        """
        if not 1 <= limit <= MAX_CLAIMS:
            raise InvalidRequest(f"limit must be between 1 and {MAX_CLAIMS}")
        now = m.utcnow()
        cutoff = self._cutoff(staged_older_than, now)
        free = or_(
            m.Version.gc_claimed_at.is_(None), m.Version.gc_claimed_at < _ago(now, CLAIM_LEASE)
        )
        claimed: list[GcCandidate] = []
        with self._db.transaction() as session:
            for row, dataset in self._select(session, cutoff, free):
                if len(claimed) >= limit:
                    break
                # Re-check under the row lock: a writer may have registered or committed since.
                # A row another transaction holds (a registration reading it FOR SHARE, a
                # commit, another claim) is skipped, never waited for: no lock cycle with a
                # registration that holds its own version and reads this one.
                locked = session.scalars(
                    select(m.Version)
                    .where(m.Version.id == row.id, _candidate_clause(cutoff), free)
                    .with_for_update(skip_locked=True)
                    .execution_options(populate_existing=True)
                ).one_or_none()
                if locked is None:
                    continue
                # Stamped once the lock is held: every shard registered before is older, every
                # later registration under the prefix waits for this and is refused.
                stamp = m.utcnow()
                previous_claimant = locked.gc_claimed_by
                if locked.state == "staged":
                    locked.state = "abandoned"
                    locked.abandoned_at = stamp
                    record_event(
                        session,
                        actor,
                        "version.abandoned",
                        dataset=dataset,
                        version=locked.name,
                        reason="gc",
                    )
                locked.gc_claimed_by = actor
                locked.gc_claimed_at = stamp
                detail: dict[str, Any] = {
                    "storage_prefix": locked.storage_prefix,
                    "staged_older_than": staged_older_than,
                }
                if previous_claimant is not None:
                    detail["taken_over_from"] = previous_claimant
                record_event(
                    session,
                    actor,
                    "version.gc_claimed",
                    dataset=dataset,
                    version=locked.name,
                    **detail,
                )
                claimed.append(convert.gc_candidate(locked, dataset))
            session.flush()
        return claimed

    def mark_collected(
        self, version_name: str, *, actor: str, objects: int | None, size: int | None
    ) -> GcCandidate:
        """Record that a claimed version's storage was deleted (idempotent; claimant only)."""
        ref = parse_version_ref(version_name)
        with self._db.transaction() as session:
            row = find_version(session, ref, for_update=True)
            ensure_unpublished(row, "its storage is never collected")
            if row.collected_at is not None:
                return convert.gc_candidate(row, ref.dataset)
            if row.state != "abandoned" or row.gc_claimed_by is None:
                raise state_error(
                    Conflict, row, "its storage was not released: claim it first (POST /gc/claims)"
                )
            if row.gc_claimed_by != actor:
                raise Conflict(
                    f"{row.name} is claimed by {row.gc_claimed_by!r}; only the claimant reports "
                    "its storage collected",
                    state=row.state,
                    claimed_by=row.gc_claimed_by,
                )
            # Only committed versions can train checkpoints, but the guard is explicit.
            ensure_not_in_use(session, row)
            _ensure_nothing_slipped_in(session, row)
            row.collected_at = m.utcnow()
            detail: dict[str, Any] = {"storage_prefix": row.storage_prefix}
            if objects is not None:
                detail["objects"] = objects
            if size is not None:
                detail["bytes"] = size
            record_event(
                session, actor, "version.collected", dataset=ref.dataset, version=row.name, **detail
            )
            session.flush()
            return convert.gc_candidate(row, ref.dataset)

    def deletable(self, version_name: str, uris: Sequence[str], *, actor: str) -> GcObjects:
        """Which of ``uris`` (objects the collector found under a version's released prefix)
        it may delete, and which it must keep (the claimant only; nothing changes).

        An object is kept when it lies outside the version's storage prefix or a live version
        other than this one references it (:mod:`~recordkeeper_service.repository.deletion`).
        A URI no shard could carry (whitespace, a query, …) is junk under the prefix; one with
        ``.``/``..`` segments is refused (``422``): it could name something outside.
        """
        return self._objects(version_name, uris, actor=actor)

    def preview(self, version_name: str, uris: Sequence[str]) -> GcObjects:
        """What :meth:`deletable` would answer once the version is claimed, for a dry run:
        the same rule, asked of a candidate not claimed (read scope at the route; nothing
        changes).  A version whose storage was collected, or a published one, is refused."""
        return self._objects(version_name, uris, actor=None)

    def _objects(self, version_name: str, uris: Sequence[str], *, actor: str | None) -> GcObjects:
        """:meth:`deletable` (``actor``: the claimant) or :meth:`preview` (``None``)."""
        if len(uris) > MAX_OBJECTS_PER_QUESTION:
            raise InvalidRequest(
                f"at most {MAX_OBJECTS_PER_QUESTION} object URIs per question, got {len(uris)}"
            )
        malformed: set[str] = set()
        for position, uri in enumerate(uris):
            try:
                normalize_uri(uri)
            except UriEscapes as exc:
                raise InvalidRequest(f"uris[{position}]: {exc}") from None
            except UriError:
                malformed.add(uri)  # no shard can carry it (registration normalises): junk
        ref = parse_version_ref(version_name)
        with self._db.transaction(write=False) as session:
            row = find_version(session, ref)
            ensure_unpublished(row, "its storage is never collected")
            if actor is not None:
                _ensure_claimant(row, actor, "asks which of its objects may be deleted")
            elif row.collected_at is not None:
                raise Conflict(
                    f"{row.name}'s storage was already recorded collected", state=row.state
                )
            prefix = row.storage_prefix
            inside = [u for u in dict.fromkeys(uris) if u.startswith(prefix) and u != prefix]
            referenced = referencing_versions(
                session, [u for u in inside if u not in malformed], releasing=[row.id]
            )
        keep: dict[str, tuple[str, ...]] = {}
        for uri in dict.fromkeys(uris):
            if uri not in inside:
                keep[uri] = ()
            elif uri in referenced:
                keep[uri] = tuple(sorted(referenced[uri]))
        return GcObjects(
            version=row.name,
            delete=tuple(u for u in inside if u not in keep),
            keep=keep,
        )


def _ensure_claimant(row: m.Version, actor: str, what: str) -> None:
    if row.state != "abandoned" or row.gc_claimed_by is None:
        raise state_error(
            Conflict, row, "its storage was not released: claim it first (POST /gc/claims)"
        )
    if row.collected_at is not None:
        raise Conflict(f"{row.name}'s storage was already recorded collected", state=row.state)
    if row.gc_claimed_by != actor:
        raise Conflict(
            f"{row.name} is claimed by {row.gc_claimed_by!r}; only the claimant {what}",
            state=row.state,
            claimed_by=row.gc_claimed_by,
        )


def _ensure_nothing_slipped_in(session: Session, row: m.Version) -> None:
    """Refuse to record storage collected while a live shard was registered in it after the
    claim (the locks make this impossible; the re-check makes a broken lock visible)."""
    slipped = slipped_under(session, row)
    if slipped:
        holder, uri = slipped[0]
        raise StorageReleased(
            f"{holder} registered {uri!r} under {row.name}'s storage after it was released; "
            "its storage is not recorded collected",
            uri=uri,
            released_by=row.name,
            version=holder,
        )

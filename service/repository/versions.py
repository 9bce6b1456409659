"""Versions: stage, resolve, list, abandon, deprecate.

Registering shards lives in :mod:`.shards` and committing in :mod:`.commit`.
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from recordkeeper.errors import (
    DigestMismatch,
    InvalidHash,
    InvalidRequest,
    InvalidVersionName,
    VersionImmutable,
)
from recordkeeper.naming import (
    CONVENTION,
    format_version_name,
    parse_date,
    parse_version_name,
    validate_dataset_name,
    validate_desc,
)
from recordkeeper.refs import Reference, RefKind, parse_reference
from recordkeeper.service import models as m
from recordkeeper.service.db import Database
from recordkeeper.service.domain import Page, VersionRecord
from recordkeeper.service.lineage.guard import ensure_not_in_use
from recordkeeper.service.repository import convert
from recordkeeper.service.repository.common import (
    dataset_row,
    record_event,
    version_names,
    version_view,
)
from recordkeeper.service.repository.datasets import ensure_dataset
from recordkeeper.service.repository.resolve import find_version
from recordkeeper.service.uris import AllowedRoots, UriError

__all__ = ["MAX_REASON_LENGTH", "VersionRepository", "parse_version_ref", "today_utc"]

MAX_REASON_LENGTH = 2000
_HEX = frozenset("0123456789abcdef")


def today_utc() -> datetime.date:
    return datetime.datetime.now(datetime.UTC).date()


def parse_version_ref(text: str) -> Reference:
    """Parse a path ``{version_name}``: it must be a version name, not another ref form."""
    if "@" not in text:
        name = parse_version_name(text.strip())  # InvalidVersionName with the precise reason
        return Reference(dataset=name.dataset, kind=RefKind.NAME, number=name.number, name=name)
    ref = parse_reference(text)
    if ref.kind is not RefKind.NAME:
        raise InvalidVersionName(
            f"{text!r} is a reference, but this operation needs the version's name "
            "(dataset_YYYYMMDD_vN[_desc])"
        )
    return ref


def _normalize_digest(value: str) -> str:
    digest = value.removeprefix("sha256:")
    if len(digest) != 64 or not set(digest) <= _HEX:
        raise InvalidHash(
            f"expect_digest must be 'sha256:' followed by 64 lowercase hex digits, got {value!r}"
        )
    return "sha256:" + digest


class VersionRepository:
    """Version lifecycle and reads; each public method is one transaction."""

    def __init__(self, db: Database, roots: AllowedRoots, storage_root: str) -> None:
        self._db = db
        self._roots = roots
        self._storage_root = storage_root

    # ---------------------------------------------------------------- stage

    def stage(
        self,
        dataset: str,
        *,
        actor: str,
        desc: str | None = None,
        date: str | None = None,
        root: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> VersionRecord:
        """Allocate the next number of ``dataset`` (creating it if needed) and stage a version."""
        validate_dataset_name(dataset)
        validate_desc(desc)
        day = parse_date(date) if date is not None else today_utc()
        try:
            normalized_root = self._roots.check(root or self._storage_root, "storage root")
        except UriError as exc:
            raise InvalidRequest(f"root: {exc}") from None
        base = normalized_root.rstrip("/")
        with self._db.transaction() as session:
            dataset_id = ensure_dataset(session, dataset, actor)
            number = self._allocate_number(session, dataset_id)
            name = format_version_name(dataset, day, number, desc)
            row = m.Version(
                dataset_id=dataset_id,
                number=number,
                name=name,
                date=day,
                desc=desc,
                convention=CONVENTION,
                state="staged",
                storage_prefix=f"{base}/{dataset}/{name}/",
                record_count=0,
                shard_count=0,
                size=0,
                extra_metadata=metadata or {},
                created_by=actor,
            )
            session.add(row)
            session.flush()
            record_event(
                session, actor, "version.staged", dataset=dataset, version=name, number=number
            )
            return convert.version_record(row, dataset=dataset)

    @staticmethod
    def _allocate_number(session: Session, dataset_id: int) -> int:
        """Atomically take the dataset's next number (the row lock serialises stagers)."""
        stmt = (
            update(m.Dataset)
            .where(m.Dataset.id == dataset_id)
            .values(next_number=m.Dataset.next_number + 1)
            .returning(m.Dataset.next_number)
            .execution_options(synchronize_session=False)
        )
        return int(session.execute(stmt).scalar_one()) - 1

    # ---------------------------------------------------------------- read

    def resolve(
        self, ref_text: str, *, shards: bool = True, expect_digest: str | None = None
    ) -> VersionRecord:
        """The version any reference form points at (see :mod:`.resolve`)."""
        ref = parse_reference(ref_text)
        expected = _normalize_digest(expect_digest) if expect_digest is not None else None
        with self._db.transaction(write=False) as session:
            row = find_version(session, ref)
            if expected is not None and row.content_digest != expected:
                raise DigestMismatch(
                    f"{ref_text} resolved to {row.name} whose content digest is "
                    f"{row.content_digest or 'not computed (staged)'}, not {expected}",
                    expected=expected,
                    actual=row.content_digest,
                    version=row.name,
                )
            return version_view(session, row, ref.dataset, with_shards=shards)

    def list(
        self,
        dataset: str,
        *,
        state: str | None,
        since: str | None,
        until: str | None,
        limit: int,
        offset: int,
    ) -> Page[VersionRecord]:
        """Versions of ``dataset``, newest (highest number) first."""
        validate_dataset_name(dataset)
        since_day = parse_date(since) if since else None
        until_day = parse_date(until) if until else None
        with self._db.transaction(write=False) as session:
            ds = dataset_row(session, dataset)
            where = [m.Version.dataset_id == ds.id]
            if state:
                where.append(m.Version.state == state)
            if since_day:
                where.append(m.Version.date >= since_day)
            if until_day:
                where.append(m.Version.date <= until_day)
            total = session.scalar(select(func.count(m.Version.id)).where(*where)) or 0
            rows = list(
                session.scalars(
                    select(m.Version)
                    .where(*where)
                    .order_by(m.Version.number.desc())
                    .limit(limit)
                    .offset(offset)
                )
            )
            names = version_names(session, (r.duplicate_of_id for r in rows))
            data = [
                convert.version_record(
                    r, dataset=dataset, duplicate_of=names.get(r.duplicate_of_id or -1)
                )
                for r in rows
            ]
            return Page(data=data, count=total, limit=limit, offset=offset)

    # ---------------------------------------------------------------- state changes

    def abandon(self, version_name: str, *, actor: str) -> VersionRecord:
        """Abandon a staged version (idempotent); committed versions are immutable."""
        ref = parse_version_ref(version_name)
        with self._db.transaction() as session:
            row = find_version(session, ref, for_update=True)
            if row.state in ("committed", "deprecated"):
                raise VersionImmutable(
                    f"{row.name} is {row.state}; only staged versions can be abandoned",
                    state=row.state,
                )
            if row.state == "staged":
                row.state = "abandoned"
                row.abandoned_at = m.utcnow()
                record_event(
                    session, actor, "version.abandoned", dataset=ref.dataset, version=row.name
                )
                session.flush()
            return version_view(session, row, ref.dataset)

    def deprecate(
        self, ref_text: str, *, reason: str | None, actor: str, force: bool = False
    ) -> VersionRecord:
        """Mark a committed version deprecated (idempotent; the first reason is kept).

        A version that trained checkpoints is refused with ``version_in_use`` unless ``force``
        (the route allows it to admin tokens only).
        """
        ref = parse_reference(ref_text)
        reason = (reason or "").strip() or None
        if reason is not None and len(reason) > MAX_REASON_LENGTH:
            raise InvalidRequest(f"reason is longer than {MAX_REASON_LENGTH} characters")
        with self._db.transaction() as session:
            row = find_version(session, ref, published_only=True, for_update=True)
            if row.state == "committed":
                in_use = ensure_not_in_use(session, row, force=force)
                row.state = "deprecated"
                row.deprecated_at = m.utcnow()
                row.deprecated_reason = reason
                record_event(
                    session,
                    actor,
                    "version.deprecated",
                    dataset=ref.dataset,
                    version=row.name,
                    reason=reason,
                    **({"forced_over_checkpoints": in_use} if in_use else {}),
                )
                session.flush()
            return version_view(session, row, ref.dataset)

"""Record identity of versions: register a version's split digests, list them, look them up.

The service never reads shards.  A client that indexed a version (``recordkeeper index REF``)
registers each split's record count and set digest; the repository checks them against the
version's registered per-split record counts (an index of other data cannot be registered),
computes the version's record digest with the core rule
(:func:`recordkeeper.core.record_index.version_records_digest`) and stores one row per version,
kind and width.  Registering again replaces the row (an audit event records both digests).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from recordkeeper.core.digests import format_digest, parse_digest
from recordkeeper.core.errors import InvalidRequest, VersionNotFound
from recordkeeper.core.record_identity import IdentityKind, validate_identity
from recordkeeper.core.record_index import FORMAT_VERSION, version_records_digest
from recordkeeper.core.refs import PUBLISHED_STATES, parse_reference
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.repository.common import record_event
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.tables.record_sets import VersionRecordSet

__all__ = ["RecordSetRepository", "record_set_of", "split_record_counts"]


def split_record_counts(session: Session, version_id: int) -> dict[str, int]:
    """Records per split of a version, from its registered shards."""
    stmt = (
        select(m.Shard.split, func.coalesce(func.sum(m.Shard.record_count), 0))
        .where(m.Shard.version_id == version_id)
        .group_by(m.Shard.split)
    )
    return {split: int(n) for split, n in session.execute(stmt)}


def record_set_of(
    session: Session, version_id: int, kind: str, width: int
) -> VersionRecordSet | None:
    """The record identity of kind ``kind`` and width ``width`` registered for a version."""
    return session.scalars(
        select(VersionRecordSet).where(
            VersionRecordSet.version_id == version_id,
            VersionRecordSet.kind == kind,
            VersionRecordSet.width == width,
        )
    ).one_or_none()


def _to_json(row: VersionRecordSet, version: m.Version) -> dict[str, Any]:
    return {
        "version": version.name,
        "kind": row.kind,
        "width": row.width,
        "index_format": row.index_format,
        "records_digest": row.records_digest,
        "record_count": row.record_count,
        "splits": [{"split": k, **row.splits[k]} for k in sorted(row.splits)],
        "index_location": row.index_location,
        "created_at": row.created_at.isoformat(),
        "created_by": row.created_by,
    }


class RecordSetRepository:
    """Record identity rows; one transaction per call."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def register(
        self,
        ref_text: str,
        *,
        kind: str,
        width: int,
        index_format: int,
        splits: Mapping[str, tuple[int, str]],
        index_location: str,
        actor: str,
    ) -> dict[str, Any]:
        """Register the record identity of the version ``ref_text`` names."""
        ref = parse_reference(ref_text)
        checked_kind: IdentityKind
        checked_kind, width = validate_identity(kind, width)
        if index_format != FORMAT_VERSION:
            raise InvalidRequest(f"index format {index_format} is not known (this is 1)")
        digests = {s: (n, parse_digest(d, f"splits.{s}.digest")) for s, (n, d) in splits.items()}
        with self._db.transaction() as session:
            version = find_version(session, ref, for_update=True)
            if version.state not in PUBLISHED_STATES:
                raise VersionNotFound(
                    f"{version.name} is {version.state}: only committed versions get record "
                    "identity"
                )
            counts = split_record_counts(session, version.id)
            given = {s: n for s, (n, _) in digests.items()}
            if given != counts:
                raise InvalidRequest(
                    f"the split record counts {dict(sorted(given.items()))} are not those of "
                    f"{version.name}: {dict(sorted(counts.items()))}"
                )
            hexes = {s: (n, d[len("sha256:") :]) for s, (n, d) in digests.items()}
            records_digest = format_digest(version_records_digest(hexes, checked_kind, width))
            row = record_set_of(session, version.id, checked_kind, width)
            previous = row.records_digest if row is not None else None
            if row is None:
                row = VersionRecordSet(version_id=version.id, kind=checked_kind, width=width)
                session.add(row)
            row.index_format = index_format
            row.records_digest = records_digest
            row.record_count = sum(counts.values())
            row.splits = {s: {"records": n, "digest": d} for s, (n, d) in sorted(digests.items())}
            row.index_location = index_location
            row.created_by = actor
            session.flush()
            record_event(
                session,
                actor,
                "version.record_identity",
                dataset=ref.dataset,
                version=version.name,
                kind=checked_kind,
                width=width,
                records_digest=records_digest,
                previous=previous,
            )
            return _to_json(row, version)

    def of_version(self, ref_text: str) -> list[dict[str, Any]]:
        """The record identities registered for a version (none: it has none yet)."""
        ref = parse_reference(ref_text)
        with self._db.transaction(write=False) as session:
            version = find_version(session, ref)
            rows = session.scalars(
                select(VersionRecordSet)
                .where(VersionRecordSet.version_id == version.id)
                .order_by(VersionRecordSet.kind, VersionRecordSet.width)
            )
            return [_to_json(row, version) for row in rows]

    def find(self, records_digest: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """Committed or deprecated versions whose records have this digest."""
        digest = parse_digest(records_digest, "records_digest")
        with self._db.transaction(write=False) as session:
            stmt = (
                select(VersionRecordSet, m.Version)
                .join(m.Version, m.Version.id == VersionRecordSet.version_id)
                .where(VersionRecordSet.records_digest == digest)
                .where(m.Version.state.in_(PUBLISHED_STATES))
                .order_by(m.Version.id)
                .limit(limit)
            )
            return [_to_json(row, version) for row, version in session.execute(stmt)]

"""Explicit ORM-row → domain-record conversion (the only place that knows both sides)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Row

from recordkeeper_service import tables as m
from recordkeeper_service.domain import (
    AliasRecord,
    DatasetRecord,
    EventRecord,
    GcCandidate,
    ShardRecord,
    TokenRecord,
    VersionRecord,
)

__all__ = [
    "SHARD_COLUMNS",
    "VERSION_COLUMNS",
    "dataset_record",
    "event_record",
    "gc_candidate",
    "shard_records",
    "token_record",
    "version_record",
]

#: Columns selected to build :class:`ShardRecord`: one per record field, in constructor order.
SHARD_COLUMNS = tuple(getattr(m.Shard, f.name) for f in dataclasses.fields(ShardRecord))


#: Columns selected to build :class:`VersionRecord` without the ORM (labels = attribute names).
VERSION_COLUMNS = (
    m.Version.id,
    m.Version.name,
    m.Version.number,
    m.Version.date,
    m.Version.desc,
    m.Version.convention,
    m.Version.state,
    m.Version.storage_prefix,
    m.Version.content_digest,
    m.Version.schema_digest,
    m.Version.record_count,
    m.Version.shard_count,
    m.Version.size,
    m.Version.extra_metadata.label("extra_metadata"),
    m.Version.created_at,
    m.Version.created_by,
    m.Version.committed_at,
    m.Version.deprecated_at,
    m.Version.deprecated_reason,
    m.Version.duplicate_of_id,
    m.Version.staged_name,
    m.Version.gc_claimed_at,
    m.Version.collected_at,
    m.Version.collected_reason,
)


def dataset_record(row: m.Dataset, *, version_count: int, latest: str | None) -> DatasetRecord:
    return DatasetRecord(
        name=row.name,
        description=row.description,
        created_at=row.created_at,
        created_by=row.created_by,
        version_count=version_count,
        latest=latest,
    )


def shard_records(rows: Iterable[Sequence[Any]]) -> tuple[ShardRecord, ...]:
    """Rows selected with :data:`SHARD_COLUMNS` (values in field order) → records."""
    return tuple(ShardRecord(*row) for row in rows)


def version_record(
    row: m.Version | Row[Any],
    *,
    dataset: str,
    duplicate_of: str | None = None,
    shards: tuple[ShardRecord, ...] | None = None,
    provenance: dict[str, Any] | None = None,
) -> VersionRecord:
    return VersionRecord(
        id=row.id,
        name=row.name,
        dataset=dataset,
        number=row.number,
        date=row.date,
        desc=row.desc,
        convention=row.convention,
        state=row.state,
        storage_prefix=row.storage_prefix,
        content_digest=row.content_digest,
        schema_digest=row.schema_digest,
        record_count=row.record_count,
        shard_count=row.shard_count,
        size=row.size,
        created_at=row.created_at,
        created_by=row.created_by,
        committed_at=row.committed_at,
        deprecated_at=row.deprecated_at,
        deprecated_reason=row.deprecated_reason,
        metadata=dict(row.extra_metadata or {}),
        duplicate_of=duplicate_of,
        staged_name=row.staged_name,
        shards=shards,
        released_at=row.gc_claimed_at,
        collected_at=row.collected_at,
        collected_reason=row.collected_reason,
        provenance=provenance,
    )


def alias_record(
    dataset: str, alias: str, version: str, updated_at: Any, updated_by: str | None
) -> AliasRecord:
    return AliasRecord(
        dataset=dataset, alias=alias, version=version, updated_at=updated_at, updated_by=updated_by
    )


def event_record(row: m.AuditEvent) -> EventRecord:
    return EventRecord(
        id=row.id,
        at=row.at,
        actor=row.actor,
        action=row.action,
        dataset=row.dataset,
        version=row.version,
        detail=dict(row.detail or {}),
    )


def gc_candidate(row: m.Version, dataset: str) -> GcCandidate:
    return GcCandidate(
        name=row.name,
        dataset=dataset,
        state=row.state,
        created_at=row.created_at,
        storage_prefix=row.storage_prefix,
        shard_count=row.shard_count,
        abandoned_at=row.abandoned_at,
        collected_at=row.collected_at,
        claimed_by=row.gc_claimed_by,
        claimed_at=row.gc_claimed_at,
    )


def token_record(row: m.ApiToken) -> TokenRecord:
    return TokenRecord(
        id=row.id,
        name=row.name,
        scope=row.scope,
        created_at=row.created_at,
        created_by=row.created_by,
        revoked_at=row.revoked_at,
        last_used_at=row.last_used_at,
    )

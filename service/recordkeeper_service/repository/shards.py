"""Registering shards of a staged version, in bulk.

One request may carry 10,000 shards, so the work is set-based: one query loads the version's
existing shards for the conflict check, missing schema bodies are inserted once per digest, and
the new shards go in as one multi-row ``INSERT`` (executemany).  The version row is locked for the
duration, so a concurrent commit either sees all of this request's shards or none.

No new shard may lie in storage released for deletion (``409 storage_released``,
:func:`~recordkeeper_service.repository.deletion.ensure_not_released`): the check reads the
releasing versions under a lock a claim conflicts with, so a claim and a registration under its
prefix never both succeed unseen by the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from recordkeeper.core.errors import InvalidShard, ShardConflict, VersionNotStaged
from recordkeeper.core.roots import AllowedRoots
from recordkeeper.core.schema import Schema
from recordkeeper.core.shards import CONTENT_FIELDS, check_totals
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import RegisterResult
from recordkeeper_service.metrics import ServiceMetrics
from recordkeeper_service.repository.common import (
    ensure_unpublished,
    insert_ignoring_conflicts,
    record_event,
    state_error,
    table_of,
)
from recordkeeper_service.repository.deletion import ensure_not_released
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.repository.versions import parse_version_ref
from recordkeeper_service.validation import ValidShard, validate_shards

__all__ = ["ShardRepository", "store_schemas"]

#: Columns compared when a shard is registered again (those that say which bytes it is).
_EXISTING_COLUMNS = (
    m.Shard.split,
    m.Shard.index,
    *(getattr(m.Shard, name) for name in CONTENT_FIELDS),
)


def store_schemas(session: Session, schemas: Mapping[str, Schema]) -> None:
    """Insert the schema bodies whose digests are not stored yet (content-addressed)."""
    if not schemas:
        return
    known = set(
        session.scalars(select(m.SchemaBlob.digest).where(m.SchemaBlob.digest.in_(schemas)))
    )
    missing = [
        {"digest": digest, "body": schema.to_dict(), "created_at": m.utcnow()}
        for digest, schema in schemas.items()
        if digest not in known
    ]
    if missing:
        table = table_of(m.SchemaBlob)
        session.execute(insert_ignoring_conflicts(session, table), missing)


def _not_the_prefix(valid: Sequence[ValidShard], prefix: str) -> None:
    """A shard is a file inside the version's prefix, never the prefix itself."""
    directory = prefix.rstrip("/")
    for shard in valid:
        if shard.record.uri == directory:
            raise InvalidShard(
                f"shard {shard.position}: uri {shard.record.uri!r} is the version's own prefix "
                "(a directory), not a shard file",
                shard=shard.position,
            )


class ShardRepository:
    """Bulk shard registration; each call is one transaction."""

    def __init__(
        self, db: Database, roots: AllowedRoots, *, metrics: ServiceMetrics | None = None
    ) -> None:
        self._db = db
        self._roots = roots
        self._metrics = metrics

    def register(
        self, version_name: str, shards: Sequence[Mapping[str, Any]], *, actor: str
    ) -> RegisterResult:
        """Register ``shards`` on a staged version; identical re-registrations are no-ops."""
        ref = parse_version_ref(version_name)
        valid, schemas = validate_shards(shards, self._roots)
        with self._db.transaction() as session:
            version = find_version(session, ref, for_update=True)
            ensure_unpublished(version, "its shards can never change")
            if version.state != "staged":
                raise state_error(VersionNotStaged, version, "only staged versions accept shards")
            _not_the_prefix(valid, version.storage_prefix)
            existing, split_counts = _existing(session, version.id, valid)
            new, unchanged = _plan(valid, existing, split_counts)
            # Only new shards: one already registered stays this version's (and was kept by
            # the collector if it lies under a released prefix).
            ensure_not_released(
                session, [shard.record.uri for shard in new], registering=version.id
            )
            # Before anything is written: the version's totals (its row is locked) plus the
            # new shards stay 64-bit, so no stored sum can make a read fail.
            check_totals(
                {"size": version.size, "record_count": version.record_count},
                ((shard.position, shard.record) for shard in new),
            )
            used = {shard.record.schema_digest for shard in new}
            store_schemas(session, {d: s for d, s in schemas.items() if d in used})
            if new:
                now = m.utcnow()
                session.execute(
                    insert(table_of(m.Shard)),
                    [_row(version.id, shard, now) for shard in new],
                )
                session.execute(
                    update(m.Version)
                    .where(m.Version.id == version.id)
                    .values(
                        shard_count=m.Version.shard_count + len(new),
                        record_count=m.Version.record_count
                        + sum(s.record.record_count for s in new),
                        size=m.Version.size + sum(s.record.size for s in new),
                    )
                    .execution_options(synchronize_session=False)
                )
                record_event(
                    session,
                    actor,
                    "version.shards_registered",
                    dataset=ref.dataset,
                    version=version.name,
                    registered=len(new),
                    unchanged=unchanged,
                )
            result = RegisterResult(
                registered=len(new),
                unchanged=unchanged,
                shard_count=version.shard_count + len(new),
            )
        if self._metrics is not None:  # counted once the transaction has committed
            self._metrics.shards_added(len(new), sum(s.record.size for s in new))
        self._db.analyzed("shards", len(new))
        return result


def _existing(
    session: Session, version_id: int, shards: Sequence[ValidShard]
) -> tuple[dict[tuple[str, int], Mapping[str, Any]], dict[str, int]]:
    """The stored shards a request could collide with, and each requested split's count.

    Only the index range each split of the request spans is read (a version registered in
    batches of 10,000 does not re-read its earlier batches: registering 100,000 shards stays
    linear), and one stored row per split gives that split's count.
    """
    ranges: dict[str, tuple[int, int]] = {}
    for shard in shards:
        split, index = shard.key
        low, high = ranges.get(split, (index, index))
        ranges[split] = (min(low, index), max(high, index))
    existing: dict[tuple[str, int], Mapping[str, Any]] = {}
    counts: dict[str, int] = {}
    for split, (low, high) in ranges.items():
        in_split = (m.Shard.version_id == version_id, m.Shard.split == split)
        count = session.scalar(select(m.Shard.count).where(*in_split).limit(1))
        if count is None:
            continue  # nothing of this split is stored yet
        counts[split] = count
        rows = session.execute(
            select(*_EXISTING_COLUMNS).where(*in_split, m.Shard.index.between(low, high))
        )
        for row in rows:
            stored = row._asdict()  # keyed by column name
            existing[stored["split"], stored["index"]] = stored
    return existing, counts


def _plan(
    shards: Sequence[ValidShard],
    existing: Mapping[tuple[str, int], Mapping[str, Any]],
    stored_counts: Mapping[str, int],
) -> tuple[list[ValidShard], int]:
    """Split the request into new shards and unchanged ones; refuse conflicts."""
    split_counts = dict(stored_counts)
    seen: dict[tuple[str, int], ValidShard] = {}
    new: list[ValidShard] = []
    unchanged = 0
    for shard in shards:
        record = shard.record
        expected = split_counts.setdefault(record.split, record.count)
        if record.count != expected:
            raise InvalidShard(
                f"shard {shard.position}: split {record.split!r} has count {expected}, "
                f"but this shard says {record.count}",
                shard=shard.position,
            )
        stored = existing.get(shard.key)
        if stored is not None:
            if not record.same_content(stored):
                raise _conflict(shard, "is already registered with other content or URI")
            unchanged += 1
            continue
        earlier = seen.get(shard.key)
        if earlier is not None:
            if not record.same_content(earlier.record):
                raise _conflict(
                    shard, f"appears twice with different content (also shard {earlier.position})"
                )
            unchanged += 1
            continue
        seen[shard.key] = shard
        new.append(shard)
    return new, unchanged


def _conflict(shard: ValidShard, why: str) -> ShardConflict:
    return ShardConflict(
        f"shard {shard.position} ({shard.record.name}) {why}", shard=shard.position
    )


def _row(version_id: int, shard: ValidShard, now: Any) -> dict[str, Any]:
    """The shard's table row: one column per record field, plus the version and the time."""
    return {**shard.record.to_json(), "version_id": version_id, "registered_at": now}

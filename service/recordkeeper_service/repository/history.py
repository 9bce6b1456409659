"""A dataset's history and the versions made from a version or a source.

``log`` lists a dataset's published versions like ``git log``: each with its parents and
producer commit (from :mod:`.provenance`) and what changed against its base parent, or else the
previous version, computed by :mod:`.diff` (cached for published versions).  ``children`` and
``from_source`` read the ``version_parents``/``version_sources`` indexes.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from recordkeeper.core import diff as core_diff
from recordkeeper.core.naming import validate_dataset_name
from recordkeeper.core.provenance import empty_provenance, source_query
from recordkeeper.core.refs import parse_reference
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import iso_timestamp
from recordkeeper_service.repository.common import PUBLISHED_STATES, dataset_row
from recordkeeper_service.repository.diff import DiffRepository
from recordkeeper_service.repository.provenance import (
    children_of,
    load_provenances,
    versions_from_source,
)
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.repository.versions import VersionRepository

__all__ = ["ProvenanceRepository"]


def _renamed_splits(session: Session, names: list[str]) -> dict[str, dict[str, str]]:
    """``{version: {old split: new split}}`` of the derived versions among ``names``, from
    their ``version.committed`` events (the last one of each; one statement)."""
    if not names:
        return {}
    rows = session.execute(
        select(m.AuditEvent.version, m.AuditEvent.detail)
        .where(m.AuditEvent.action == "version.committed", m.AuditEvent.version.in_(names))
        .order_by(m.AuditEvent.id)
    )
    out: dict[str, dict[str, str]] = {}
    for version, detail in rows:
        renamed = ((detail or {}).get("derived") or {}).get("renamed_splits")
        if version is not None and isinstance(renamed, dict):
            out[version] = {str(old): str(new) for old, new in renamed.items()}
    return out


def _change(diff: core_diff.VersionDiff[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "shards_added": 0,
        "shards_removed": 0,
        "shards_changed": 0,
        "records_added": 0,
        "records_removed": 0,
    }
    for change in diff.shards:
        if change.change == "added" and change.new is not None:
            out["shards_added"] += 1
            out["records_added"] += change.new.record_count
        elif change.change == "removed" and change.old is not None:
            out["shards_removed"] += 1
            out["records_removed"] += change.old.record_count
        elif change.old is not None and change.new is not None:
            out["shards_changed"] += 1
            out["records_added"] += change.new.record_count
            out["records_removed"] += change.old.record_count
    return out


class ProvenanceRepository:
    """Reads across versions' provenance: a dataset's log, children, versions from a source."""

    def __init__(self, db: Database, versions: VersionRepository, diffs: DiffRepository) -> None:
        self._db = db
        self._versions = versions
        self._diffs = diffs

    def log(self, dataset: str, *, limit: int, offset: int) -> dict[str, Any]:
        """Published versions of ``dataset``, newest first, each with its parents, producer
        commit and what changed against its base parent (or the previous version)."""
        validate_dataset_name(dataset)
        with self._db.transaction(write=False) as session:
            ds = dataset_row(session, dataset)
            where = (m.Version.dataset_id == ds.id, m.Version.state.in_(PUBLISHED_STATES))
            total = session.scalar(select(func.count(m.Version.id)).where(*where)) or 0
            rows = list(
                session.execute(
                    select(
                        m.Version.id,
                        m.Version.name,
                        m.Version.number,
                        m.Version.date,
                        m.Version.desc,
                        m.Version.state,
                        m.Version.committed_at,
                        m.Version.created_by,
                        m.Version.record_count,
                        m.Version.shard_count,
                    )
                    .where(*where)
                    .order_by(m.Version.number.desc())
                    .limit(limit)
                    .offset(offset)
                )
            )
            provenances = load_provenances(session, (r.id for r in rows))
            renames = _renamed_splits(session, [r.name for r in rows])
            # The version before each one (by number), for those without a base parent.
            previous: dict[int, str] = {}
            for row in rows:
                before = session.scalar(
                    select(m.Version.name)
                    .where(*where, m.Version.number < row.number)
                    .order_by(m.Version.number.desc())
                    .limit(1)
                )
                if before is not None:
                    previous[row.id] = before
        entries = []
        for row in rows:
            document = provenances.get(row.id) or empty_provenance()
            base = next((p["name"] for p in document["parents"] if p["role"] == "base"), None)
            compared_with = base or previous.get(row.id)
            change = None
            if compared_with is not None:  # from the derivation when derived (in proportion)
                change = _change(self._diffs.diff(compared_with, row.name))
                # a derivation's renames: the diff rule (shards matched by split and index)
                # counts a renamed split's shards as removed and added
                change["renamed_splits"] = renames.get(row.name, {}) if base else {}
            producer = document["producer"] or {}
            entries.append(
                {
                    "name": row.name,
                    "number": row.number,
                    "date": row.date.isoformat(),
                    "desc": row.desc,
                    "state": row.state,
                    "committed_at": iso_timestamp(row.committed_at),
                    "created_by": row.created_by,
                    "record_count": row.record_count,
                    "shard_count": row.shard_count,
                    "parents": document["parents"],
                    "commit": producer.get("commit"),
                    "dirty": producer.get("dirty"),
                    "compared_with": compared_with,
                    "change": change,
                }
            )
        return {
            "dataset": dataset,
            "data": entries,
            "count": int(total),
            "limit": limit,
            "offset": offset,
        }

    def children(self, ref_text: str) -> list[dict[str, Any]]:
        """The versions naming ``ref_text``'s version as a parent (index on parent_id)."""
        ref = parse_reference(ref_text)
        with self._db.transaction(write=False) as session:
            row = find_version(session, ref)
            found = children_of(session, row.id)
            return _derived(session, [(v, role, None) for v, role in found])

    def from_source(self, uri: str, *, limit: int) -> list[dict[str, Any]]:
        """The versions that recorded the source ``uri`` (index on uri), asked as
        :func:`~recordkeeper.core.provenance.source_query` makes it."""
        uri = source_query(uri)
        with self._db.transaction(write=False) as session:
            found = versions_from_source(session, uri, limit=limit)
            return _derived(session, [(v, None, digest) for v, digest in found])


def _derived(
    session: Session, found: list[tuple[int, str | None, str | None]]
) -> list[dict[str, Any]]:
    if not found:
        return []
    rows = {
        r.id: r
        for r in session.execute(
            select(m.Version.id, m.Version.name, m.Version.number, m.Version.state, m.Dataset.name)
            .join(m.Dataset, m.Dataset.id == m.Version.dataset_id)
            .where(m.Version.id.in_([v for v, _, _ in found]))
        )
    }
    out = []
    for version_id, role, digest in found:
        row = rows[version_id]
        out.append(
            {
                "name": row.name,
                "dataset": row[4],
                "number": row.number,
                "state": row.state,
                "role": role,
                "identity_digest": digest,
            }
        )
    return out

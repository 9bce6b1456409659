"""Provenance of versions: store it at stage (or while staged), read it with the version.

The rules of the document are :mod:`recordkeeper.core.provenance`; here the parents are
resolved to registered versions and checked (``parent_not_found``, ``provenance_cycle``,
``parent_not_committed``), and the document is written to ``version_provenance`` with its
parents and sources repeated as indexed rows (:mod:`recordkeeper_service.models.provenance`).

Everything here runs inside a transaction opened by the caller, so a refused provenance stores
nothing: not the staging it came with, not a half-replaced document.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, delete, func, select
from sqlalchemy.orm import Session

from recordkeeper.core import diff as core_diff
from recordkeeper.core.errors import (
    InvalidProvenance,
    InvalidReference,
    ParentNotCommitted,
    ParentNotFound,
    ProvenanceCycle,
    VersionNotFound,
)
from recordkeeper.core.naming import validate_dataset_name
from recordkeeper.core.provenance import empty_provenance, has_provenance, validate_provenance
from recordkeeper.core.refs import parse_reference
from recordkeeper_service import models as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import iso_timestamp
from recordkeeper_service.models import provenance as pm
from recordkeeper_service.repository.common import PUBLISHED_STATES, dataset_row
from recordkeeper_service.repository.resolve import find_version

if TYPE_CHECKING:
    from recordkeeper_service.repository.diff import DiffRepository
    from recordkeeper_service.repository.versions import VersionRepository

__all__ = [
    "ProvenanceRepository",
    "children_of",
    "load_provenances",
    "store_provenance",
    "versions_from_source",
]

#: Ancestors walked when looking for a cycle (far beyond any real chain of derived versions).
MAX_ANCESTRY = 10_000


def _ancestors(session: Session, start: int) -> set[int]:
    """Ids of ``start`` and every version it descends from (through ``version_parents``)."""
    seen = {start}
    frontier = [start]
    while frontier and len(seen) < MAX_ANCESTRY:
        rows = session.execute(
            select(pm.VersionParent.parent_id).where(pm.VersionParent.version_id.in_(frontier))
        ).scalars()
        frontier = [p for p in rows if p not in seen]
        seen.update(frontier)
    return seen


def _resolve_parents(
    session: Session, version: m.Version, parents: Iterable[Mapping[str, str]]
) -> list[tuple[m.Version, str, str]]:
    """``(row, role, dataset)`` of each parent, checked: it exists, it is not the version
    itself nor descends from it, and it is committed (or deprecated)."""
    out: list[tuple[m.Version, str, str]] = []
    seen: set[int] = set()
    for i, parent in enumerate(parents):
        text = parent["ref"]
        try:
            ref = parse_reference(text)
        except InvalidReference as exc:
            raise InvalidReference(f"parents[{i}].ref: {exc.detail}") from None
        try:
            row = find_version(session, ref)
        except VersionNotFound as exc:
            raise ParentNotFound(f"parents[{i}]: {exc.detail}", parent=text) from None
        if row.id == version.id or version.id in _ancestors(session, row.id):
            raise ProvenanceCycle(
                f"parents[{i}]: {text} is {version.name} itself or derived from it; a version "
                "cannot descend from itself",
                parent=text,
            )
        if row.state not in PUBLISHED_STATES:
            raise ParentNotCommitted(
                f"parents[{i}]: {row.name} is {row.state}; parents are committed versions",
                parent=text,
                state=row.state,
            )
        if row.id in seen:
            raise InvalidProvenance(f"parents[{i}]: {row.name} is named twice", parent=text)
        seen.add(row.id)
        out.append((row, parent["role"], ref.dataset))
    return out


def store_provenance(
    session: Session, version: m.Version, value: Any, *, actor: str
) -> dict[str, Any] | None:
    """Check ``value`` (a provenance document as sent) and store it as ``version``'s, replacing
    any it had; returns the stored document (None when ``value`` records nothing).

    ``version`` must be staged (the callers check it): committed provenance never changes.
    """
    document = validate_provenance(value)
    parents = _resolve_parents(session, version, document["parents"])
    session.execute(delete(pm.VersionParent).where(pm.VersionParent.version_id == version.id))
    session.execute(delete(pm.VersionSource).where(pm.VersionSource.version_id == version.id))
    session.execute(
        delete(pm.VersionProvenance).where(pm.VersionProvenance.version_id == version.id)
    )
    if not has_provenance(document):
        return None
    document["parents"] = [
        {"name": row.name, "dataset": dataset, "number": row.number, "role": role}
        for row, role, dataset in parents
    ]
    for position, (row, role, _) in enumerate(parents):
        session.add(
            pm.VersionParent(version_id=version.id, position=position, parent_id=row.id, role=role)
        )
    for position, source in enumerate(document["sources"]):
        identity = source["identity"]
        session.add(
            pm.VersionSource(
                version_id=version.id,
                position=position,
                uri=source["uri"],
                identity_digest=identity["digest"] if identity else None,
            )
        )
    producer = document["producer"] or {}
    session.add(
        pm.VersionProvenance(
            version_id=version.id,
            document=document,
            params_digest=document["params_digest"],
            producer_commit=producer.get("commit"),
            recorded_by=actor,
        )
    )
    session.flush()
    return document


def load_provenances(
    db: Session | Connection, version_ids: Iterable[int]
) -> dict[int, dict[str, Any]]:
    """The stored provenance documents of several versions, by id (one query)."""
    wanted = sorted(set(version_ids))
    if not wanted:
        return {}
    rows = db.execute(
        select(pm.VersionProvenance.version_id, pm.VersionProvenance.document).where(
            pm.VersionProvenance.version_id.in_(wanted)
        )
    )
    return {int(version_id): dict(document) for version_id, document in rows}


def children_of(session: Session, version_id: int) -> list[tuple[int, str]]:
    """``(child version id, role)`` of the versions that name ``version_id`` as a parent."""
    rows = session.execute(
        select(pm.VersionParent.version_id, pm.VersionParent.role)
        .where(pm.VersionParent.parent_id == version_id)
        .order_by(pm.VersionParent.version_id)
    )
    return [(int(v), str(r)) for v, r in rows]


def versions_from_source(session: Session, uri: str) -> list[tuple[int, str | None]]:
    """``(version id, identity digest)`` of the versions that recorded the source ``uri``."""
    rows = session.execute(
        select(pm.VersionSource.version_id, pm.VersionSource.identity_digest)
        .where(pm.VersionSource.uri == uri)
        .order_by(pm.VersionSource.version_id)
    )
    return [(int(v), d) for v, d in rows]


def _change(diff: core_diff.VersionDiff[Any]) -> dict[str, int]:
    out = {
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
            if compared_with is not None:
                old = self._versions.resolve(compared_with, shards=True)
                new = self._versions.resolve(row.name, shards=True)
                change = _change(self._diffs.compare(old, new))
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
        """The versions that recorded the source ``uri`` (index on uri)."""
        with self._db.transaction(write=False) as session:
            found = versions_from_source(session, uri)[:limit]
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

"""Provenance of versions: store it at stage (or while staged), read it with the version.

The rules of the document are :mod:`recordkeeper.core.provenance`; here the parents are
resolved to registered versions and checked (``parent_not_found``, ``provenance_cycle``,
``parent_not_committed``), and the document is written to ``version_provenance`` with its
parents and sources repeated as indexed rows (:mod:`recordkeeper_service.tables.provenance`).

Everything here runs inside a transaction opened by the caller, so a refused provenance stores
nothing: not the staging it came with, not a half-replaced document.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, delete, select
from sqlalchemy.orm import Session

from recordkeeper.core.errors import (
    InvalidProvenance,
    InvalidReference,
    ParentNotCommitted,
    ParentNotFound,
    ProvenanceCycle,
    VersionNotFound,
)
from recordkeeper.core.provenance import has_provenance, validate_provenance
from recordkeeper.core.refs import parse_reference
from recordkeeper_service import tables as m
from recordkeeper_service.repository.common import PUBLISHED_STATES
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.tables import provenance as pm

__all__ = [
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


def versions_from_source(session: Session, uri: str, *, limit: int) -> list[tuple[int, str | None]]:
    """``(version id, identity digest)`` of the first ``limit`` versions that recorded the
    source ``uri`` (oldest first; the limit is the query's, not a slice of every row)."""
    rows = session.execute(
        select(pm.VersionSource.version_id, pm.VersionSource.identity_digest)
        .where(pm.VersionSource.uri == uri)
        .order_by(pm.VersionSource.version_id)
        .limit(limit)
    )
    return [(int(v), d) for v, d in rows]

"""Aliases: movable names per dataset, with a history of every move.

``latest`` is implicit (the highest committed number) and cannot be set or deleted; it is listed
computed.
"""

from __future__ import annotations

import builtins

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from recordkeeper.core.errors import (
    AliasNotFound,
    InvalidAlias,
    InvalidReference,
    VersionDeprecated,
    VersionNotFound,
)
from recordkeeper.core.naming import validate_dataset_name
from recordkeeper.core.refs import LATEST, parse_reference, validate_alias_name
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import AliasMove, AliasRecord, Page
from recordkeeper_service.repository import convert
from recordkeeper_service.repository.common import dataset_row, record_event, state_error
from recordkeeper_service.repository.deletion import ensure_data_stored
from recordkeeper_service.repository.resolve import find_version

__all__ = ["AliasRepository"]


def _check_alias(alias: str) -> str:
    if alias == LATEST:
        raise InvalidAlias("'latest' is implicit (the highest committed version) and cannot be set")
    return validate_alias_name(alias)


class AliasRepository:
    """Alias operations; each public method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def set(self, dataset: str, alias: str, target: str, *, actor: str) -> AliasRecord:
        """Point ``alias`` at the committed version ``target`` (any reference form)."""
        validate_dataset_name(dataset)
        _check_alias(alias)
        ref = parse_reference(target)
        if ref.dataset != dataset:
            raise InvalidReference(
                f"alias {dataset}@{alias} can only point at a version of {dataset}, not {target!r}"
            )
        with self._db.transaction() as session:
            ds = dataset_row(session, dataset, for_update=True)
            # Locked: retention's claim releases a version under the same lock, so an alias
            # either comes first (and keeps it) or sees the release and is refused.
            version = find_version(session, ref, published_only=True, for_update=True)
            if version.state == "deprecated":  # it exists: a refusal, not "not found"
                raise VersionDeprecated(
                    f"{version.name} is deprecated; aliases can only be moved to committed "
                    "versions (choose another)",
                    state=version.state,
                    version=version.name,
                    reason=version.deprecated_reason,
                )
            if version.state != "committed":
                raise state_error(
                    VersionNotFound, version, "aliases can only be moved to committed versions"
                )
            ensure_data_stored(version)
            row = session.scalars(
                select(m.Alias).where(m.Alias.dataset_id == ds.id, m.Alias.name == alias)
            ).one_or_none()
            previous = None
            if row is None:
                row = m.Alias(dataset_id=ds.id, name=alias, version_id=version.id, updated_by=actor)
                session.add(row)
            elif row.version_id == version.id:
                return convert.alias_record(
                    dataset, alias, version.name, row.updated_at, row.updated_by
                )
            else:
                previous = row.version_id
                row.version_id = version.id
                row.updated_at = m.utcnow()
                row.updated_by = actor
            session.add(
                m.AliasHistory(
                    dataset_id=ds.id,
                    alias=alias,
                    from_version_id=previous,
                    to_version_id=version.id,
                    by=actor,
                )
            )
            from_name = (
                session.scalar(select(m.Version.name).where(m.Version.id == previous))
                if previous is not None
                else None
            )
            record_event(
                session,
                actor,
                "alias.set",
                dataset=dataset,
                version=version.name,
                alias=alias,
                from_version=from_name,
            )
            session.flush()
            return convert.alias_record(dataset, alias, version.name, row.updated_at, actor)

    def delete(self, dataset: str, alias: str, *, actor: str) -> None:
        """Remove ``alias``; :class:`AliasNotFound` if it does not exist."""
        validate_dataset_name(dataset)
        _check_alias(alias)
        with self._db.transaction() as session:
            ds = dataset_row(session, dataset, for_update=True)
            row = session.scalars(
                select(m.Alias).where(m.Alias.dataset_id == ds.id, m.Alias.name == alias)
            ).one_or_none()
            if row is None:
                raise AliasNotFound(f"{dataset} has no alias {alias!r}")
            from_name = session.scalar(select(m.Version.name).where(m.Version.id == row.version_id))
            session.add(
                m.AliasHistory(
                    dataset_id=ds.id,
                    alias=alias,
                    from_version_id=row.version_id,
                    to_version_id=None,
                    by=actor,
                )
            )
            session.delete(row)
            record_event(
                session,
                actor,
                "alias.deleted",
                dataset=dataset,
                alias=alias,
                from_version=from_name,
            )

    def list(self, dataset: str, *, limit: int, offset: int) -> Page[AliasRecord]:
        """The dataset's aliases by name, with the implicit ``latest`` first when it exists."""
        validate_dataset_name(dataset)
        with self._db.transaction(write=False) as session:
            ds = dataset_row(session, dataset)
            items = [*self._latest(session, ds), *self._stored(session, ds)]
            return Page(
                data=items[offset : offset + limit], count=len(items), limit=limit, offset=offset
            )

    @staticmethod
    def _latest(session: Session, ds: m.Dataset) -> builtins.list[AliasRecord]:
        row = session.execute(
            select(m.Version.name, m.Version.committed_at)
            .where(m.Version.dataset_id == ds.id, m.Version.state == "committed")
            .order_by(m.Version.number.desc())
            .limit(1)
        ).first()
        if row is None:
            return []
        return [convert.alias_record(ds.name, LATEST, row.name, row.committed_at, None)]

    @staticmethod
    def _stored(session: Session, ds: m.Dataset) -> builtins.list[AliasRecord]:
        rows = session.execute(
            select(m.Alias.name, m.Version.name, m.Alias.updated_at, m.Alias.updated_by)
            .join(m.Version, m.Version.id == m.Alias.version_id)
            .where(m.Alias.dataset_id == ds.id)
            .order_by(m.Alias.name)
        )
        return [convert.alias_record(ds.name, a, v, at, by) for a, v, at, by in rows]

    def history(self, dataset: str, alias: str, *, limit: int, offset: int) -> Page[AliasMove]:
        """Every move of ``alias``, newest first; :class:`AliasNotFound` if it never existed."""
        validate_dataset_name(dataset)
        _check_alias(alias)
        src, dst = aliased(m.Version), aliased(m.Version)
        with self._db.transaction(write=False) as session:
            ds = dataset_row(session, dataset)
            where = (m.AliasHistory.dataset_id == ds.id, m.AliasHistory.alias == alias)
            total = session.scalar(select(func.count(m.AliasHistory.id)).where(*where)) or 0
            if total == 0:
                raise AliasNotFound(f"{dataset} has no alias {alias!r} and never had one")
            rows = session.execute(
                select(src.name, dst.name, m.AliasHistory.at, m.AliasHistory.by)
                .select_from(m.AliasHistory)
                .outerjoin(src, src.id == m.AliasHistory.from_version_id)
                .outerjoin(dst, dst.id == m.AliasHistory.to_version_id)
                .where(*where)
                .order_by(m.AliasHistory.id.desc())
                .limit(limit)
                .offset(offset)
            )
            data = [AliasMove(from_version=f, to_version=t, at=at, by=by) for f, t, at, by in rows]
            return Page(data=data, count=total, limit=limit, offset=offset)

"""Reference resolution: every form of :func:`recordkeeper.refs.parse_reference` → a version row.

======================  ==========================================================
form                    finds
======================  ==========================================================
exact name              any state (staged and abandoned versions only this way)
``ds@vN`` / ``ds@N``    committed or deprecated version N
``ds@latest``           the committed version with the highest N (never deprecated)
``ds@<alias>``          the alias target (committed, or deprecated since it was set)
``ds@sha256:<prefix>``  committed versions whose content digest starts with the prefix;
                        several different digests → ambiguous; same digest → lowest N
======================  ==========================================================

The fast path is one query; when it finds nothing a second look explains why.
"""

from __future__ import annotations

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from recordkeeper.errors import InvalidReference, VersionNotFound
from recordkeeper.refs import LATEST, Reference, RefKind
from recordkeeper.service import models as m
from recordkeeper.service.repository.common import PUBLISHED_STATES

__all__ = ["find_version"]


def find_version(
    session: Session,
    ref: Reference,
    *,
    published_only: bool = False,
    for_update: bool = False,
) -> m.Version:
    """The version ``ref`` points at, or :class:`VersionNotFound` saying why not.

    ``published_only`` hides staged and abandoned versions even from exact names (used when the
    target must be committed: aliases, deprecation).  ``for_update`` locks the row.
    """
    if ref.kind is RefKind.NAME or ref.kind is RefKind.NUMBER:
        row = _by_number(session, ref, for_update)
    elif ref.kind is RefKind.ALIAS and ref.alias == LATEST:
        row = _latest(session, ref.dataset, for_update)
    elif ref.kind is RefKind.ALIAS:
        row = _by_alias(session, ref, for_update)
    else:
        row = _by_digest(session, ref, for_update)
    if row is None:
        raise _explain_missing(session, ref)
    _check_visible(row, ref, published_only)
    return row


def _base(dataset: str, for_update: bool) -> Select[tuple[m.Version]]:
    stmt = select(m.Version).join(m.Dataset, m.Version.dataset_id == m.Dataset.id)
    stmt = stmt.where(m.Dataset.name == dataset)
    return stmt.with_for_update(of=m.Version) if for_update else stmt


def _by_number(session: Session, ref: Reference, for_update: bool) -> m.Version | None:
    stmt = _base(ref.dataset, for_update).where(m.Version.number == ref.number)
    return session.scalars(stmt).one_or_none()


def _latest(session: Session, dataset: str, for_update: bool) -> m.Version | None:
    stmt = (
        _base(dataset, for_update)
        .where(m.Version.state == "committed")
        .order_by(m.Version.number.desc())
        .limit(1)
    )
    return session.scalars(stmt).first()


def _by_alias(session: Session, ref: Reference, for_update: bool) -> m.Version | None:
    stmt = (
        _base(ref.dataset, for_update)
        .join(m.Alias, m.Alias.version_id == m.Version.id)
        .where(m.Alias.name == ref.alias, m.Alias.dataset_id == m.Dataset.id)
    )
    return session.scalars(stmt).one_or_none()


def _by_digest(session: Session, ref: Reference, for_update: bool) -> m.Version | None:
    prefix = f"sha256:{ref.digest_prefix}"
    stmt = (
        _base(ref.dataset, for_update)
        .where(m.Version.state == "committed")
        .where(m.Version.content_digest.startswith(prefix, autoescape=True))
        .order_by(m.Version.number)
    )
    rows = list(session.scalars(stmt))
    digests = sorted({row.content_digest for row in rows if row.content_digest})
    if len(digests) > 1:
        shown = ", ".join(digests[:5])
        raise InvalidReference(
            f"{ref} is ambiguous: {len(digests)} different contents of {ref.dataset} start with "
            f"that prefix ({shown}); give more hex digits"
        )
    return rows[0] if rows else None


def _check_visible(row: m.Version, ref: Reference, published_only: bool) -> None:
    exact = ref.kind is RefKind.NAME
    if ref.name is not None and (
        row.date != ref.name.date or (ref.name.desc is not None and row.desc != ref.name.desc)
    ):
        raise VersionNotFound(
            f"there is no version {ref}: version {row.number} of {ref.dataset} is {row.name}"
        )
    if row.state in PUBLISHED_STATES:
        return
    if exact and not published_only:
        return
    hint = "" if exact else "; staged and abandoned versions are only found by their exact name"
    raise VersionNotFound(
        f"{ref} is {row.name}, which is {row.state}, not committed{hint}",
        state=row.state,
    )


def _explain_missing(session: Session, ref: Reference) -> VersionNotFound:
    dataset_id = session.scalar(select(m.Dataset.id).where(m.Dataset.name == ref.dataset))
    if dataset_id is None:
        return VersionNotFound(f"there is no dataset named {ref.dataset!r}")
    highest = session.scalar(
        select(func.max(m.Version.number)).where(
            m.Version.dataset_id == dataset_id, m.Version.state == "committed"
        )
    )
    have = f"highest committed is {highest}" if highest else "it has no committed version"
    if ref.kind in (RefKind.NAME, RefKind.NUMBER):
        return VersionNotFound(f"{ref.dataset} has no version {ref.number} ({have})")
    if ref.kind is RefKind.ALIAS and ref.alias == LATEST:
        return VersionNotFound(f"{ref.dataset} has no committed version yet")
    if ref.kind is RefKind.ALIAS:
        return VersionNotFound(f"{ref.dataset} has no alias {ref.alias!r}")
    return VersionNotFound(
        f"no committed version of {ref.dataset} has a content digest starting with "
        f"sha256:{ref.digest_prefix}"
    )

"""Reference resolution: every form of :func:`~recordkeeper.core.refs.parse_reference` → a
version row.

======================  ==========================================================
form                    finds
======================  ==========================================================
exact name              any state (staged and abandoned versions only this way)
staged name             the version staged under that name, in any state
``ds@vN`` / ``ds@N``    committed or deprecated version N
``ds@latest``           the committed version with the highest N (never deprecated)
``ds@<alias>``          the alias target (committed, or deprecated since it was set)
``ds@sha256:<prefix>``  committed versions whose content digest starts with the prefix;
                        several different digests → ambiguous; same digest → lowest N
``ds@records:sha256:``  the committed version with the highest N among those whose
``<prefix>``            registered records digest (any kind/width) starts with the prefix;
                        several different records digests → ambiguous
======================  ==========================================================

:func:`resolution_statement` builds the one query for a reference on top of any ``SELECT``
(ORM entities for updates, plain columns for the read path); :func:`pick` and
:func:`check_visible` interpret the rows the same way for both.  When nothing is found,
:func:`explain_missing` takes a second look to say why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Integer, Select, String, bindparam, exists, func, select
from sqlalchemy.orm import Session, aliased

from recordkeeper.core.digests import DIGEST_PREFIX
from recordkeeper.core.errors import InvalidReference, VersionNotFound
from recordkeeper.core.refs import LATEST, Reference, RefKind
from recordkeeper_service import tables as m
from recordkeeper_service.repository.common import PUBLISHED_STATES, missing_dataset
from recordkeeper_service.tables.record_sets import VersionRecordSet

__all__ = [
    "AnySelect",
    "check_visible",
    "explain_missing",
    "find_version",
    "pick",
    "reference_shape",
    "resolution_params",
    "resolution_statement",
]

#: A ``SELECT`` of any columns (SQLAlchemy 2.1 types ``Select`` by its column types).
AnySelect = Select[*tuple[Any, ...]]
S = TypeVar("S", bound=AnySelect)
R = TypeVar("R", bound="_VersionLike")


class _VersionLike(Protocol):
    """What resolution reads of a version: an ORM ``Version`` or a row of its columns."""

    @property
    def number(self) -> int | None: ...
    @property
    def name(self) -> str: ...
    @property
    def date(self) -> Any: ...
    @property
    def desc(self) -> str | None: ...
    @property
    def state(self) -> str: ...
    @property
    def content_digest(self) -> str | None: ...


#: Version numbers are stored as 32-bit integers; larger ones cannot exist.
MAX_VERSION_NUMBER = 2**31 - 1

_DATASET = bindparam("rk_dataset", type_=String)
_NUMBER = bindparam("rk_number", type_=Integer)
_ALIAS = bindparam("rk_alias", type_=String)
_DIGEST_LIKE = bindparam("rk_digest_like", type_=String)
_STAGED = bindparam("rk_staged", type_=String)
_RECORDS_LIKE = bindparam("rk_records_like", type_=String)


def reference_shape(ref: Reference) -> str:
    """The form of query ``ref`` needs: ``number``, ``staged``, ``latest``, ``alias`` or
    ``digest`` or ``records`` (statements are built and cached per shape)."""
    if ref.kind is RefKind.NAME or ref.kind is RefKind.NUMBER:
        return "number"
    if ref.kind is RefKind.STAGED:
        return "staged"
    if ref.kind is RefKind.ALIAS:
        return "latest" if ref.alias == LATEST else "alias"
    if ref.kind is RefKind.RECORDS:
        return "records"
    return "digest"


def resolution_params(ref: Reference) -> dict[str, Any]:
    """The bound values for :func:`resolution_statement`'s query of ``ref``."""
    params: dict[str, Any] = {"rk_dataset": ref.dataset}
    shape = reference_shape(ref)
    if shape == "number":
        if ref.number is not None and ref.number > MAX_VERSION_NUMBER:
            raise VersionNotFound(f"{ref.dataset} has no version {ref.number}")
        params["rk_number"] = ref.number
    elif shape == "staged":
        params["rk_staged"] = str(ref.staged)
    elif shape == "alias":
        params["rk_alias"] = ref.alias
    elif shape == "digest":
        # the prefix is validated lowercase hex, so it needs no LIKE escaping
        params["rk_digest_like"] = f"{DIGEST_PREFIX}{ref.digest_prefix}%"
    elif shape == "records":
        params["rk_records_like"] = f"{DIGEST_PREFIX}{ref.records_prefix}%"
    return params


def resolution_statement(base: S, ref: Reference) -> S:
    """``base`` (a ``SELECT`` over versions) narrowed to what ``ref`` designates.

    The statement depends only on the *shape* of the reference, with every value bound as a
    parameter (:func:`resolution_params`), so callers can build it once and reuse it.
    """
    stmt = base.join(m.Dataset, m.Version.dataset_id == m.Dataset.id).where(
        m.Dataset.name == _DATASET
    )
    shape = reference_shape(ref)
    if shape == "number":
        return stmt.where(m.Version.number == _NUMBER)
    if shape == "staged":
        return stmt.where(m.Version.staged_name == _STAGED)
    if shape == "latest":
        return stmt.where(m.Version.state == "committed").order_by(m.Version.number.desc()).limit(1)
    if shape == "alias":
        return stmt.join(m.Alias, m.Alias.version_id == m.Version.id).where(
            m.Alias.name == _ALIAS, m.Alias.dataset_id == m.Dataset.id
        )
    if shape == "records":
        return _records_statement(stmt)
    return (
        stmt.where(m.Version.state == "committed")
        .where(m.Version.content_digest.like(_DIGEST_LIKE))
        .order_by(m.Version.number)
    )


def _matching_records(dataset_id: Any) -> Any:
    """Record identity rows of committed versions of ``dataset_id`` whose records digest
    starts with the reference's prefix (a fresh alias of the tables each call)."""
    rs, v = aliased(VersionRecordSet), aliased(m.Version)
    match = (
        select(rs.records_digest)
        .join(v, v.id == rs.version_id)
        .where(v.dataset_id == dataset_id, v.state == "committed")
        .where(rs.records_digest.like(_RECORDS_LIKE))
    )
    return rs, match


def _records_statement(stmt: S) -> S:
    """The newest committed version with a records digest starting with the prefix, when
    the prefix names one records digest of the dataset (else nothing: :func:`explain_missing`
    says it is ambiguous)."""
    rs, match = _matching_records(m.Version.dataset_id)
    ambiguous = exists(match.where(rs.records_digest != VersionRecordSet.records_digest))
    return (
        stmt.join(VersionRecordSet, VersionRecordSet.version_id == m.Version.id)
        .where(m.Version.state == "committed")
        .where(VersionRecordSet.records_digest.like(_RECORDS_LIKE))
        .where(~ambiguous)
        .order_by(m.Version.number.desc())
        .limit(1)
    )


_ORM_STATEMENTS: dict[tuple[str, bool], Select[m.Version]] = {}


def _orm_statement(ref: Reference, for_update: bool) -> Select[m.Version]:
    key = (reference_shape(ref), for_update)
    stmt = _ORM_STATEMENTS.get(key)
    if stmt is None:
        stmt = resolution_statement(select(m.Version), ref)
        if for_update:
            stmt = stmt.with_for_update(of=m.Version)
        _ORM_STATEMENTS[key] = stmt
    return stmt


def pick(rows: Sequence[R], ref: Reference) -> R | None:
    """The row ``ref`` means among the statement's rows (refusing ambiguous digest prefixes)."""
    if ref.kind is RefKind.DIGEST:
        digests = sorted({row.content_digest for row in rows if row.content_digest})
        if len(digests) > 1:
            shown = ", ".join(digests[:5])
            raise InvalidReference(
                f"{ref} is ambiguous: {len(digests)} different contents of {ref.dataset} start "
                f"with that prefix ({shown}); give more hex digits"
            )
    return rows[0] if rows else None


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
    stmt = _orm_statement(ref, for_update)
    row = pick(list(session.scalars(stmt, resolution_params(ref))), ref)
    if row is None:
        raise explain_missing(session, ref)
    check_visible(row, ref, published_only)
    return row


def check_visible(row: _VersionLike, ref: Reference, published_only: bool) -> None:
    """Raise :class:`VersionNotFound` unless ``ref`` may see ``row``."""
    exact = ref.kind is RefKind.NAME or ref.kind is RefKind.STAGED
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


def explain_missing(db: Session | Connection, ref: Reference) -> VersionNotFound | InvalidReference:
    """The error for a reference that matched nothing, saying what does exist."""
    dataset_id = db.scalar(select(m.Dataset.id).where(m.Dataset.name == ref.dataset))
    if dataset_id is None:
        return missing_dataset(db, ref.dataset)
    highest = db.scalar(
        select(func.max(m.Version.number)).where(
            m.Version.dataset_id == dataset_id, m.Version.state == "committed"
        )
    )
    have = f"highest committed is {highest}" if highest else "it has no committed version"
    if ref.kind is RefKind.STAGED:
        return VersionNotFound(f"{ref.dataset} has no version staged as {ref.staged}")
    if ref.kind in (RefKind.NAME, RefKind.NUMBER):
        return VersionNotFound(f"{ref.dataset} has no version {ref.number} ({have})")
    if ref.kind is RefKind.ALIAS and ref.alias == LATEST:
        return VersionNotFound(f"{ref.dataset} has no committed version yet")
    if ref.kind is RefKind.ALIAS:
        return VersionNotFound(f"{ref.dataset} has no alias {ref.alias!r}")
    if ref.kind is RefKind.RECORDS:
        return _records_missing(db, ref, dataset_id)
    return VersionNotFound(
        f"no committed version of {ref.dataset} has a content digest starting with "
        f"{DIGEST_PREFIX}{ref.digest_prefix}"
    )


def _records_missing(
    db: Session | Connection, ref: Reference, dataset_id: int
) -> VersionNotFound | InvalidReference:
    """Why ``ds@records:sha256:<prefix>`` found nothing: several records digests start with
    the prefix (ambiguous), or no committed version has one that does."""
    _, match = _matching_records(dataset_id)
    params = {"rk_records_like": resolution_params(ref)["rk_records_like"]}
    digests = sorted(set(db.scalars(match.distinct().limit(6), params)))
    if len(digests) > 1:
        shown = ", ".join(digests[:5])
        return InvalidReference(
            f"{ref} is ambiguous: {len(digests)}{'+' if len(digests) > 5 else ''} different "
            f"records digests of {ref.dataset} start with that prefix ({shown}); give more hex "
            "digits"
        )
    wanted = f"{DIGEST_PREFIX}{ref.records_prefix}"
    rs, v = aliased(VersionRecordSet), aliased(m.Version)
    others = db.execute(
        select(v.name, v.state)
        .join(rs, rs.version_id == v.id)
        .where(v.dataset_id == dataset_id, rs.records_digest.like(_RECORDS_LIKE))
        .distinct()
        .order_by(v.name)
        .limit(3),
        params,
    ).all()
    if others:  # the records exist, in versions a records reference never picks
        named = ", ".join(f"{name} ({state})" for name, state in others)
        return VersionNotFound(
            f"no committed version of {ref.dataset} has a records digest starting with "
            f"{wanted}: {named} has it, and a records reference picks committed versions only "
            "(name that version, or its number, instead)"
        )
    return VersionNotFound(
        f"no committed version of {ref.dataset} has a records digest starting with "
        f"{wanted} (run `recordkeeper index` on a version to give it one; "
        "GET /record-sets/{digest} finds the versions of any dataset with a digest)"
    )

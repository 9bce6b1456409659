"""Versions: stage, resolve, list, abandon, deprecate.

Registering shards lives in :mod:`.shards` and committing in :mod:`.commit`.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection
from dataclasses import replace
from functools import partial
from typing import Any

import anyio.to_thread
from sqlalchemy import Connection, bindparam, func, select, update
from sqlalchemy.orm import Session

from recordkeeper.core.digests import parse_digest
from recordkeeper.core.errors import (
    DigestMismatch,
    DuplicateContent,
    InvalidRequest,
    InvalidVersionName,
    ParentNotCommitted,
    ParentNotFound,
    ProvenanceImmutable,
    VersionNotFound,
    VersionNotStaged,
)
from recordkeeper.core.lifecycle import ON_DUPLICATE
from recordkeeper.core.limits import MAX_REASON_LENGTH
from recordkeeper.core.naming import (
    CONVENTION,
    format_staged_name,
    format_version_name,
    is_staged_name,
    parse_date,
    parse_staged_name,
    parse_version_name,
    validate_dataset_name,
    validate_desc,
)
from recordkeeper.core.provenance import validate_provenance
from recordkeeper.core.refs import Reference, RefKind, parse_reference
from recordkeeper.core.roots import AllowedRoots, UriError
from recordkeeper.core.splits import is_split_name
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import Page, ShardPage, VersionRecord
from recordkeeper_service.repository import convert
from recordkeeper_service.repository.cache import DEFAULT_PAGES_BYTES, RenderedPages, VersionCache
from recordkeeper_service.repository.common import (
    PUBLISHED_STATES,
    dataset_row,
    ensure_unpublished,
    load_provenance,
    load_shards,
    record_event,
    shard_page_statements,
    state_error,
    version_names,
    version_view,
)
from recordkeeper_service.repository.compact_pages import compact_page
from recordkeeper_service.repository.datasets import ensure_dataset
from recordkeeper_service.repository.deletion import ensure_data_stored
from recordkeeper_service.repository.fastpath import AsyncPostgresReader, hot_statement
from recordkeeper_service.repository.lineage.epoch import bump_epoch
from recordkeeper_service.repository.lineage.guard import ensure_not_in_use
from recordkeeper_service.repository.provenance import load_provenances, store_provenance
from recordkeeper_service.repository.resolve import (
    check_visible,
    find_version,
    pick,
    resolution_params,
)
from recordkeeper_service.repository.sqlite_hot import SqliteHotReader
from recordkeeper_service.tables.version_splits import VersionSplit

__all__ = [
    "MAX_REASON_LENGTH",
    "VersionRepository",
    "allocate",
    "format_cursor",
    "parse_cursor",
    "parse_version_ref",
    "today_utc",
]


def _expected_digest(value: str | None) -> str | None:
    return parse_digest(value, "expect_digest") if value is not None else None


def today_utc() -> datetime.date:
    return datetime.datetime.now(datetime.UTC).date()


def parse_version_ref(text: str) -> Reference:
    """Parse a path ``{version_name}``: a version name or a staged name, not another ref form."""
    if "@" not in text and is_staged_name(text.strip()):
        staged = parse_staged_name(text.strip())
        return Reference(dataset=staged.dataset, kind=RefKind.STAGED, staged=staged)
    if "@" not in text:
        name = parse_version_name(text.strip())  # InvalidVersionName with the precise reason
        return Reference(dataset=name.dataset, kind=RefKind.NAME, number=name.number, name=name)
    ref = parse_reference(text)
    if ref.kind is not RefKind.NAME:
        raise InvalidVersionName(
            f"{text!r} is a reference, but this operation needs the version's name "
            "(dataset_YYYYMMDD_vN[_desc] or dataset_YYYYMMDD_stagedK[_desc])"
        )
    return ref


def _committed_with(session: Session, dataset_id: int, digest: str) -> m.Version | None:
    """The first committed version of the dataset with content ``digest`` (what commit's
    duplicate check finds)."""
    return session.scalars(
        select(m.Version)
        .where(
            m.Version.dataset_id == dataset_id,
            m.Version.state == "committed",
            m.Version.content_digest == digest,
        )
        .order_by(m.Version.number)
        .limit(1)
    ).first()


def _with_base(provenance: Any, base: str) -> Any:
    """``provenance`` with ``base`` as its parent of role ``base`` (first); a document that is
    not an object is left for :func:`validate_provenance` to refuse."""
    if provenance is None:
        provenance = {}
    if not isinstance(provenance, dict):
        return provenance
    parents = provenance.get("parents") or []
    if not isinstance(parents, list):
        return provenance
    others = [
        p
        for p in parents
        if not (isinstance(p, dict) and p.get("ref") == base and p.get("role") == "base")
    ]
    return {**provenance, "parents": [{"ref": base, "role": "base"}, *others]}


def _base_id(session: Session, base: str, dataset_id: int) -> int:
    """The id of the committed version ``base`` of the dataset, checked (``parent_not_found``,
    ``parent_not_committed``, ``version_data_deleted``, another dataset: ``invalid_request``)."""
    try:
        row = find_version(session, parse_reference(base))
    except VersionNotFound as exc:
        raise ParentNotFound(f"base: {exc.detail}", parent=base) from None
    if row.state not in PUBLISHED_STATES:
        raise ParentNotCommitted(
            f"base: {row.name} is {row.state}; a version derives from a committed version",
            parent=base,
            state=row.state,
        )
    if row.dataset_id != dataset_id:
        raise InvalidRequest(
            f"base: {row.name} is a version of another dataset; a derived version is a "
            "version of its base's dataset (record other datasets as parents instead)"
        )
    ensure_data_stored(row)
    return row.id


def allocate(session: Session, dataset_id: int, counter: Any) -> int:
    """Atomically take the dataset's next value of ``counter`` (``m.Dataset.next_number`` or
    ``m.Dataset.next_stage``); the row lock serialises concurrent takers."""
    stmt = (
        update(m.Dataset)
        .where(m.Dataset.id == dataset_id)
        .values({counter: counter + 1})
        .returning(counter)
        .execution_options(synchronize_session=False)
    )
    return int(session.execute(stmt).scalar_one()) - 1


_BY_ID = select(*convert.VERSION_COLUMNS).where(m.Version.id == bindparam("rk_id"))

_FIRST_PAGE, _NEXT_PAGE = shard_page_statements(*convert.SHARD_COLUMNS)


def format_cursor(split: str, index: int) -> str:
    """The ``next`` cursor after the shard ``split``/``index``: ``"train:41"``."""
    return f"{split}:{index}"


def parse_cursor(cursor: str) -> tuple[str, int]:
    """``(split, index)`` of an ``after`` cursor, or :class:`InvalidRequest`."""
    split, sep, index = cursor.partition(":")
    if not sep or not is_split_name(split) or not index.isascii() or not index.isdigit():
        raise InvalidRequest(
            f"after: {cursor[:100]!r} is not a shard cursor (SPLIT:INDEX, as answered in 'next')"
        )
    if len(index) > 10 or int(index) > 2**31 - 1:
        raise InvalidRequest(f"after: shard index {index[:20]} is out of range")
    return split, int(index)


#: What can change about a committed version (its state, deprecation, data state): the
#: record's field each hot row's column sets.
_LIVE_FIELDS = {
    "state": "state",
    "deprecated_at": "deprecated_at",
    "deprecated_reason": "deprecated_reason",
    "released_at": "gc_claimed_at",
    "collected_at": "collected_at",
    "collected_reason": "collected_reason",
}


def _live(row: Any) -> dict[str, Any]:
    """The live values of a hot row, by record field (:data:`_LIVE_FIELDS`)."""
    return {field: getattr(row, column) for field, column in _LIVE_FIELDS.items()}


def _overlay(record: VersionRecord, row: Any, with_shards: bool) -> VersionRecord:
    """The cached immutable ``record`` with the live state, deprecation and data state of
    ``row``."""
    return replace(record, **_live(row), shards=record.shards if with_shards else None)


#: How many answers without shards :meth:`VersionRepository._from_cache` keeps.
_WITHOUT_SHARDS_KEPT = 1024


def _checked(record: VersionRecord, expected: str | None, ref_text: str) -> VersionRecord:
    """``record``, or :class:`DigestMismatch` if its content is not the ``expected`` one."""
    if expected is not None and record.content_digest != expected:
        raise DigestMismatch(
            f"{ref_text} resolved to {record.name} whose content digest is "
            f"{record.content_digest or 'not computed (staged)'}, not {expected}",
            expected=expected,
            actual=record.content_digest,
            version=record.name,
        )
    return record


class VersionRepository:
    """Version lifecycle and reads; each public method is one transaction."""

    def __init__(
        self,
        db: Database,
        roots: AllowedRoots,
        storage_root: str,
        cache: VersionCache | None = None,
        fast_reader: AsyncPostgresReader | None = None,
        pages_bytes: int = DEFAULT_PAGES_BYTES,
        sqlite_reader: SqliteHotReader | None = None,
    ) -> None:
        self._db = db
        self._roots = roots
        self._storage_root = storage_root
        self._cache = cache if cache is not None else VersionCache()
        self._fast = fast_reader
        self._sqlite_fast = sqlite_reader
        #: answers without shards lately given, by version id, with the live values they show
        #: (:meth:`_from_cache`); small (no shards, no rendered splits), at most
        #: :data:`_WITHOUT_SHARDS_KEPT`
        self._without_shards: dict[int, tuple[dict[str, Any], VersionRecord]] = {}
        #: Rendered shard pages of published versions, for the routes that answer them.
        self.rendered_pages = RenderedPages(pages_bytes)

    @property
    def cache(self) -> VersionCache:
        """The committed versions this process keeps (its metrics watch its look-ups)."""
        return self._cache

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
        reserve: bool = False,
        content_digest: str | None = None,
        on_duplicate: str = "error",
        provenance: Any = None,
        base: str | None = None,
    ) -> VersionRecord:
        """Stage a version of ``dataset`` (creating it if needed).

        ``base`` (a reference to a committed version of ``dataset``) stages a *derived*
        version: it holds the shards it adds, and its commit (with the change set, see
        :mod:`recordkeeper.core.derive`) references the base's kept shards; the base is
        recorded as its provenance parent with role ``base``.

        By default the version has a staged name and no number: the number is given at commit
        (:mod:`.commit`), so a staging that is abandoned, or turns out to duplicate a committed
        version, consumes none.

        ``reserve`` takes the number now, so the storage prefix carries the committed name
        (``{root}/{dataset}/coco_20231015_v3/``) and the version is named by it from the
        start (the staged name keeps answering).  A reserved number is never given back: a
        reserved staging that is abandoned, or turns out to be a duplicate, leaves a gap.
        ``content_digest`` (implies ``reserve``) is the content the caller is about to store,
        known before any byte is written (``publish --copy`` hashes first): a committed version
        with that digest is checked for first, under the dataset lock, as commit checks it —
        ``on_duplicate="error"`` raises ``duplicate_content``, ``"use_existing"`` answers that
        version (with ``duplicate_of``) and stages nothing, ``"commit"`` stages anyway.  So a
        duplicate known before staging consumes no number.  ``provenance`` (see
        :mod:`recordkeeper.core.provenance`) is checked first: refused, nothing is staged.
        """
        if base is not None:
            provenance = _with_base(provenance, base)
        validate_provenance(provenance)  # the rules without the database, before any write
        validate_dataset_name(dataset)
        validate_desc(desc)
        if on_duplicate not in ON_DUPLICATE:
            raise InvalidRequest(
                f"on_duplicate must be one of {', '.join(ON_DUPLICATE)}, got {on_duplicate!r}"
            )
        digest = None
        if content_digest is not None:
            digest = parse_digest(content_digest, "content_digest")  # invalid_hash if not one
            reserve = True
        day = parse_date(date) if date is not None else today_utc()
        try:
            normalized_root = self._roots.check(root or self._storage_root, "storage root")
        except UriError as exc:
            raise InvalidRequest(f"root: {exc}") from None
        root_path = normalized_root.rstrip("/")
        with self._db.transaction() as session:
            dataset_id = ensure_dataset(session, dataset, actor)
            base_id = _base_id(session, base, dataset_id) if base is not None else None
            if digest is not None:
                # Lock order everywhere: the dataset row first (commit checks duplicates and
                # takes numbers under the same lock).
                session.execute(
                    select(m.Dataset.id).where(m.Dataset.id == dataset_id).with_for_update()
                )
                existing = _committed_with(session, dataset_id, digest)
                if existing is not None and on_duplicate == "error":
                    raise DuplicateContent(
                        f"{dataset} already has a committed version with the content "
                        f"{digest}: {existing.name}; stage with on_duplicate=use_existing to "
                        "use it, or on_duplicate=commit to stage a new version anyway",
                        duplicate_of=existing.name,
                        content_digest=digest,
                    )
                if existing is not None and on_duplicate == "use_existing":
                    record = version_view(session, existing, dataset)
                    return replace(record, duplicate_of=existing.name)
            stage = allocate(session, dataset_id, m.Dataset.next_stage)
            staged_name = format_staged_name(dataset, day, stage, desc)
            number = None
            name = staged_name
            if reserve:
                number = allocate(session, dataset_id, m.Dataset.next_number)
                name = format_version_name(dataset, day, number, desc)
            row = m.Version(
                dataset_id=dataset_id,
                number=number,
                name=name,
                staged_name=staged_name,
                date=day,
                desc=desc,
                convention=CONVENTION,
                state="staged",
                storage_prefix=f"{root_path}/{dataset}/{name}/",
                record_count=0,
                shard_count=0,
                size=0,
                extra_metadata=metadata or {},
                created_by=actor,
                base_version_id=base_id,
            )
            session.add(row)
            session.flush()
            stored = store_provenance(session, row, provenance, actor=actor)
            detail: dict[str, Any] = {"stage": stage}
            if base_id is not None:
                detail["base"] = base
            if number is not None:
                detail["staged_as"] = staged_name
                detail["reserved_number"] = number
            record_event(session, actor, "version.staged", dataset=dataset, version=name, **detail)
            return convert.version_record(row, dataset=dataset, provenance=stored)

    def set_provenance(self, version_name: str, provenance: Any, *, actor: str) -> VersionRecord:
        """Replace the provenance of a staged version; a committed (or deprecated) version's
        is immutable (``409 provenance_immutable``), an abandoned one's is refused too.

        A version staged as a change of a base keeps that base as its ``base`` parent: it is
        merged into the new document as at stage (another ``base`` is two bases: refused)."""
        ref = parse_version_ref(version_name)
        validate_provenance(provenance)
        with self._db.transaction() as session:
            row = find_version(session, ref, for_update=True)
            if row.state in PUBLISHED_STATES:
                raise state_error(
                    ProvenanceImmutable, row, "the provenance of a committed version never changes"
                )
            if row.state != "staged":
                raise state_error(
                    VersionNotStaged, row, "only a staged version's provenance can be set"
                )
            if row.base_version_id is not None:
                base = session.get(m.Version, row.base_version_id)
                if base is not None:  # always (a foreign key), but never a 500
                    provenance = _with_base(provenance, base.name)
                    validate_provenance(provenance)
            store_provenance(session, row, provenance, actor=actor)
            record_event(
                session, actor, "version.provenance_set", dataset=ref.dataset, version=row.name
            )
            return version_view(session, row, ref.dataset)

    # ---------------------------------------------------------------- read

    def resolve(
        self, ref_text: str, *, shards: bool = True, expect_digest: str | None = None
    ) -> VersionRecord:
        """The version any reference form points at (see :mod:`.resolve`)."""
        ref = parse_reference(ref_text)
        expected = _expected_digest(expect_digest)
        record = self._db.read(lambda conn: self._read_published(conn, ref, shards))
        if record is None:
            with self._db.transaction(write=False) as session:
                row = find_version(session, ref)
                record = version_view(session, row, ref.dataset, with_shards=shards)
        return _checked(record, expected, ref_text)

    async def resolve_async(
        self, ref_text: str, *, shards: bool = True, expect_digest: str | None = None
    ) -> VersionRecord:
        """:meth:`resolve` for the event loop.

        A committed version already in the cache is answered after one query run without a
        worker thread: on PostgreSQL through asyncio psycopg (:mod:`.fastpath`), on SQLite
        directly (an in-process read of a WAL database, which does not wait for writers) on a
        plain ``sqlite3`` connection (:mod:`.sqlite_hot`; SQLAlchemy's connection for an
        in-memory database).
        Anything else — a cache miss, a staged version, an error to explain — runs
        :meth:`resolve` in the thread pool.
        """
        ref = parse_reference(ref_text)
        if self._fast is not None:
            row = pick(await self._fast.fetch_versions(ref), ref)
        elif self._sqlite_fast is not None:
            rows = self._sqlite_fast.fetch_versions(ref)
            row = pick(rows, ref) if rows is not None else None
        elif self._db.is_sqlite:
            row = self._db.read(
                lambda conn: pick(
                    conn.execute(hot_statement(ref), resolution_params(ref)).all(), ref
                )
            )
        else:  # pragma: no cover - every supported database has a fast path
            row = None
        record = self._from_cache(row, ref, shards)
        if record is not None:
            expected = _expected_digest(expect_digest)
            return _checked(record, expected, ref_text)
        return await anyio.to_thread.run_sync(
            partial(self.resolve, ref_text, shards=shards, expect_digest=expect_digest)
        )

    async def aclose(self) -> None:
        """Release the event-loop resources (the PostgreSQL fast path's connections)."""
        if self._fast is not None:
            await self._fast.aclose()
        if self._sqlite_fast is not None:
            self._sqlite_fast.close()

    def _from_cache(self, row: Any, ref: Reference, with_shards: bool) -> VersionRecord | None:
        """The answer for a hot-query row if the cache holds what is needed, else None."""
        if row is None or row.state not in PUBLISHED_STATES or row.duplicate_of_id:
            return None
        check_visible(row, ref, published_only=False)
        record = self._cache.get(row.id)
        if record is None or (with_shards and record.shards is None):
            return None
        if with_shards:
            return _overlay(record, row, with_shards)
        # Without shards (how the client resolves): the answer for these live values was
        # most likely built for the request before; the immutable rest never changes.
        live = _live(row)
        held = self._without_shards.get(row.id)
        if held is not None and held[0] == live:
            return held[1]
        answer = replace(record, **live, shards=None, rendered_splits=None)
        if len(self._without_shards) >= _WITHOUT_SHARDS_KEPT:
            self._without_shards.clear()
        self._without_shards[row.id] = (live, answer)
        return answer

    def _read_published(
        self, conn: Connection, ref: Reference, with_shards: bool
    ) -> VersionRecord | None:
        """One query for a committed version, the rest from (or into) the cache.

        Returns None when the transactional path must answer (nothing found, a staged or
        abandoned version), which also produces the precise error.
        """
        rows = conn.execute(hot_statement(ref), resolution_params(ref)).all()
        row = pick(rows, ref)
        record = self._from_cache(row, ref, with_shards)
        if record is not None or row is None or row.state not in PUBLISHED_STATES:
            return record
        if row.duplicate_of_id:
            return None
        full = conn.execute(_BY_ID, {"rk_id": row.id}).one()
        shards = load_shards(conn, row.id) if with_shards else None
        cached = convert.version_record(
            full, dataset=ref.dataset, shards=shards, provenance=load_provenance(conn, row.id)
        )
        cached = cached.with_rendered_splits()
        self._cache.put(cached)
        return _overlay(cached, row, with_shards)

    def shard_page(self, version: VersionRecord, *, after: str | None, limit: int) -> ShardPage:
        """Up to ``limit`` shards of ``version`` (as resolved) after the cursor ``after``."""
        params: dict[str, Any] = {"rk_version": version.id, "rk_limit": limit + 1}
        stmt = _FIRST_PAGE
        if after is not None:
            params["rk_split"], params["rk_index"] = parse_cursor(after)
            stmt = _NEXT_PAGE
        rows = self._db.read(lambda conn: convert.shard_records(conn.execute(stmt, params)))
        more = len(rows) > limit
        rows = rows[:limit]
        return ShardPage(
            version=version.name,
            content_digest=version.content_digest,
            shard_count=version.shard_count,
            limit=limit,
            next=format_cursor(rows[-1].split, rows[-1].index) if more else None,
            shards=rows,
        )

    def compact_page(
        self, version: VersionRecord, *, after: str | None, limit: int, packed: bool = False
    ) -> bytes:
        """:meth:`shard_page` in the compact (or ``packed``) form, as rendered JSON
        (:func:`.compact_pages.compact_page`)."""
        cursor = parse_cursor(after) if after is not None else None
        return compact_page(
            self._db,
            version,
            after=cursor,
            limit=limit,
            format_cursor=format_cursor,
            packed=packed,
        )

    def list(
        self,
        dataset: str,
        *,
        state: Collection[str] | None,
        since: str | None,
        until: str | None,
        limit: int,
        offset: int,
    ) -> Page[VersionRecord]:
        """Versions of ``dataset`` (in one of the states ``state``, if given), newest (highest
        number) first."""
        validate_dataset_name(dataset)
        since_day = parse_date(since) if since else None
        until_day = parse_date(until) if until else None
        with self._db.transaction(write=False) as session:
            ds = dataset_row(session, dataset)
            where = [m.Version.dataset_id == ds.id]
            if state:
                where.append(m.Version.state.in_(sorted(set(state))))
            if since_day:
                where.append(m.Version.date >= since_day)
            if until_day:
                where.append(m.Version.date <= until_day)
            total = session.scalar(select(func.count(m.Version.id)).where(*where)) or 0
            rows = list(
                session.scalars(
                    select(m.Version)
                    .where(*where)
                    # staged versions (no number yet) first, then by number, newest first
                    .order_by(m.Version.number.desc().nulls_first(), m.Version.id.desc())
                    .limit(limit)
                    .offset(offset)
                )
            )
            names = version_names(session, (r.duplicate_of_id for r in rows))
            provenances = load_provenances(session, (r.id for r in rows))
            data = [
                convert.version_record(
                    r,
                    dataset=dataset,
                    duplicate_of=names.get(r.duplicate_of_id or -1),
                    provenance=provenances.get(r.id),
                )
                for r in rows
            ]
            return Page(data=data, count=total, limit=limit, offset=offset)

    def split_counts(self, ref_text: str) -> dict[str, Any]:
        """``{"name", "splits": {split: {shard_count, record_count, size}}}`` of a version,
        without its shards (what a list of versions shows per row): a committed version's
        stored totals, a staged one's from one grouped query over its rows."""
        ref = parse_reference(ref_text)
        with self._db.transaction(write=False) as session:
            row = find_version(session, ref)
            # a committed version's totals were stored at its commit (version_splits)
            stored = session.execute(
                select(
                    VersionSplit.split,
                    VersionSplit.shard_count,
                    VersionSplit.record_count,
                    VersionSplit.size,
                )
                .where(VersionSplit.version_id == row.id)
                .order_by(VersionSplit.split)
            ).all()
            totals = stored or session.execute(
                select(
                    m.Shard.split,
                    func.count(m.Shard.id),
                    func.coalesce(func.sum(m.Shard.record_count), 0),
                    func.coalesce(func.sum(m.Shard.size), 0),
                )
                .where(m.Shard.version_id == row.id)
                .group_by(m.Shard.split)
                .order_by(m.Shard.split)
            )
            splits = {
                split: {"shard_count": int(shards), "record_count": int(records), "size": int(size)}
                for split, shards, records, size in totals
            }
            return {"name": row.name, "splits": splits}

    # ---------------------------------------------------------------- state changes

    def abandon(self, version_name: str, *, actor: str) -> VersionRecord:
        """Abandon a staged version (idempotent); committed versions are immutable."""
        ref = parse_version_ref(version_name)
        with self._db.transaction() as session:
            row = find_version(session, ref, for_update=True)
            ensure_unpublished(row, "only staged versions can be abandoned")
            if row.state == "staged":
                row.state = "abandoned"
                row.abandoned_at = m.utcnow()
                record_event(
                    session, actor, "version.abandoned", dataset=ref.dataset, version=row.name
                )
                session.flush()
            return version_view(session, row, ref.dataset)

    def deprecations(self, names: Collection[str]) -> dict[str, str | None]:
        """The deprecated versions among ``names`` → their deprecation reason (None when none
        was given); one query, for answers that list the data checkpoints trained on."""
        wanted = sorted(set(names))
        if not wanted:
            return {}
        with self._db.transaction(write=False) as session:
            rows = session.execute(
                select(m.Version.name, m.Version.deprecated_reason).where(
                    m.Version.name.in_(wanted), m.Version.state == "deprecated"
                )
            )
            return {name: reason for name, reason in rows}

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
                bump_epoch(session)  # lineage answers show the version's state
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

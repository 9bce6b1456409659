"""Committing a staged version: completeness, digests, schema merge, duplicates, and its
number — atomically.

Everything happens in one transaction holding the dataset row and the version row locked
(``SELECT … FOR UPDATE`` on PostgreSQL, the database write lock on SQLite).  Two concurrent
commits of one version therefore serialise: the first commits, the second finds the version
committed and answers it unchanged.  Locking the dataset row also serialises commits of
*different* versions of one dataset, so two identical contents cannot both slip past the
duplicate check, and numbers are given in commit order.

The version's number is taken here, after the duplicate check, from ``datasets.next_number``:
a staging abandoned as a duplicate (or never committed) consumes none, numbers of committed
versions are strictly increasing and never reused.  The version is renamed from its staged
name (``coco_20231015_staged4``, still answering) to its ``rk1`` name
(``coco_20231015_v3``); its date and desc are the ones it was staged with.  A version staged
with ``reserve`` (:meth:`.versions.VersionRepository.stage`) took its number and name when it
was staged, so its storage prefix carries the committed name; commit keeps them, and a reserved
staging found to be a duplicate here is abandoned with its number left as a gap.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from itertools import groupby
from operator import itemgetter
from typing import Any, NamedTuple

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from recordkeeper.core.derive import Changes
from recordkeeper.core.errors import (
    DuplicateContent,
    InvalidRequest,
    InvalidShard,
    StorageReleased,
    VersionImmutable,
    VersionIncomplete,
    VersionNotStaged,
)
from recordkeeper.core.lifecycle import ON_DUPLICATE, OnDuplicate
from recordkeeper.core.limits import MAX_INT64
from recordkeeper.core.manifest import digest_of_splits
from recordkeeper.core.naming import format_version_name
from recordkeeper.core.schema import Schema, merge_schemas
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import VersionRecord
from recordkeeper_service.metrics import ServiceMetrics
from recordkeeper_service.repository import convert
from recordkeeper_service.repository.common import (
    PUBLISHED_STATES,
    load_provenance,
    record_event,
    table_of,
    version_view,
)
from recordkeeper_service.repository.deletion import slipped_into
from recordkeeper_service.repository.derive import Derivation, added_uris, materialize
from recordkeeper_service.repository.leakage import enforce_at_commit, record_commit
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.repository.shards import store_schemas
from recordkeeper_service.repository.versions import allocate, parse_version_ref
from recordkeeper_service.tables.version_splits import VersionSplit

__all__ = ["MAX_MISSING_LISTED", "CommitRepository", "OnDuplicate", "merge_shard_schemas"]

log = logging.getLogger(__name__)

#: At most this many missing indices are listed per split in a ``version_incomplete`` answer.
MAX_MISSING_LISTED = 1000


class CommitRepository:
    """The commit operation; one transaction per call."""

    def __init__(self, db: Database, *, metrics: ServiceMetrics | None = None) -> None:
        self._db = db
        self._metrics = metrics

    def commit(
        self,
        version_name: str,
        *,
        on_duplicate: str = "error",
        actor: str,
        changes: Mapping[str, Any] | None = None,
        leakage: Mapping[str, Any] | None = None,
        defer: Callable[[Callable[[], object]], object] | None = None,
    ) -> VersionRecord:
        """Commit a staged version (idempotent), honouring ``on_duplicate``.

        ``defer``: runs the upkeep after the commit — PostgreSQL's ``ANALYZE`` of ``shards``
        when a derived version's copied rows make it due (:meth:`.Database.analyzed`, ~0.2 s at
        300,000 rows) — once the answer is sent (the route's background task) instead of before
        it; without, it runs here.

        A derived version (staged with ``base``) is first given its base's kept shards per
        ``changes`` (:mod:`recordkeeper.core.derive`), in the same transaction
        (:func:`.derive.materialize`); other versions take no ``changes``.  ``leakage``: the
        client's leakage check of the staged splits, judged by the dataset's leakage policy
        (:func:`.leakage.enforce_at_commit`; a ``warn`` answers ``leakage_warning``).
        """
        if on_duplicate not in ON_DUPLICATE:
            raise InvalidRequest(
                f"on_duplicate must be one of {', '.join(ON_DUPLICATE)}, got {on_duplicate!r}"
            )
        change_set = Changes.from_json(changes)
        ref = parse_version_ref(version_name)
        with self._db.transaction() as session:
            # Lock order everywhere: dataset row, then version row.
            session.execute(
                select(m.Dataset.id).where(m.Dataset.name == ref.dataset).with_for_update()
            )
            version = find_version(session, ref, for_update=True)
            if version.state in PUBLISHED_STATES:
                _check_same_changes(session, version, change_set)
                return version_view(session, version, ref.dataset)
            if version.state == "abandoned":
                if version.duplicate_of_id is not None and on_duplicate == "use_existing":
                    return _existing_answer(session, version.duplicate_of_id, ref.dataset)
                raise VersionNotStaged(
                    f"{version.name} was abandoned and can no longer be committed; "
                    "stage a new version",
                    state=version.state,
                )
            derived: Derivation | None = None
            added: list[str] | None = None
            if version.base_version_id is not None:
                added = added_uris(session, version.id)
                derived = materialize(session, version, change_set, added)
            elif not change_set.empty:
                raise InvalidRequest(
                    f"{version.name} is not a derived version (staged without base): "
                    "changes apply to derived versions only"
                )
            record = _commit_staged(
                session,
                version,
                ref.dataset,
                on_duplicate,
                actor,
                derived=derived,
                added=added,
                leakage=leakage,
            )
            committed_now = version.state == "committed"
            copied = version.shard_count - len(added or ()) if derived is not None else 0
        if committed_now and self._metrics is not None:  # once the transaction has committed
            self._metrics.version_committed()
        if copied:  # a derived version's kept rows were copied
            if defer is not None:
                defer(lambda: self._analyze_copied(copied))
            else:
                self._db.analyzed("shards", copied)
        return record

    def _analyze_copied(self, copied: int) -> None:
        """:meth:`.Database.analyzed` after the answer was sent: a failure is logged (the
        statistics are upkeep; the next bulk insert asks again)."""
        try:
            self._db.analyzed("shards", copied)
        except Exception:
            log.exception("ANALYZE shards after a derived commit failed")


def _check_same_changes(session: Session, version: m.Version, changes: Changes) -> None:
    """A commit of a committed version answers it (a retry) only if it asked for what was
    done: a derived version's change set (by its digest in the ``version.committed`` event),
    none for any other.  Two clients committing one derived version with different changes
    both got 200 before, and the one whose changes were not applied could not tell."""
    if version.base_version_id is None:
        if not changes.empty:
            raise InvalidRequest(
                f"{version.name} is not a derived version (staged without base): "
                "changes apply to derived versions only"
            )
        return
    detail = session.scalars(
        select(m.AuditEvent.detail)
        .where(m.AuditEvent.action == "version.committed", m.AuditEvent.version == version.name)
        .order_by(m.AuditEvent.id.desc())
        .limit(1)
    ).first()
    derived = (detail or {}).get("derived") or {}
    applied = derived.get("changes_digest")
    if applied is not None and applied != changes.digest():  # None: committed before digests
        raise VersionImmutable(
            f"{version.name} was committed with other changes of its base than these; a "
            "committed version never changes: stage a new version from it (base) for more",
            state=version.state,
        )


def _commit_staged(
    session: Session,
    version: m.Version,
    dataset: str,
    on_duplicate: str,
    actor: str,
    *,
    derived: Derivation | None = None,
    added: list[str] | None = None,
    leakage: Mapping[str, Any] | None = None,
) -> VersionRecord:
    splits, body, schemas = _scan(session, version.id)
    if not _complete(splits):  # the rows name what is missing (the rare, failing case)
        _check_complete(
            version.name, _position_rows(session, version.id), derived=derived is not None
        )
    _check_not_released(session, version, added)
    # the dataset's leakage policy judges the content, whatever becomes of it below
    warning = enforce_at_commit(
        session, version, dataset, {t.split: int(t.records) for t in splits}, leakage
    )
    digest = digest_of_splits(body)
    schema = _merge_schemas(session, schemas)

    duplicate = session.scalars(
        select(m.Version)
        .where(
            m.Version.dataset_id == version.dataset_id,
            m.Version.state == "committed",
            m.Version.content_digest == digest,
            m.Version.id != version.id,
        )
        .order_by(m.Version.number)
        .limit(1)
    ).first()
    if duplicate is not None and on_duplicate == "error":
        raise DuplicateContent(
            f"{version.name} has the same content ({digest}) as the committed version "
            f"{duplicate.name}; commit with on_duplicate=use_existing to use it, or "
            "on_duplicate=commit to commit anyway",
            duplicate_of=duplicate.name,
            content_digest=digest,
        )
    if duplicate is not None and on_duplicate == "use_existing":
        version.state = "abandoned"
        version.abandoned_at = m.utcnow()
        version.duplicate_of_id = duplicate.id
        record_event(
            session,
            actor,
            "version.abandoned",
            dataset=dataset,
            version=version.name,
            reason="duplicate_content",
            duplicate_of=duplicate.name,
        )
        session.flush()
        existing = _existing_answer(session, duplicate.id, dataset)
        # the content kept overlaps as the commit's check found: the warning names that version
        warned = record_commit(session, actor, dataset, duplicate, None, warning)
        return existing if warned is None else replace(existing, leakage_warning=warned)

    schema_digest = None
    if schema is not None:
        schema_digest = schema.digest()
        store_schemas(session, {schema_digest: schema})
    staged_as = version.staged_name or version.name
    if version.number is None:  # staged since numbers are given at commit
        version.number = allocate(session, version.dataset_id, m.Dataset.next_number)
        version.name = format_version_name(dataset, version.date, version.number, version.desc)
        _name_the_prefix(session, version, staged_as, added)
    version.state = "committed"
    version.committed_at = m.utcnow()
    version.content_digest = digest
    version.schema_digest = schema_digest
    version.shard_count = sum(t.shards for t in splits)
    version.record_count = sum(int(t.records) for t in splits)
    version.size = sum(int(t.size) for t in splits)
    detail: dict[str, Any] = {
        "content_digest": digest,
        "shard_count": version.shard_count,
        "record_count": version.record_count,
        "number": version.number,
    }
    if staged_as != version.name:
        detail["staged_as"] = staged_as
    if derived is not None:
        detail["derived"] = derived.detail
    if duplicate is not None:  # committed anyway (on_duplicate=commit)
        detail["same_content_as"] = duplicate.name
    record_event(
        session, actor, "version.committed", dataset=dataset, version=version.name, **detail
    )
    _store_splits(session, version.id, splits, None if derived is None else derived.prefixes)
    session.flush()
    record = convert.version_record(
        version, dataset=dataset, provenance=load_provenance(session, version.id)
    )
    warning = record_commit(session, actor, dataset, version, leakage, warning)
    return record if warning is None else replace(record, leakage_warning=warning)


class _SplitTotals(NamedTuple):
    """One split of a staged version, as one grouped query answers it."""

    split: str
    shards: int
    min_count: int
    max_count: int
    min_index: int
    max_index: int
    records: int
    size: int


def _scan(
    session: Session, version_id: int
) -> tuple[list[_SplitTotals], dict[str, list[list[object]]], dict[str | None, int]]:
    """One read of a staged version's rows for everything commit computes from them: per split
    its shard rows, the ``count`` and ``index`` bounds, record and byte sums
    (:class:`_SplitTotals`); the manifest body ``{split: [[records_sha256, record_count], ...]}``
    in index order, what the content digest covers; and the schema digests with their
    multiplicity.  Read through the driver's cursor as plain tuples (no row object per shard).

    Three queries did this before (a grouped one, the manifest's, the schemas' grouped one),
    each a pass over the version's rows: on a 100,000-shard derived version, ~0.4 s of its
    commit on SQLite (docs/performance.md, session 12).  The sums are Python integers: SQLite's
    ``SUM`` stops with "integer overflow" and PostgreSQL's ``SUM`` of ``bigint`` answers a
    ``numeric`` past 2^63-1, where a derived version's kept and added shards meet.

    Raises :class:`InvalidShard` when the version's record count or size would pass 2^63-1
    (registration bounds the shards registered on a version, ``core.shards.check_totals``, but
    not a derived version's kept and added ones together).
    """
    s = table_of(m.Shard).c
    stmt = (
        select(s.split, s.index, s.count, s.records_sha256, s.record_count, s.size, s.schema_digest)
        .where(s.version_id == int(version_id))
        .order_by(s.split, s.index)
    )
    connection = session.connection()
    sql = str(stmt.compile(dialect=connection.dialect, compile_kwargs={"literal_binds": True}))
    cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql)
        rows = cursor.fetchall()
    finally:
        cursor.close()
    splits: list[_SplitTotals] = []
    body: dict[str, list[list[object]]] = {}
    schemas: Counter[str | None] = Counter()
    for split, grouped in groupby(rows, key=itemgetter(0)):
        group = list(grouped)
        counts = [r[2] for r in group]
        splits.append(
            _SplitTotals(
                split,
                len(group),
                min(counts),
                max(counts),
                group[0][1],  # ordered by index
                group[-1][1],
                sum(int(r[4] or 0) for r in group),
                sum(int(r[5] or 0) for r in group),
            )
        )
        body[split] = [[r[3], r[4]] for r in group]
        schemas.update(r[6] for r in group)
    for name, field in (("size", "size"), ("record_count", "records")):
        total = sum(int(getattr(t, field) or 0) for t in splits)
        if total > MAX_INT64:
            raise InvalidShard(
                f"the version's total {name} would be {total}, over the limit of {MAX_INT64} "
                f"(2^63-1): the {name} of a version's shards (a derived version's kept and "
                "added ones together) must add up to at most that"
            )
    return splits, body, dict(schemas)


def _store_splits(
    session: Session,
    version_id: int,
    splits: Sequence[_SplitTotals],
    prefixes: Mapping[str, int] | None,
) -> None:
    """The committed version's ``version_splits`` rows: its per-split totals and, derived, each
    split's prefix kept from the base (:attr:`~recordkeeper.core.derive.SplitPlan.base_prefix`,
    0 for a split the plan does not name)."""
    session.execute(
        insert(VersionSplit),
        [
            {
                "version_id": version_id,
                "split": t.split,
                "shard_count": t.shards,
                "record_count": int(t.records),
                "size": int(t.size),
                "base_prefix": None if prefixes is None else prefixes.get(t.split, 0),
            }
            for t in splits
        ],
    )


def _complete(splits: Sequence[_SplitTotals]) -> bool:
    """Whether every split holds all of its shards ``0..count-1``: ``(split, index)`` is unique,
    so ``count`` rows agreeing on ``count`` with every index in ``[0, count)`` are all of them."""
    return bool(splits) and all(
        t.shards == t.min_count == t.max_count and t.min_index >= 0 and t.max_index < t.shards
        for t in splits
    )


def _position_rows(session: Session, version_id: int) -> Sequence[Any]:
    """``(split, index, count)`` of every shard, in (split, index) order."""
    return session.execute(
        select(m.Shard.split, m.Shard.index, m.Shard.count)
        .where(m.Shard.version_id == version_id)
        .order_by(m.Shard.split, m.Shard.index)
    ).all()


def _merge_schemas(session: Session, counts: Mapping[str | None, int]) -> Schema | None:
    """The merged schema of a staged version's shards (None unless every shard has one), from
    their distinct schema digests and multiplicities (:func:`_scan`)."""
    if not counts or None in counts:
        return None
    return _merged(session, {digest: n for digest, n in counts.items() if digest is not None})


def _check_not_released(
    session: Session, version: m.Version, added: list[str] | None = None
) -> None:
    """Refuse to commit a version with a shard registered in storage after it was released
    for deletion (registration refuses that; this re-check makes a broken lock visible).
    ``added``: a derived version's own shards, the only ones it registered."""
    slipped = slipped_into(session, version.id, version.storage_prefix, only=added)
    if slipped:
        uri, released = slipped[0]
        raise StorageReleased(
            f"{version.name} cannot be committed: its shard {uri!r} was registered in the "
            f"storage of {released} after it was released for deletion",
            uri=uri,
            released_by=released,
        )


def _name_the_prefix(
    session: Session, version: m.Version, staged_as: str, added: list[str] | None
) -> None:
    """Give a version numbered at commit the storage prefix of its committed name
    (``…/coco/coco_20261201_v2_add_person/``, where what the client stores for it after commit
    goes: its record lookup), unless a shard of its own lies under the staged prefix (then
    the prefix stays: it holds that shard).  ``added``: a derived version's own shards (its
    other rows are its base's, stored elsewhere); else every shard of the version."""
    staged = version.storage_prefix
    tail = f"/{staged_as}/"
    if not staged.endswith(tail):  # a prefix of another layout: left as it is
        return
    if added is not None:
        holds = any(uri.startswith(staged) for uri in added)
    else:
        holds = (
            session.scalar(
                select(m.Shard.id)
                .where(
                    m.Shard.version_id == version.id,
                    m.Shard.uri.startswith(staged, autoescape=True),
                )
                .limit(1)
            )
            is not None
        )
    if not holds:
        version.storage_prefix = f"{staged[: -len(tail)]}/{version.name}/"


def _existing_answer(session: Session, version_id: int, dataset: str) -> VersionRecord:
    existing = session.get_one(m.Version, version_id)
    record = version_view(session, existing, dataset)
    return replace(record, duplicate_of=existing.name)


def _check_complete(name: str, rows: Sequence[Any], *, derived: bool = False) -> None:
    """``rows``: the shards' (split, index, count, ...) rows in (split, index) order;
    ``derived``: the version is a change of a base (its rows are the kept and added ones)."""
    if not rows and derived:
        raise VersionIncomplete(
            f"{name} would have no shards: the changes remove every shard of its base and add none",
            missing={},
        )
    if not rows:
        raise VersionIncomplete(
            f"{name} has no shards; register shards before committing", missing={}
        )
    by_split: dict[str, tuple[int, list[int]]] = {}
    for row in rows:
        by_split.setdefault(row.split, (row.count, []))[1].append(row.index)
    missing: dict[str, list[int]] = {}
    totals: list[str] = []
    for split, (count, indices) in sorted(by_split.items()):
        if len(indices) == count:
            continue  # indices are unique and < count, so all of 0..count-1 are there
        missing[split] = list(_missing(indices, count, MAX_MISSING_LISTED))
        totals.append(f"{split}: {count - len(indices)} of {count} missing")
    if missing:
        raise VersionIncomplete(
            f"{name} is incomplete ({'; '.join(totals)}); register the missing shards first",
            missing=missing,
        )


def _missing(sorted_indices: list[int], count: int, limit: int) -> Iterator[int]:
    """The first ``limit`` indices of ``0..count-1`` absent from ``sorted_indices``."""
    listed = 0
    expected = 0
    for index in [*sorted_indices, count]:
        while expected < index and listed < limit:
            yield expected
            expected += 1
            listed += 1
        if listed >= limit:
            return
        expected = index + 1


def merge_shard_schemas(session: Session, digests: Sequence[str | None]) -> Schema | None:
    """Merge the shards' schemas; None unless every shard was registered with one.

    Identical shard schemas are merged once with their counts scaled by their multiplicity,
    which is exactly what merging them one by one would give.
    """
    if not digests or any(d is None for d in digests):
        return None
    return _merged(session, Counter(d for d in digests if d is not None))


def _merged(session: Session, multiplicity: Mapping[str, int]) -> Schema:
    rows = session.execute(
        select(m.SchemaBlob.digest, m.SchemaBlob.body).where(m.SchemaBlob.digest.in_(multiplicity))
    )
    bodies = {digest: body for digest, body in rows}
    parts = [_scaled(Schema.from_dict(bodies[d]), k) for d, k in multiplicity.items()]
    return merge_schemas(parts)


def _scaled(schema: Schema, times: int) -> Schema:
    if times == 1:
        return schema
    return Schema(
        record_type=schema.record_type,
        record_count=schema.record_count * times,
        features=tuple(replace(f, present_count=f.present_count * times) for f in schema.features),
    )

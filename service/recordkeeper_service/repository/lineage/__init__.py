"""Lineage repository: every lineage read and write; each public method is one transaction.

Routes reach :class:`LineageRepository` as ``Repository.lineage``; the registry's own
repositories call :func:`ensure_not_in_use` (session level) before deprecating or deleting a
version, and :func:`bump_epoch` when they change a state a lineage answer shows.  The package:
:mod:`.queries` (SQL), :mod:`.assemble` (rows to records), :mod:`.graph` (the bounded graph
walk), :mod:`.guard` (``version_in_use``), :mod:`.epoch` (the lineage epoch), :mod:`.records`
(the results).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import Connection, func, select, update
from sqlalchemy.orm import Session

from recordkeeper.core.data_lineage import MAX_HISTORY_VERSIONS
from recordkeeper.core.digests import digest_hex
from recordkeeper.core.errors import (
    AmbiguousCheckpoint,
    CheckpointConflict,
    CheckpointNotFound,
    InvalidCheckpoint,
    InvalidRequest,
    ModelNotFound,
)
from recordkeeper.core.lineage import (
    CHECKPOINT_STATES,
    CheckpointRef,
    ambiguous_checkpoint_message,
    checkpoint_directory,
    checkpoint_parent,
    parse_checkpoint_ref,
    parse_deleted_at,
    run_of,
    validate_artifact_uri,
    validate_checkpoint_name,
    validate_deletion_reason,
    validate_model_name,
    validate_role,
    validate_run_name,
    validate_saved_model_name,
)
from recordkeeper.core.model_inputs import ModelInput, check_inputs, validate_model_inputs
from recordkeeper.core.provenance import source_query
from recordkeeper.core.refs import parse_reference
from recordkeeper.core.schema import Schema
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import Page, data_state_json
from recordkeeper_service.repository.cache import RenderedPages
from recordkeeper_service.repository.common import (
    ensure_renderable,
    insert_ignoring_conflicts,
    record_event,
    table_of,
)
from recordkeeper_service.repository.lineage import queries
from recordkeeper_service.repository.lineage.assemble import (
    checkpoint_records,
    consumer_records,
    lineage_record,
    refs_of,
)
from recordkeeper_service.repository.lineage.consumption import (
    SplitRecordsCache,
    record_consumption,
    split_records,
)
from recordkeeper_service.repository.lineage.data import (
    HistoryCache,
    derived_versions,
    source_versions,
)
from recordkeeper_service.repository.lineage.epoch import bump_epoch
from recordkeeper_service.repository.lineage.facts import VersionsShownCache
from recordkeeper_service.repository.lineage.guard import ensure_not_in_use, versions_in_use
from recordkeeper_service.repository.lineage.records import (
    CheckpointRecord,
    ConsumersRecord,
    GraphRecord,
    ImpactRecord,
    LineageRecord,
    ModelCheckEntryRecord,
    ModelCheckRecord,
    ModelRecord,
)
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.settings import DEFAULT_LINEAGE_CACHE_BYTES
from recordkeeper_service.tables.lineage import Checkpoint, CheckpointData, Model, Run

__all__ = [
    "GRAPH_NODES",
    "MAX_GRAPH_DEPTH",
    "MAX_GRAPH_NODES",
    "CheckpointInput",
    "DataInput",
    "LineageHead",
    "LineageRepository",
    "bump_epoch",
    "default_splits",
    "ensure_not_in_use",
    "versions_in_use",
]

MAX_GRAPH_DEPTH = 25
MAX_GRAPH_NODES = 5000
#: Nodes in a graph answer unless the caller asks for more (up to :data:`MAX_GRAPH_NODES`).
GRAPH_NODES = 500


@dataclass(frozen=True)
class DataInput:
    """One data entry of a registration: a version reference, its role, optional splits."""

    version: str
    role: str = "train"
    splits: tuple[str, ...] | None = None
    #: Records the segment read from it (steps * batch size); None: not counted.
    records: int | None = None


@dataclass(frozen=True)
class CheckpointInput:
    """Everything a registration carries besides the model and checkpoint names."""

    step: int | None = None
    uri: str | None = None
    run: str | None = None
    parent: str | None = None
    parent_kind: str | None = None
    data: tuple[DataInput, ...] = ()
    saved_models: tuple[Mapping[str, Any], ...] = ()
    metrics: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)


def default_splits(role: str, available: Sequence[str]) -> tuple[str, ...]:
    """Splits a role uses when none are given: the split named like the role (``eval`` also
    matches ``validation``), else every split of the version."""
    candidates = [role, "validation"] if role == "eval" else [role]
    for name in candidates:
        if name in available:
            return (name,)
    return tuple(sorted(available))


# -- session-level helpers -----------------------------------------------------------------


class LineageHead(NamedTuple):
    """A resolved checkpoint and the lineage epoch read in the same statement.

    ``key`` is what the checkpoint's upstream answer depends on: it stays the same answer while
    the epoch does (see :mod:`.epoch`).  The row's ``created_at`` is part of it so that a
    database emptied and refilled under a running service (ids and epoch restarting) does not
    find another checkpoint's answer.
    """

    row: queries.CheckpointRow
    epoch: int

    @property
    def key(self) -> tuple[Any, ...]:
        return ("lineage", self.row.id, str(self.row.created_at), self.epoch)


def _checkpoint_row(
    session: queries.Reader, ref: CheckpointRef, *, what: str = ""
) -> queries.CheckpointRow:
    """The checkpoint ``ref`` names: exact with a run; without one, the only run's checkpoint
    of that name, else :class:`AmbiguousCheckpoint` listing every candidate."""
    rows = queries.checkpoints_by_name(session, ref.model, ref.checkpoint, ref.run)
    return _only_checkpoint(session, ref, rows, what=what)


def _only_checkpoint(
    session: queries.Reader,
    ref: CheckpointRef,
    rows: Sequence[queries.CheckpointRow],
    *,
    what: str = "",
) -> queries.CheckpointRow:
    """The one of ``rows`` (the checkpoints named like ``ref``), else the error
    :func:`_checkpoint_row` explains."""
    if len(rows) == 1:
        return rows[0]
    prefix = f"{what} " if what else ""
    if rows:
        candidates = [CheckpointRef(r.model, r.checkpoint, r.run) for r in rows]
        raise AmbiguousCheckpoint(
            prefix + ambiguous_checkpoint_message(ref, candidates),
            candidates=[str(c) for c in candidates],
        )
    model_id = session.scalar(select(Model.id).where(Model.name == ref.model))
    if model_id is None:
        raise CheckpointNotFound(f"{prefix}{ref}: there is no model named {ref.model!r}")
    if ref.run is not None:
        raise CheckpointNotFound(
            f"{prefix}{ref}: run {ref.run!r} of model {ref.model} has no checkpoint "
            f"{ref.checkpoint!r}"
        )
    raise CheckpointNotFound(
        f"{prefix}{ref}: model {ref.model} has no checkpoint {ref.checkpoint!r}"
    )


def _get_or_create(
    session: Session, table: Any, match: Mapping[str, Any], actor: str, **extra: Any
) -> int:
    """Id of the row matching ``match`` in ``table`` (models or runs), created if missing
    (with the ``extra`` columns)."""
    clauses = [table.c[k] == v for k, v in match.items()]
    existing = session.scalar(select(table.c.id).where(*clauses))
    if existing is not None:
        return int(existing)
    stmt = (
        insert_ignoring_conflicts(session, table)
        .values(**match, **extra, created_by=actor)
        .returning(table.c.id)
    )
    created = session.scalar(stmt)
    if created is not None:
        return int(created)
    return int(session.scalars(select(table.c.id).where(*clauses)).one())


def _saved_model(position: int, export: Mapping[str, Any]) -> dict[str, Any]:
    """A validated ``saved_models`` entry: name, URI and (when given) its serving inputs."""
    where = f"saved_models[{position}]"
    entry: dict[str, Any] = {
        "name": validate_saved_model_name(export["name"], f"{where}.name"),
        "uri": validate_artifact_uri(export["uri"], f"{where}.uri"),
    }
    if export.get("inputs") is not None:
        inputs = validate_model_inputs(export["inputs"], f"{where}.inputs")
        entry["inputs"] = [i.to_json() for i in inputs]
    return entry


def _schema_of(session: Session, version: m.Version) -> Schema | None:
    if version.schema_digest is None:
        return None
    body = session.scalar(
        select(m.SchemaBlob.body).where(m.SchemaBlob.digest == version.schema_digest)
    )
    return Schema.from_dict(body) if body is not None else None


def _split_names(session: Session, version_id: int) -> list[str]:
    stmt = select(m.Shard.split).where(m.Shard.version_id == version_id).distinct()
    return sorted(session.scalars(stmt))


def _resolve_data(
    session: Session, entries: Sequence[DataInput]
) -> tuple[set[tuple[int, str, str]], dict[int, m.Version]]:
    """Resolve every entry to exact (version id, split, role) triples."""
    triples: set[tuple[int, str, str]] = set()
    rows: dict[int, m.Version] = {}
    for position, entry in enumerate(entries):
        where = f"data[{position}] ({entry.version})"
        validate_role(entry.role, where)
        row = find_version(session, parse_reference(entry.version), published_only=True)
        rows[row.id] = row
        available = _split_names(session, row.id)
        if entry.splits is None:
            splits = default_splits(entry.role, available)
        elif not entry.splits:
            raise InvalidCheckpoint(
                f"{where}: splits is empty; name the splits used, or leave it out for the "
                "default (the split named like the role, else every split)"
            )
        else:
            missing = [s for s in entry.splits if s not in available]
            if missing:
                raise InvalidCheckpoint(
                    f"{where}: {row.name} has no split {', '.join(map(repr, missing))} "
                    f"(it has {', '.join(available) or 'none'})"
                )
            splits = tuple(entry.splits)
        triples.update((row.id, split, entry.role) for split in splits)
    _lock_against_release(session, sorted(rows))
    return triples, rows


def _lock_against_release(session: Session, version_ids: Sequence[int]) -> None:
    """Hold the versions a checkpoint names FOR SHARE until it is recorded.

    A release of a version's storage (gc's or retention's claim) locks its row FOR UPDATE SKIP
    LOCKED and then re-reads the checkpoints that trained on it: with this lock a claim either
    sees this checkpoint (and keeps the data unless forced) or commits before it is recorded,
    never in between.  Sorted ids, so two registrations never wait on each other in opposite
    orders; SQLite serialises write transactions and ignores the clause.
    """
    if version_ids:
        session.execute(
            select(m.Version.id)
            .where(m.Version.id.in_(version_ids))
            .order_by(m.Version.id)
            .with_for_update(read=True)
        )


def _differences(
    session: Session,
    row: queries.CheckpointRow,
    *,
    spec: CheckpointInput,
    parent_id: int | None,
    parent_kind: str | None,
    triples: set[tuple[int, str, str]],
    saved_models: list[dict[str, Any]],
) -> list[str]:
    """Fields in which a re-registration differs from the registered checkpoint."""
    existing = set(
        session.execute(
            select(CheckpointData.version_id, CheckpointData.split, CheckpointData.role).where(
                CheckpointData.checkpoint_id == row.id
            )
        )
    )
    checks = {
        "step": row.step == spec.step,
        "uri": row.uri == spec.uri,
        "parent": row.parent_id == parent_id and row.parent_kind == parent_kind,
        "data": existing == triples,
        "saved_models": list(row.saved_models or []) == saved_models,
        "metrics": dict(row.metrics or {}) == dict(spec.metrics),
        "metadata": dict(row.metadata or {}) == dict(spec.metadata),
    }
    return [name for name, same in checks.items() if not same]


def _version_names(session: Session, ids: Sequence[int]) -> dict[int, str]:
    if not ids:
        return {}
    rows = session.execute(select(m.Version.id, m.Version.name).where(m.Version.id.in_(ids)))
    return {int(vid): str(name) for vid, name in rows}


# -- the repository --------------------------------------------------------------------------


class LineageRepository:
    """Models, runs, checkpoints and lineage queries over one :class:`Database`."""

    def __init__(self, db: Database, *, cache_bytes: int = DEFAULT_LINEAGE_CACHE_BYTES) -> None:
        self._db = db
        #: Rendered upstream answers by :attr:`LineageHead.key` and form, per process (the route
        #: renders each once; ``cache_bytes=0`` keeps none).
        self.rendered = RenderedPages(max_bytes=cache_bytes)
        #: What upstream answers show of each version (facts kept, states per lineage epoch)
        self.versions_shown = VersionsShownCache()
        #: What each version recorded of where it came from (immutable once committed)
        self.histories = HistoryCache()
        #: Each version's records per split, for the answers' epochs (fixed once committed)
        self.split_records = SplitRecordsCache()

    # -- writes ------------------------------------------------------------------------------

    def register(
        self, model: str, checkpoint: str, spec: CheckpointInput, *, actor: str
    ) -> tuple[CheckpointRecord, bool]:
        """Register ``model/checkpoint``; idempotent.  Returns the record and whether it is new.

        Data references are resolved to exact committed (or deprecated) versions now, so an
        alias that moves later does not change what this checkpoint trained on.  The run is
        ``spec.run``, else derived from the URI's directory (:func:`run_of`): a checkpoint of the
        same name in another run is another checkpoint, never a conflict.
        """
        validate_model_name(model)
        validate_checkpoint_name(checkpoint)
        if spec.uri is not None:
            validate_artifact_uri(spec.uri, "uri")
        run = run_of(spec.run, spec.uri)
        if spec.step is not None and spec.step < 0:
            raise InvalidCheckpoint(f"step must not be negative, got {spec.step}")
        own_ref = CheckpointRef(model, checkpoint, run)
        parent_ref, parent_kind = checkpoint_parent(own_ref, spec.parent, spec.parent_kind)
        saved_models = [_saved_model(i, s) for i, s in enumerate(spec.saved_models)]
        with self._db.transaction() as session:
            triples, _ = _resolve_data(session, spec.data)
            parent_id = (
                _checkpoint_row(session, parent_ref, what="parent").id if parent_ref else None
            )
            model_id = _get_or_create(session, Model.__table__, {"name": model}, actor)
            run_id = _get_or_create(
                session,
                Run.__table__,
                {"model_id": model_id, "name": run},
                actor,
                directory=checkpoint_directory(spec.uri) if spec.uri else None,
            )
            table = table_of(Checkpoint)
            values = {
                "model_id": model_id,
                "name": checkpoint,
                "step": spec.step,
                "uri": spec.uri,
                "run_id": run_id,
                "parent_id": parent_id,
                "parent_kind": parent_kind,
                "saved_models": saved_models,
                "metrics": dict(spec.metrics),
                "metadata": dict(spec.metadata),
                "created_by": actor,
                "created_at": m.utcnow(),
            }
            new_id = session.scalar(
                insert_ignoring_conflicts(session, table).values(**values).returning(table.c.id)
            )
            if new_id is None:
                (existing,) = queries.checkpoints_by_name(session, model, checkpoint, run)
                different = _differences(
                    session,
                    existing,
                    spec=spec,
                    parent_id=parent_id,
                    parent_kind=parent_kind,
                    triples=triples,
                    saved_models=saved_models,
                )
                if different:
                    raise CheckpointConflict(
                        f"{own_ref} is already registered with a different "
                        f"{', '.join(different)}; a checkpoint's lineage never changes "
                        "(register the new state under a new checkpoint name, or in another "
                        "run: run=... or a fresh directory)",
                        fields=different,
                    )
                return checkpoint_records(session, [existing])[0], False
            if triples:
                session.execute(
                    table_of(CheckpointData).insert(),
                    [
                        {"checkpoint_id": new_id, "version_id": v, "split": s, "role": r}
                        for v, s, r in sorted(triples)
                    ],
                )
            record_consumption(session, new_id, spec.data)
            record_event(
                session,
                actor,
                "checkpoint.registered",
                model=model,
                run=run,
                checkpoint=checkpoint,
                parent=str(parent_ref) if parent_ref else None,
            )
            created = queries.checkpoint_rows(session, [new_id])
            record = checkpoint_records(session, created)[0]
            ensure_renderable(record, f"checkpoint {own_ref}")  # before the commit
            return record, True

    def mark_deleted(
        self,
        ref: str | CheckpointRef,
        *,
        actor: str,
        reason: str,
        deleted_at: str | None = None,
    ) -> tuple[CheckpointRecord, bool]:
        """Record that the files of ``ref`` were deleted; its lineage stays.

        Idempotent: a checkpoint already marked deleted keeps its first time and reason
        (returned with ``False``).  ``deleted_at`` (ISO 8601) defaults to now.
        """
        parsed = parse_checkpoint_ref(ref)
        reason = validate_deletion_reason(reason)
        when = parse_deleted_at(deleted_at) if deleted_at is not None else m.utcnow()
        with self._db.transaction() as session:
            row = _checkpoint_row(session, parsed)
            if row.state == "deleted":
                return checkpoint_records(session, [row])[0], False
            session.execute(
                update(table_of(Checkpoint))
                .where(table_of(Checkpoint).c.id == row.id)
                .values(state="deleted", deleted_at=when, deleted_reason=reason)
            )
            bump_epoch(session)  # every lineage answer showing it changes
            record_event(
                session,
                actor,
                "checkpoint.deleted",
                model=row.model,
                run=row.run,
                checkpoint=row.checkpoint,
                reason=reason,
            )
            return checkpoint_records(session, queries.checkpoint_rows(session, [row.id]))[0], True

    # -- reads -------------------------------------------------------------------------------

    def get(self, ref: str | CheckpointRef) -> CheckpointRecord:
        parsed = parse_checkpoint_ref(ref)
        with self._db.transaction(write=False) as session:
            return checkpoint_records(session, [_checkpoint_row(session, parsed)])[0]

    def list_models(
        self, *, prefix: str | None = None, limit: int = 100, offset: int = 0
    ) -> Page[ModelRecord]:
        """Models with their checkpoint count and highest-step checkpoint (``model@run/ckpt``),
        by name."""
        with self._db.transaction(write=False) as session:
            where = [Model.name.startswith(prefix, autoescape=True)] if prefix else []
            total = session.scalar(select(func.count(Model.id)).where(*where)) or 0
            count = (
                select(func.count(Checkpoint.id))
                .where(Checkpoint.model_id == Model.id)
                .correlate(Model)
                .scalar_subquery()
            )
            latest = (
                select(Checkpoint.id)
                .where(Checkpoint.model_id == Model.id)
                .order_by(Checkpoint.step.desc().nulls_last(), Checkpoint.id.desc())
                .limit(1)
                .correlate(Model)
                .scalar_subquery()
            )
            rows = session.execute(
                select(Model.name, Model.created_at, count, latest)
                .where(*where)
                .order_by(Model.name)
                .limit(limit)
                .offset(offset)
            )
            found = list(rows)
            refs = refs_of(session, {latest_id for *_, latest_id in found if latest_id})
            data = [
                ModelRecord(n, c, int(k or 0), str(refs[latest_id]) if latest_id else None)
                for n, c, k, latest_id in found
            ]
            return Page(data=data, count=int(total), limit=limit, offset=offset)

    def list_checkpoints(
        self,
        model: str,
        *,
        run: str | None = None,
        state: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> Page[CheckpointRecord]:
        """Checkpoints of ``model`` (of one ``run``, in one ``state``), highest step (then
        newest) first."""
        validate_model_name(model)
        if run is not None:
            validate_run_name(run)
        if state is not None and state not in CHECKPOINT_STATES:
            raise InvalidRequest(
                f"state must be one of {', '.join(CHECKPOINT_STATES)}, got {state!r}"
            )
        with self._db.transaction(write=False) as session:
            model_id = session.scalar(select(Model.id).where(Model.name == model))
            if model_id is None:
                raise ModelNotFound(f"there is no model named {model!r}")
            where = [Checkpoint.model_id == model_id]
            if run is not None:
                run_id = session.scalar(
                    select(Run.id).where(Run.model_id == model_id, Run.name == run)
                )
                if run_id is None:
                    raise CheckpointNotFound(f"model {model} has no run named {run!r}")
                where.append(Checkpoint.run_id == run_id)
            if state is not None:
                where.append(Checkpoint.state == state)
            total = session.scalar(select(func.count(Checkpoint.id)).where(*where))
            ids = list(
                session.scalars(
                    select(Checkpoint.id)
                    .where(*where)
                    .order_by(Checkpoint.step.desc().nulls_last(), Checkpoint.id.desc())
                    .limit(limit)
                    .offset(offset)
                )
            )
            order = {cid: position for position, cid in enumerate(ids)}
            rows = sorted(queries.checkpoint_rows(session, ids), key=lambda r: order[r.id])
            return Page(
                data=checkpoint_records(session, rows),
                count=int(total or 0),
                limit=limit,
                offset=offset,
            )

    def lineage(self, ref: str | CheckpointRef) -> LineageRecord:
        """Which data trained ``ref``: the union along its complete parent chain."""
        parsed = parse_checkpoint_ref(ref)
        return self._db.read(lambda conn: self._upstream(conn, self._head(conn, parsed)))

    def lineage_head(self, ref: str | CheckpointRef) -> LineageHead:
        """Resolve ``ref`` (the rules of :meth:`get`) and read the lineage epoch, in one
        statement: all a held answer needs (:attr:`LineageHead.key`)."""
        parsed = parse_checkpoint_ref(ref)
        return self._db.read(lambda conn: self._head(conn, parsed))

    def answer_from(self, head: LineageHead) -> LineageRecord:
        """The upstream answer of ``head``'s checkpoint, computed now (at least as new as
        ``head.epoch``: a state change committed since shows; its key is then merely older),
        with how much of each version its chain read (``LineageRecord.consumed``).

        One statement when this process has seen the chain's versions: the walk, which also
        brings the segments' counts (:func:`.queries.upstream_rows`); the versions' facts,
        histories and split sizes come from the per-process caches, read (one statement each)
        only for versions not seen yet."""
        return self._db.read(lambda conn: self._upstream(conn, head, consumption=True))

    @staticmethod
    def _head(conn: Connection, ref: CheckpointRef) -> LineageHead:
        rows, epoch = queries.checkpoints_by_name_at_epoch(conn, ref.model, ref.checkpoint, ref.run)
        row = _only_checkpoint(conn, ref, rows)
        assert epoch is not None  # read with the row
        return LineageHead(row, epoch)

    def _upstream(
        self, conn: Connection, head: LineageHead, *, consumption: bool = False
    ) -> LineageRecord:
        """The answer (with ``consumption``, what each segment read).  The walk is one
        statement (one snapshot); what the answer shows of versions comes from
        :attr:`versions_shown` (states read after ``head.epoch`` was), so no transaction spans
        the reads."""
        upstream = queries.upstream_rows(conn, head.row.id)
        trained = {edge[1] for edge in upstream.edges}
        # versions not seen yet usually lack both their facts and their split sizes: read
        # together (one statement) when both are missing
        unsized = self.split_records.missing(trained) if consumption else set()
        read_sizes: dict[int, dict[str, int]] = {}

        def load_shown(missing: set[int]) -> Any:
            shown, sizes = queries.versions_shown_and_splits(conn, missing, unsized)
            read_sizes.update(sizes)
            return shown

        facts, states = self.versions_shown.lookup(trained, head.epoch, load_shown)

        def shown(ids: set[int]) -> Any:
            return self.versions_shown.lookup(
                ids, head.epoch, lambda missing: queries.versions_shown(conn, missing)
            )

        # the walk said which versions recorded provenance: the history starts from those
        history = self.histories.history(
            conn, upstream.recorded, lambda ids: shown(ids)[1], epoch=head.epoch
        )
        sizes = (
            self.split_records.lookup(
                trained,
                lambda missing: (
                    read_sizes if missing <= read_sizes.keys() else split_records(conn, missing)
                ),
            )
            if consumption
            else None
        )
        return lineage_record(head.row, upstream, facts, states, history, sizes)

    def consumers(self, version_ref: str, *, transitive: bool = True) -> ConsumersRecord:
        """Checkpoints trained on the version ``version_ref`` (an alias is resolved now)."""
        with self._db.transaction(write=False) as session:
            row = find_version(session, parse_reference(version_ref))
            direct = queries.direct_consumers(session, [row.id])
            below = (
                queries.descendants(session, {r.checkpoint_id for r in direct})
                if transitive
                else []
            )
            versions = (
                {
                    "name": row.name,
                    "content_digest": row.content_digest,
                    "state": row.state,
                    **data_state_json(
                        row.state, row.gc_claimed_at, row.collected_at, row.collected_reason
                    ),
                },
            )
            return ConsumersRecord(versions, consumer_records(session, direct, below))

    def shard_consumers(
        self, *, uri: str | None = None, sha256: str | None = None, transitive: bool = True
    ) -> ConsumersRecord:
        """Checkpoints whose segments used the split holding a shard (by URI or sha256)."""
        uri, sha256 = uri or None, sha256 or None  # an empty value names no shard
        if (uri is None) == (sha256 is None):
            raise InvalidRequest("give exactly one of uri= or sha256= (not empty)")
        if sha256 is not None:
            sha256 = digest_hex(sha256, "sha256")
        with self._db.transaction(write=False) as session:
            column = m.Shard.uri if uri is not None else m.Shard.sha256
            stmt = (
                select(
                    m.Shard.version_id,
                    m.Version.name,
                    m.Version.content_digest,
                    m.Version.state,
                    m.Version.gc_claimed_at,
                    m.Version.collected_at,
                    m.Version.collected_reason,
                    m.Shard.split,
                    m.Shard.index,
                    m.Shard.count,
                    m.Shard.uri,
                    m.Shard.sha256,
                )
                .join(m.Version, m.Version.id == m.Shard.version_id)
                .where(column == (uri if uri is not None else sha256))
                .order_by(m.Version.name, m.Shard.split, m.Shard.index)
            )
            shards = list(session.execute(stmt))
            pairs = [(s.version_id, s.split) for s in shards]
            direct = queries.direct_consumers(session, {p[0] for p in pairs}, splits=pairs)
            below = (
                queries.descendants(session, {r.checkpoint_id for r in direct})
                if transitive
                else []
            )
            versions = tuple(
                {
                    "name": name,
                    "content_digest": digest,
                    "state": state,
                    **data_state_json(state, released, collected, reason),
                }
                for name, digest, state, released, collected, reason in dict.fromkeys(
                    s[1:7] for s in shards
                )
            )
            shard_json = tuple(
                {
                    "version": s.name,
                    "split": s.split,
                    "index": s.index,
                    "count": s.count,
                    "uri": s.uri,
                    "sha256": s.sha256,
                }
                for s in shards
            )
            return ConsumersRecord(versions, consumer_records(session, direct, below), shard_json)

    def impact(
        self,
        *,
        version: str | None = None,
        source: str | None = None,
        prefix: bool = False,
        transitive: bool = True,
    ) -> ImpactRecord:
        """What a version, or a raw source URI, affects: every version derived from it
        (through parents, any depth) and every checkpoint trained on any of them (with
        ``transitive``, also those restored or initialised from one).

        ``source`` matches versions that recorded it exactly or recorded a prefix it lies
        under (a file inside a recorded directory); ``prefix`` also matches sources recorded
        under it.  A source no version recorded affects nothing (an empty answer, not 404).
        """
        version, source = version or None, source or None
        if (version is None) == (source is None):
            raise InvalidRequest("give exactly one of version= or source= (not empty)")
        if source is not None:
            source = source_query(source)
        with self._db.transaction(write=False) as session:
            matched: list[dict[str, Any]] = []
            guard = MAX_HISTORY_VERSIONS  # read at each call (tests lower it)
            cut = False
            if version is not None:
                start = [find_version(session, parse_reference(version)).id]
            else:
                assert source is not None
                # A prefix can match every source recorded under a bucket: the matches are
                # guarded like the walk (they were read and answered whole).
                found = source_versions(session, source, prefix=prefix, limit=guard + 1)
                cut = len(found) > guard
                found = found[:guard]
                start = sorted({vid for vid, _, _ in found})
                names = _version_names(session, start)
                matched = [
                    {"uri": uri, "version": names[vid], "identity_digest": digest}
                    for vid, uri, digest in found
                ]
            rows, truncated = derived_versions(session, start, limit=guard)
            truncated = truncated or cut
            ids = [r.id for r in rows]
            shown = queries.versions_shown(session, ids)
            versions = [
                {
                    "name": shown[r.id][0].version,
                    "dataset": shown[r.id][0].dataset,
                    "number": shown[r.id][0].number,
                    "content_digest": shown[r.id][0].content_digest,
                    "state": shown[r.id][1].state,
                    **shown[r.id][1].data_json(),
                    "depth": r.depth,
                    "via": [
                        {"version": shown[pid][0].version, "role": role}
                        for pid, role in r.via
                        if pid in shown
                    ],
                }
                for r in sorted(rows, key=lambda r: (r.depth, shown[r.id][0].version))
                if r.id in shown
            ]
            direct = queries.direct_consumers(session, ids)
            below = (
                queries.descendants(session, {r.checkpoint_id for r in direct})
                if transitive
                else []
            )
            used: dict[str, set[str]] = {}
            refs = {r.checkpoint_id: CheckpointRef(r.model, r.checkpoint, r.run) for r in direct}
            for checkpoint_id, version_id in queries.segment_versions(session, refs, ids):
                used.setdefault(str(refs[checkpoint_id]), set()).add(shown[version_id][0].version)
            target = {"version": version, "source": source, "prefix": bool(prefix and source)}
            return ImpactRecord(
                target,
                tuple(matched),
                tuple(versions),
                consumer_records(session, direct, below),
                {ref: tuple(sorted(names)) for ref, names in used.items()},
                truncated,
            )

    def check_model(self, ref: str | CheckpointRef, data: Sequence[str] = ()) -> ModelCheckRecord:
        """Compare the serving inputs recorded with ``ref``'s SavedModel exports with the schema
        of every version along its lineage and of each version in ``data``."""
        parsed = parse_checkpoint_ref(ref)
        with self._db.transaction(write=False) as session:
            row = _checkpoint_row(session, parsed)
            own = CheckpointRef(row.model, row.checkpoint, row.run)
            exports = [s for s in row.saved_models or () if s.get("inputs") is not None]
            if not exports:
                raise InvalidCheckpoint(
                    f"{own} recorded no SavedModel export with its serving inputs "
                    f"({len(row.saved_models or ())} export(s) without them): register the "
                    "export with inputs (recordkeeper.tf reads them from saved_model.pb)"
                )
            targets: dict[tuple[int, str], m.Version] = {}
            for _, version_id, _, role in queries.upstream_rows(session, row.id).edges:
                key = (version_id, role)
                if key not in targets:
                    version = session.get(m.Version, version_id)
                    assert version is not None  # a foreign key
                    targets[key] = version
            for text in data:
                version = find_version(session, parse_reference(text))
                targets.setdefault((version.id, "asked"), version)
            schemas = {vid: _schema_of(session, v) for (vid, _), v in targets.items()}
            checks = []
            for export in exports:
                inputs = [ModelInput.from_json(i) for i in export["inputs"]]
                for (vid, role), version in sorted(
                    targets.items(), key=lambda item: (item[1].name, item[0][1])
                ):
                    problems = check_inputs(inputs, schemas[vid])
                    checks.append(
                        ModelCheckEntryRecord(export["name"], version.name, role, tuple(problems))
                    )
            return ModelCheckRecord(str(own), tuple(checks), tuple(exports))

    def graph(
        self,
        *,
        checkpoint: str | None = None,
        version: str | None = None,
        depth: int = 3,
        direction: str = "both",
        max_nodes: int = GRAPH_NODES,
        source: str | None = None,
    ) -> GraphRecord:
        """Nodes and edges within ``depth`` hops of one checkpoint, version or raw source."""
        from recordkeeper_service.repository.lineage.graph import build_graph

        if sum(x is not None for x in (checkpoint, version, source)) != 1:
            raise InvalidRequest("give exactly one of checkpoint=, version= or source=")
        if not 1 <= max_nodes <= MAX_GRAPH_NODES:
            raise InvalidRequest(f"limit must be between 1 and {MAX_GRAPH_NODES}, got {max_nodes}")
        if not 1 <= depth <= MAX_GRAPH_DEPTH:
            raise InvalidRequest(f"depth must be between 1 and {MAX_GRAPH_DEPTH}, got {depth}")
        if direction not in ("upstream", "downstream", "both"):
            raise InvalidRequest(
                f"direction must be upstream, downstream or both, got {direction!r}"
            )
        with self._db.transaction(write=False) as session:
            root: tuple[str, Any]
            if checkpoint is not None:
                root = ("checkpoint", _checkpoint_row(session, parse_checkpoint_ref(checkpoint)).id)
            elif source is not None:
                uri = source_query(source)
                if not source_versions(session, uri):
                    raise InvalidRequest(f"no version recorded the source {uri!r}")
                root = ("source", uri)
            else:
                root = ("version", find_version(session, parse_reference(str(version))).id)
            return build_graph(session, root, depth=depth, direction=direction, max_nodes=max_nodes)

"""Retention of committed versions: policies, pins, the plan, and claims that release data.

The rules that keep a version live in :mod:`recordkeeper.core.retention`; this module gathers
the facts they look at (aliases and ``latest``, checkpoints not deleted that trained on a
version, pins, numbers and commit times) in a few set-wise queries, whatever the number of
versions, and counts what deleting the expired ones frees: each object once, and never an
object a live version that is not being deleted references (the deletion rule, once, in
:mod:`recordkeeper_service.repository.deletion`).

Deleting goes through claims, like gc: :meth:`RetentionRepository.claim` (admin scope at the
route) re-checks each expired version under its row lock and releases it to the caller
(``gc_claimed_by``/``gc_claimed_at``: a released version is no longer live, so nothing may
register its objects again); :meth:`RetentionRepository.deletable` answers, per batch of the
version's objects, which the claimant may delete; :meth:`RetentionRepository.mark_deleted`
records the version's data deleted (``collected_at``, ``collected_reason = 'retention'``) —
its row, digests, schema and lineage stay.  A claim not finished (a collector that crashed) is
given back to its claimant by its next claim, or to anyone after :data:`CLAIM_LEASE`.  Every
step writes an audit event.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, exists, func, select
from sqlalchemy.orm import Session, aliased

from recordkeeper.core.errors import Conflict, InvalidRequest
from recordkeeper.core.lineage import CheckpointRef
from recordkeeper.core.naming import validate_dataset_name
from recordkeeper.core.refs import parse_reference
from recordkeeper.core.retention import (
    DEFAULT_SCOPE,
    Decision,
    RetentionPolicy,
    VersionFacts,
    decide,
    validate_force_reason,
    validate_pin_label,
)
from recordkeeper.core.roots import AllowedRoots, UriError
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import PUBLISHED_STATES, iso_timestamp
from recordkeeper_service.repository.common import dataset_row, record_event
from recordkeeper_service.repository.deletion import (
    ensure_data_stored,
    live_version_clause,
    referenced_elsewhere,
)
from recordkeeper_service.repository.lineage.epoch import bump_epoch
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.repository.samples import drop_sample
from recordkeeper_service.repository.versions import parse_version_ref
from recordkeeper_service.tables import lineage as lm
from recordkeeper_service.tables import retention as rm

__all__ = [
    "CLAIM_LEASE",
    "MAX_CLAIMS",
    "MAX_URIS_PER_REQUEST",
    "PinRecord",
    "PlanItem",
    "PolicyRecord",
    "RetentionPlan",
    "RetentionRepository",
]

#: A claim older than this (seconds) may be taken over by another collector.
CLAIM_LEASE = 3600
#: Most versions one claim request releases.
MAX_CLAIMS = 100
#: Most object URIs one ``deletable`` request asks about.
MAX_URIS_PER_REQUEST = 10_000
_CHUNK = 500


# -- the deletion rule (repository.deletion) applied to a whole plan -----------------------


def _other_live_reference(shard: Any, releasing: Collection[int]) -> ColumnElement[bool]:
    """``shard``'s object is referenced by a live version not in ``releasing`` (the set-wise
    form of :func:`~recordkeeper_service.repository.deletion.referenced_elsewhere`)."""
    other = aliased(m.Shard)
    owner = aliased(m.Version)
    clause = (
        exists()
        .where(other.uri == shard.uri, owner.id == other.version_id, live_version_clause(owner))
        .correlate(shard)
    )
    if releasing:
        clause = clause.where(owner.id.not_in(bindparam("rk_releasing", expanding=True)))
    return clause


# -- records -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PolicyRecord:
    """The policy of ``scope`` (a dataset or ``*``); ``source`` is where it came from when a
    dataset's *effective* policy was asked for (``dataset``, ``default`` or ``none``)."""

    scope: str
    policy: RetentionPolicy | None
    source: str
    updated_at: datetime.datetime | None = None
    updated_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "source": self.source,
            "policy": self.policy.to_json() if self.policy is not None else None,
            "describe": self.policy.describe() if self.policy is not None else "keep everything",
            "updated_at": iso_timestamp(self.updated_at),
            "updated_by": self.updated_by,
        }


@dataclass(frozen=True, slots=True)
class PinRecord:
    label: str
    version: str
    dataset: str
    created_at: datetime.datetime
    created_by: str

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "version": self.version,
            "dataset": self.dataset,
            "created_at": iso_timestamp(self.created_at),
            "created_by": self.created_by,
        }


@dataclass(frozen=True, slots=True)
class PlanItem:
    """One version in a plan.  ``action``: ``keep``, ``delete`` (expired; apply deletes it),
    ``needs_force`` (expired, but checkpoints trained on it), ``resume`` (released by an earlier
    apply that did not finish).  ``objects``/``bytes``: what deleting it frees (each object
    counted once across the plan); ``shared``: its objects a live version keeps."""

    name: str
    dataset: str
    number: int
    state: str
    action: str
    kept_by: tuple[dict[str, str], ...] = ()
    trained: tuple[str, ...] = ()
    objects: int = 0
    bytes: int = 0
    shared: int = 0
    claimed_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dataset": self.dataset,
            "number": self.number,
            "state": self.state,
            "action": self.action,
            "kept_by": list(self.kept_by),
            "trained": list(self.trained),
            "objects": self.objects,
            "bytes": self.bytes,
            "shared": self.shared,
            "claimed_by": self.claimed_by,
        }


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    dataset: str | None
    force: bool
    items: tuple[PlanItem, ...]
    data_deleted: int

    def to_json(self) -> dict[str, Any]:
        deleting = [i for i in self.items if i.action in ("delete", "resume")]
        return {
            "dataset": self.dataset,
            "force": self.force,
            "versions": len(self.items),
            "delete": len(deleting),
            "keep": sum(i.action == "keep" for i in self.items),
            "needs_force": sum(i.action == "needs_force" for i in self.items),
            "objects": sum(i.objects for i in deleting),
            "bytes": sum(i.bytes for i in deleting),
            "data_deleted": self.data_deleted,
            "items": [i.to_json() for i in self.items],
        }


@dataclass(frozen=True, slots=True)
class RetentionClaim:
    """A version released to a collector: delete its objects ``deletable`` answers."""

    name: str
    dataset: str
    storage_prefix: str
    shard_count: int
    claimed_by: str
    claimed_at: datetime.datetime
    resumed: bool
    forced: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dataset": self.dataset,
            "storage_prefix": self.storage_prefix,
            "shard_count": self.shard_count,
            "claimed_by": self.claimed_by,
            "claimed_at": iso_timestamp(self.claimed_at),
            "resumed": self.resumed,
            "forced": self.forced,
        }


# -- facts ---------------------------------------------------------------------------------


def _policy_of(row: rm.RetentionPolicy) -> RetentionPolicy:
    return RetentionPolicy(
        keep_last=row.keep_last,
        keep_days=row.keep_days,
        keep_aliased=row.keep_aliased,
        keep_trained=row.keep_trained,
        keep_pinned=row.keep_pinned,
    )


def _chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def _aliases(session: Session, ids: Sequence[int], dataset_ids: set[int]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = defaultdict(list)
    for chunk in _chunks(ids):
        for vid, name in session.execute(
            select(m.Alias.version_id, m.Alias.name).where(m.Alias.version_id.in_(chunk))
        ):
            found[vid].append(name)
    latest = (
        select(m.Version.dataset_id, func.max(m.Version.number).label("number"))
        .where(m.Version.state == "committed", m.Version.dataset_id.in_(sorted(dataset_ids)))
        .group_by(m.Version.dataset_id)
        .subquery()
    )
    for (vid,) in session.execute(
        select(m.Version.id).join(
            latest,
            and_(m.Version.dataset_id == latest.c.dataset_id, m.Version.number == latest.c.number),
        )
    ):
        found[vid].append("latest")
    return found


def _trained(session: Session, ids: Sequence[int]) -> dict[int, list[str]]:
    """Per version: checkpoints whose segment consumed it and that are not deleted or have a
    descendant that is not (so the data is in some present checkpoint's lineage)."""
    if not ids:
        return {}
    ck = lm.Checkpoint
    alive = select(ck.id.label("id"), ck.parent_id.label("parent_id")).where(ck.state != "deleted")
    walk = alive.cte("rk_alive", recursive=True)
    parent = aliased(ck)
    walk = walk.union(select(parent.id, parent.parent_id).join(walk, parent.id == walk.c.parent_id))
    found: dict[int, list[str]] = defaultdict(list)
    for chunk in _chunks(ids):
        rows = session.execute(
            select(lm.CheckpointData.version_id, lm.Model.name, lm.Run.name, ck.name)
            .select_from(lm.CheckpointData)
            .join(ck, ck.id == lm.CheckpointData.checkpoint_id)
            .join(lm.Model, lm.Model.id == ck.model_id)
            .join(lm.Run, lm.Run.id == ck.run_id)
            .where(
                lm.CheckpointData.version_id.in_(chunk),
                ck.id.in_(select(walk.c.id)),
            )
            .distinct()
        )
        for vid, model, run, name in rows:
            found[vid].append(str(CheckpointRef(model, name, run)))
    return {vid: sorted(names) for vid, names in found.items()}


def _pins(session: Session, ids: Sequence[int]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = defaultdict(list)
    for chunk in _chunks(ids):
        for vid, label in session.execute(
            select(rm.RetentionPin.version_id, rm.RetentionPin.label).where(
                rm.RetentionPin.version_id.in_(chunk)
            )
        ):
            found[vid].append(label)
    return found


@dataclass(frozen=True, slots=True)
class _Row:
    id: int
    name: str
    dataset: str
    dataset_id: int
    number: int
    state: str
    committed_at: datetime.datetime
    claimed_by: str | None
    claimed_at: datetime.datetime | None
    storage_prefix: str
    shard_count: int


def _stored_versions(session: Session, dataset: str | None) -> tuple[list[_Row], int]:
    """Published versions whose data is stored (or being deleted), and how many were deleted."""
    base = (
        select(
            m.Version.id,
            m.Version.name,
            m.Dataset.name.label("dataset"),
            m.Version.dataset_id,
            m.Version.number,
            m.Version.state,
            func.coalesce(m.Version.committed_at, m.Version.created_at).label("committed_at"),
            m.Version.gc_claimed_by,
            m.Version.gc_claimed_at,
            m.Version.storage_prefix,
            m.Version.shard_count,
            m.Version.collected_at,
        )
        .join(m.Dataset, m.Dataset.id == m.Version.dataset_id)
        .where(m.Version.state.in_(PUBLISHED_STATES))
        .order_by(m.Dataset.name, m.Version.number)
    )
    if dataset is not None:
        base = base.where(m.Dataset.name == dataset)
    rows, deleted = [], 0
    for r in session.execute(base):
        if r.collected_at is not None:
            deleted += 1
            continue
        rows.append(
            _Row(
                r.id,
                r.name,
                r.dataset,
                r.dataset_id,
                r.number,
                r.state,
                r.committed_at,
                r.gc_claimed_by,
                r.gc_claimed_at,
                r.storage_prefix,
                r.shard_count,
            )
        )
    return rows, deleted


def _freed(
    session: Session, releasing: Sequence[int]
) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
    """Per releasing version: (objects, bytes) its deletion frees, each object attributed once
    (to the lowest version id referencing it), and how many of its shards a live version
    outside ``releasing`` keeps."""
    if not releasing:
        return {}, {}
    ids = sorted(releasing)
    params = {"rk_releasing": ids}
    shard = aliased(m.Shard)
    referenced = _other_live_reference(shard, ids)
    per_uri = (
        select(func.min(shard.version_id).label("vid"), func.max(shard.size).label("size"))
        .where(shard.version_id.in_(bindparam("rk_releasing", expanding=True)), ~referenced)
        .group_by(shard.uri)
        .subquery()
    )
    freed = {
        vid: (int(n), int(size or 0))
        for vid, n, size in session.execute(
            select(per_uri.c.vid, func.count(), func.sum(per_uri.c.size)).group_by(per_uri.c.vid),
            params,
        )
    }
    shared = {
        vid: int(n)
        for vid, n in session.execute(
            select(shard.version_id, func.count())
            .where(shard.version_id.in_(bindparam("rk_releasing", expanding=True)), referenced)
            .group_by(shard.version_id),
            params,
        )
    }
    return freed, shared


class RetentionRepository:
    """Retention policies, pins, plans and the claims that delete expired versions' data."""

    def __init__(self, db: Database, allowed_roots: AllowedRoots) -> None:
        self._db = db
        self._roots = allowed_roots

    # ------------------------------------------------------------------ policies

    @staticmethod
    def _scope(scope: str) -> str:
        if scope != DEFAULT_SCOPE:
            validate_dataset_name(scope)
        return scope

    def _policies(self, session: Session) -> dict[str, rm.RetentionPolicy]:
        return {row.scope: row for row in session.scalars(select(rm.RetentionPolicy))}

    def policy(self, scope: str) -> PolicyRecord:
        """The effective policy of a dataset (its own, else the default), or the default's."""
        scope = self._scope(scope)
        with self._db.transaction(write=False) as session:
            if scope != DEFAULT_SCOPE:
                dataset_row(session, scope)
            rows = self._policies(session)
        return self._effective(scope, rows)

    @staticmethod
    def _effective(scope: str, rows: dict[str, rm.RetentionPolicy]) -> PolicyRecord:
        for source, key in (("dataset", scope), ("default", DEFAULT_SCOPE)):
            if source == "dataset" and scope == DEFAULT_SCOPE:
                continue
            row = rows.get(key)
            if row is not None:
                return PolicyRecord(scope, _policy_of(row), source, row.updated_at, row.updated_by)
        return PolicyRecord(scope, None, "none")

    def policies(self) -> list[PolicyRecord]:
        """Every policy set, the default (``*``) first."""
        with self._db.transaction(write=False) as session:
            rows = self._policies(session)
        return [
            PolicyRecord(
                s,
                _policy_of(r),
                "default" if s == DEFAULT_SCOPE else "dataset",
                r.updated_at,
                r.updated_by,
            )
            for s, r in sorted(rows.items(), key=lambda kv: (kv[0] != DEFAULT_SCOPE, kv[0]))
        ]

    def set_policy(self, scope: str, policy: RetentionPolicy, *, actor: str) -> PolicyRecord:
        """Set (replace) the policy of ``scope``; audited."""
        scope = self._scope(scope)
        with self._db.transaction() as session:
            if scope != DEFAULT_SCOPE:
                dataset_row(session, scope)
            row = session.scalars(
                select(rm.RetentionPolicy)
                .where(rm.RetentionPolicy.scope == scope)
                .with_for_update()
            ).one_or_none()
            if row is None:
                row = rm.RetentionPolicy(scope=scope, updated_by=actor)
                session.add(row)
            for name, value in policy.to_json().items():
                setattr(row, name, value)
            row.updated_at, row.updated_by = m.utcnow(), actor
            record_event(
                session,
                actor,
                "retention.policy_set",
                dataset=None if scope == DEFAULT_SCOPE else scope,
                scope=scope,
                policy=policy.to_json(),
            )
            session.flush()
            return PolicyRecord(
                scope,
                policy,
                "default" if scope == DEFAULT_SCOPE else "dataset",
                row.updated_at,
                actor,
            )

    def delete_policy(self, scope: str, *, actor: str) -> None:
        """Remove the policy of ``scope`` (idempotent; audited when there was one)."""
        scope = self._scope(scope)
        with self._db.transaction() as session:
            row = session.scalars(
                select(rm.RetentionPolicy).where(rm.RetentionPolicy.scope == scope)
            ).one_or_none()
            if row is not None:
                session.delete(row)
                record_event(
                    session,
                    actor,
                    "retention.policy_deleted",
                    dataset=None if scope == DEFAULT_SCOPE else scope,
                    scope=scope,
                )

    # ------------------------------------------------------------------ pins

    def pin(self, refs: Sequence[str], label: str, *, actor: str) -> list[PinRecord]:
        """Pin the versions ``refs`` name under ``label`` (idempotent per version and label).

        A version whose data was deleted, or is being deleted, cannot be pinned.
        """
        label = validate_pin_label(label)
        if not refs:
            raise InvalidRequest("name at least one version to pin")
        out = []
        with self._db.transaction() as session:
            for text in refs:
                row = find_version(
                    session, parse_reference(text), published_only=True, for_update=True
                )
                ensure_data_stored(row)
                existing = session.scalars(
                    select(rm.RetentionPin).where(
                        rm.RetentionPin.version_id == row.id, rm.RetentionPin.label == label
                    )
                ).one_or_none()
                dataset = _dataset_name(session, row)
                if existing is None:
                    existing = rm.RetentionPin(version_id=row.id, label=label, created_by=actor)
                    session.add(existing)
                    session.flush()
                    record_event(
                        session,
                        actor,
                        "retention.pinned",
                        dataset=dataset,
                        version=row.name,
                        label=label,
                    )
                out.append(
                    PinRecord(label, row.name, dataset, existing.created_at, existing.created_by)
                )
        return out

    def unpin(self, label: str, *, actor: str) -> int:
        """Remove every pin called ``label``; how many there were."""
        label = validate_pin_label(label)
        with self._db.transaction() as session:
            rows = session.execute(
                select(rm.RetentionPin, m.Version.name)
                .join(m.Version, m.Version.id == rm.RetentionPin.version_id)
                .where(rm.RetentionPin.label == label)
            ).all()
            for pin, version in rows:
                session.delete(pin)
                record_event(session, actor, "retention.unpinned", version=version, label=label)
            return len(rows)

    def pins(self, *, dataset: str | None = None) -> list[PinRecord]:
        """Registered pins (of one dataset), by label then version."""
        with self._db.transaction(write=False) as session:
            stmt = (
                select(rm.RetentionPin, m.Version.name, m.Dataset.name)
                .join(m.Version, m.Version.id == rm.RetentionPin.version_id)
                .join(m.Dataset, m.Dataset.id == m.Version.dataset_id)
                .order_by(rm.RetentionPin.label, m.Version.name)
            )
            if dataset is not None:
                stmt = stmt.where(m.Dataset.name == dataset)
            return [
                PinRecord(pin.label, version, ds, pin.created_at, pin.created_by)
                for pin, version, ds in session.execute(stmt)
            ]

    # ------------------------------------------------------------------ plan

    def _decisions(
        self, session: Session, dataset: str | None, now: datetime.datetime
    ) -> tuple[list[_Row], dict[int, Decision], int]:
        if dataset is not None:
            validate_dataset_name(dataset)
            dataset_row(session, dataset)
        rows, deleted = _stored_versions(session, dataset)
        ids = [r.id for r in rows]
        aliases = _aliases(session, ids, {r.dataset_id for r in rows})
        trained = _trained(session, ids)
        pins = _pins(session, ids)
        policies = self._policies(session)
        by_dataset: dict[str, list[_Row]] = defaultdict(list)
        for r in rows:
            by_dataset[r.dataset].append(r)
        decisions: dict[int, Decision] = {}
        for name, members in by_dataset.items():
            policy = self._effective(name, policies).policy
            facts = [
                VersionFacts(
                    name=r.name,
                    number=r.number,
                    committed_at=r.committed_at,
                    aliases=tuple(aliases.get(r.id, ())),
                    trained=tuple(trained.get(r.id, ())),
                    pins=tuple(pins.get(r.id, ())),
                )
                for r in members
            ]
            for r, decision in zip(members, decide(policy, facts, now), strict=True):
                decisions[r.id] = decision
        return rows, decisions, deleted

    @staticmethod
    def _action(row: _Row, decision: Decision, force: bool) -> str:
        if row.claimed_at is not None:
            return "resume"
        if not decision.expires:
            return "keep"
        return "needs_force" if decision.needs_force and not force else "delete"

    def plan(self, dataset: str | None = None, *, force: bool = False) -> RetentionPlan:
        """What an apply would delete (with ``force``: also data checkpoints trained on), why
        each other version is kept, and the objects and bytes freed.  Changes nothing."""
        now = m.utcnow()
        with self._db.transaction(write=False) as session:
            rows, decisions, deleted = self._decisions(session, dataset, now)
            actions = {r.id: self._action(r, decisions[r.id], force) for r in rows}
            releasing = [vid for vid, a in actions.items() if a in ("delete", "resume")]
            freed, shared = _freed(session, releasing)
        items = []
        for r in rows:
            d = decisions[r.id]
            objects, size = freed.get(r.id, (0, 0))
            items.append(
                PlanItem(
                    name=r.name,
                    dataset=r.dataset,
                    number=r.number,
                    state=r.state,
                    action=actions[r.id],
                    kept_by=tuple(k.to_json() for k in d.kept_by),
                    trained=d.trained,
                    objects=objects,
                    bytes=size,
                    shared=shared.get(r.id, 0),
                    claimed_by=r.claimed_by,
                )
            )
        return RetentionPlan(dataset, force, tuple(items), deleted)

    # ------------------------------------------------------------------ apply

    def claim(
        self,
        *,
        actor: str,
        dataset: str | None = None,
        limit: int = MAX_CLAIMS,
        force: bool = False,
        reason: str | None = None,
        exclude: Collection[str] = (),
    ) -> list[RetentionClaim]:
        """Release up to ``limit`` expired versions to ``actor`` (admin at the route).

        First the caller's own unfinished claims (and anyone's older than the lease), then new
        ones, each re-checked under its row lock.  ``force`` (with ``reason``) also releases
        versions checkpoints trained on; the checkpoints and the reason go in the audit event.
        ``exclude``: names the caller already has in hand (this run).
        """
        if not 1 <= limit <= MAX_CLAIMS:
            raise InvalidRequest(f"limit must be between 1 and {MAX_CLAIMS}")
        if force:
            reason = validate_force_reason(reason)
        elif reason is not None:
            raise InvalidRequest("reason is given with force=true only")
        now = m.utcnow()
        stale = now - datetime.timedelta(seconds=CLAIM_LEASE)
        out: list[RetentionClaim] = []
        with self._db.transaction() as session:
            rows, decisions, _ = self._decisions(session, dataset, now)
            stored = self._policies(session)
            policies = {r.dataset: self._effective(r.dataset, stored).policy for r in rows}
            for r in rows:
                if len(out) >= limit:
                    break
                if r.name in exclude:
                    continue
                decision = decisions[r.id]
                action = self._action(r, decision, force)
                if action == "resume" and (r.claimed_by != actor and _aware(r.claimed_at) > stale):
                    continue
                if action not in ("delete", "resume"):
                    continue
                locked = session.scalars(
                    select(m.Version)
                    .where(
                        m.Version.id == r.id,
                        m.Version.state.in_(PUBLISHED_STATES),
                        m.Version.collected_at.is_(None),
                    )
                    # SKIP LOCKED, as gc's claim: a registration reading it FOR SHARE (the
                    # deletion rule) is never in a lock cycle with us; it is claimed next time.
                    .with_for_update(skip_locked=True)
                ).one_or_none()
                if locked is None or (action == "delete" and locked.gc_claimed_at is not None):
                    continue
                if action == "delete" and self._kept_now(session, r, policies.get(r.dataset)):
                    continue  # an alias, a pin or a checkpoint arrived since the plan
                previous = locked.gc_claimed_by
                locked.gc_claimed_by, locked.gc_claimed_at = actor, now
                detail: dict[str, Any] = {
                    "storage_prefix": locked.storage_prefix,
                    "expired": "no rule keeps it" if action == "delete" else "resumed",
                }
                if action == "resume" and previous != actor:
                    detail["taken_over_from"] = previous
                forced = bool(decision.trained) and action == "delete"
                if forced:
                    detail["force_reason"] = reason
                    detail["checkpoints"] = list(decision.trained[:50])
                    detail["checkpoint_count"] = len(decision.trained)
                record_event(
                    session,
                    actor,
                    "version.retention_claimed",
                    dataset=r.dataset,
                    version=r.name,
                    **detail,
                )
                out.append(
                    RetentionClaim(
                        name=r.name,
                        dataset=r.dataset,
                        storage_prefix=r.storage_prefix,
                        shard_count=r.shard_count,
                        claimed_by=actor,
                        claimed_at=now,
                        resumed=action == "resume",
                        forced=forced,
                    )
                )
            if any(not claim.resumed for claim in out):
                bump_epoch(session)  # lineage answers show these versions' data as deleting
            session.flush()
        return out

    @staticmethod
    def _kept_now(session: Session, row: _Row, policy: RetentionPolicy | None) -> bool:
        """Whether, read again under the version's row lock, an alias, a pin or (without
        force) a checkpoint keeps it: those may have been added since the plan was made.
        (Pins and aliases lock the row too, so they either came before this or see the
        release and are refused.)"""
        if policy is None:
            return True
        ids = [row.id]
        return bool(
            (policy.keep_aliased and _aliases(session, ids, {row.dataset_id}).get(row.id))
            or (policy.keep_pinned and _pins(session, ids).get(row.id))
            or (policy.keep_trained and _trained(session, ids).get(row.id))
        )

    def _claimed(self, session: Session, version_name: str, actor: str) -> m.Version:
        ref = parse_version_ref(version_name)
        row = find_version(session, ref, for_update=True)
        if row.state not in PUBLISHED_STATES or row.gc_claimed_by is None:
            raise Conflict(
                f"{row.name} is not released for deletion: claim it first (POST /retention/claims)",
                state=row.state,
            )
        if row.gc_claimed_by != actor:
            raise Conflict(
                f"{row.name} is claimed by {row.gc_claimed_by!r}; only the claimant deletes it",
                state=row.state,
                claimed_by=row.gc_claimed_by,
            )
        return row

    def deletable(
        self, version_name: str, uris: Sequence[str], *, actor: str
    ) -> tuple[list[str], list[dict[str, str]]]:
        """Which of ``uris`` (objects of a version claimed by ``actor``) may be deleted now;
        the others with the reason they are kept."""
        if len(uris) > MAX_URIS_PER_REQUEST:
            raise InvalidRequest(f"ask about at most {MAX_URIS_PER_REQUEST} objects per request")
        with self._db.transaction() as session:
            row = self._claimed(session, version_name, actor)
            wanted = sorted(set(uris))
            own: set[str] = set()
            for start in range(0, len(wanted), _CHUNK):
                own |= set(
                    session.scalars(
                        select(m.Shard.uri).where(
                            m.Shard.version_id == row.id,
                            m.Shard.uri.in_(wanted[start : start + _CHUNK]),
                        )
                    )
                )
            elsewhere = referenced_elsewhere(session, own, releasing={row.id})
            allowed, kept = [], []
            for uri in wanted:
                if uri not in own:
                    kept.append({"uri": uri, "reason": f"not an object of {row.name}"})
                elif uri in elsewhere:
                    kept.append({"uri": uri, "reason": "a live version references it"})
                elif not self._inside_roots(uri):
                    kept.append({"uri": uri, "reason": "outside the allowed roots"})
                else:
                    allowed.append(uri)
            return allowed, kept

    def _inside_roots(self, uri: str) -> bool:
        try:
            return self._roots.allows(uri)
        except UriError:
            return False

    def mark_deleted(
        self,
        version_name: str,
        *,
        actor: str,
        objects: int | None,
        size: int | None,
        kept: int | None = None,
    ) -> str:
        """Record that a claimed version's data was deleted (idempotent; claimant only).

        Its row, digests, schema, provenance and lineage stay; it reads as ``data deleted``.
        """
        with self._db.transaction() as session:
            ref = parse_version_ref(version_name)
            row = find_version(session, ref, for_update=True)
            if row.collected_at is not None and row.state in PUBLISHED_STATES:
                return row.name
            row = self._claimed(session, version_name, actor)
            row.collected_at, row.collected_reason = m.utcnow(), "retention"
            detail: dict[str, Any] = {"storage_prefix": row.storage_prefix}
            if drop_sample(session, row.id):  # its sample records go with the data
                detail["sample_dropped"] = True
            for key, value in (("objects", objects), ("bytes", size), ("kept_shared", kept)):
                if value is not None:
                    detail[key] = value
            record_event(
                session,
                actor,
                "version.data_deleted",
                dataset=ref.dataset,
                version=row.name,
                reason="retention",
                **detail,
            )
            bump_epoch(session)  # lineage answers show the version's data deleted
            session.flush()
            return row.name


def _aware(value: datetime.datetime | None) -> datetime.datetime:
    assert value is not None
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)


def _dataset_name(session: Session, row: m.Version) -> str:
    return str(session.scalar(select(m.Dataset.name).where(m.Dataset.id == row.dataset_id)))

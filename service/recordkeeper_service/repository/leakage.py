"""Leakage policies of datasets, leakage check results of versions, and the policy at commit.

The service never reads shards.  A client that commits a version of a dataset whose policy is
not ``off`` checks the staged version's splits from the record identities it computed (the
rule: :mod:`recordkeeper.core.leakage_policy`) and sends the result with the commit;
:func:`enforce_at_commit` (inside the commit's transaction) checks that the result covers every
pair the rule names with the split's record counts, then applies the policy: ``refuse`` raises
``split_overlap`` (or ``leakage_check_missing`` without a result) and the version stays staged;
``warn`` commits, records a ``version.leakage_warning`` event and answers the warning.  A
result that passes is stored as the version's (``source`` ``commit``).  ``recordkeeper
check-leakage`` saves its result too (``source`` ``check``, :meth:`LeakageRepository.save`).
A policy guards against mistakes, not against a client that sends a false result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from recordkeeper.core.errors import (
    InvalidRequest,
    LeakageCheckMissing,
    SplitOverlap,
)
from recordkeeper.core.leakage_policy import LeakagePolicy, leakage_pairs, policy_verdict
from recordkeeper.core.naming import validate_dataset_name
from recordkeeper.core.refs import PUBLISHED_STATES, parse_reference
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import iso_timestamp
from recordkeeper_service.repository.common import record_event
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.tables.leakage import LeakagePolicyRow, VersionLeakage

__all__ = ["LeakageRepository", "enforce_at_commit", "policy_of", "record_commit"]

#: pairs one result may hold (a version of many splits checked against several others)
MAX_PAIRS = 10_000


def _policy(row: LeakagePolicyRow | None) -> LeakagePolicy:
    if row is None:
        return LeakagePolicy()
    return LeakagePolicy(row.mode, row.max_rate)  # type: ignore[arg-type]


def policy_of(session: Session, dataset: str) -> LeakagePolicy:
    """The leakage policy of ``dataset`` (``off`` when none was set)."""
    return _policy(session.get(LeakagePolicyRow, dataset))


def _policy_json(dataset: str, row: LeakagePolicyRow | None) -> dict[str, Any]:
    policy = _policy(row)
    return {
        "dataset": dataset,
        **policy.to_dict(),
        "source": "default" if row is None else "dataset",
        "updated_at": None if row is None else iso_timestamp(row.updated_at),
        "updated_by": None if row is None else row.updated_by,
    }


def _pair_rows(session: Session, version_id: int) -> list[dict[str, Any]]:
    other = aliased(m.Version)
    rows = session.execute(
        select(VersionLeakage, other.name)
        .join(other, other.id == VersionLeakage.other_version_id)
        .where(VersionLeakage.version_id == version_id)
        .order_by(VersionLeakage.split, other.name, VersionLeakage.other_split)
    ).all()
    return [
        {
            "split": r.split,
            "other_ref": name,
            "other_split": r.other_split,
            "records": r.records,
            "leaked": r.leaked,
            "distinct": r.distinct_ids,
            "rate": r.leaked / r.records if r.records else 0.0,
            "kind": r.kind,
            "width": r.width,
            "source": r.source,
            "computed_at": iso_timestamp(r.computed_at),
            "computed_by": r.computed_by,
        }
        for r, name in rows
    ]


def _store(
    session: Session,
    version: m.Version,
    result: Mapping[str, Any],
    others: Mapping[str, int],
    *,
    source: str,
    actor: str,
) -> None:
    """Upsert the result's pairs as ``version``'s (``others``: other ref -> version id)."""
    existing = {
        (r.split, r.other_version_id, r.other_split): r
        for r in session.scalars(
            select(VersionLeakage).where(VersionLeakage.version_id == version.id)
        )
    }
    now = m.utcnow()
    for p in result["pairs"]:
        key = (p["split"], others[p["other_ref"]], p["other_split"])
        row = existing.get(key)
        if row is None:
            row = VersionLeakage(
                version_id=version.id,
                split=key[0],
                other_version_id=key[1],
                other_split=key[2],
            )
            session.add(row)
            existing[key] = row
        row.records, row.leaked, row.distinct_ids = p["records"], p["leaked"], p["distinct"]
        row.kind, row.width = result["kind"], result["width"]
        row.source, row.computed_at, row.computed_by = source, now, actor
    session.flush()


def _split_records(session: Session, version_id: int) -> dict[str, int]:
    return {
        split: int(n or 0)
        for split, n in session.execute(
            select(m.Shard.split, func.sum(m.Shard.record_count))
            .where(m.Shard.version_id == version_id)
            .group_by(m.Shard.split)
        )
    }


def _check_records(
    name: str, pairs: Sequence[Mapping[str, Any]], records: Mapping[str, int]
) -> None:
    for p in pairs:
        if p["split"] not in records:
            raise InvalidRequest(f"the leakage result names split {p['split']!r}, not in {name}")
        if p["records"] != records[p["split"]]:
            raise InvalidRequest(
                f"the leakage result counts {p['records']} records in {name}:{p['split']}, "
                f"which holds {records[p['split']]}: it was not computed from these shards"
            )
        if p["leaked"] > p["records"] or p["distinct"] > p["leaked"]:
            raise InvalidRequest(
                f"the leakage result of {name}:{p['split']} is inconsistent "
                "(leaked ≤ records and distinct ≤ leaked)"
            )


def enforce_at_commit(
    session: Session,
    version: m.Version,
    dataset: str,
    split_records: Mapping[str, int],
    result: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """Apply ``dataset``'s leakage policy to the commit of staged ``version`` (its splits'
    record counts ``split_records``; ``result``: the check the client sent, or None), before
    anything else is decided about it (a duplicate of a committed version included).

    Raises :class:`SplitOverlap` / :class:`LeakageCheckMissing` under ``refuse``; answers the
    warning (``{"mode", "max_rate", "missing", "pairs"}``) under ``warn``, else None.  A result
    is checked against the rule's pairs and the record counts first.  :func:`record_commit`
    stores it once the version is committed."""
    policy = policy_of(session, dataset)
    names = {n for n in (version.name, version.staged_name) if n is not None}
    pairs: list[dict[str, Any]] | None = None
    if result is not None:
        pairs = list(result["pairs"])
        wanted = {(e[1], o[1]) for e, o in leakage_pairs(version.name, split_records)}
        got = {(p["split"], p["other_split"]) for p in pairs}
        foreign = sorted({p["other_ref"] for p in pairs} - names)
        if foreign:
            raise InvalidRequest(
                f"a commit's leakage result compares {version.name} with its own splits only, "
                f"not with {', '.join(foreign)}"
            )
        if got != wanted or len(pairs) != len(wanted):
            raise InvalidRequest(
                f"the leakage result does not cover the split pairs of {version.name} "
                f"(expected {sorted(wanted)}, got {sorted(got)})"
            )
        _check_records(version.name, pairs, split_records)
    verdict, over = policy_verdict(policy, pairs)
    shown = [
        {k: p[k] for k in ("split", "other_split", "records", "leaked", "distinct", "rate")}
        | {"other_ref": version.name}
        for p in over
    ]
    listed = "; ".join(
        f"{p['split']} in {p['other_split']}: {p['leaked']}/{p['records']} records "
        f"({p['rate']:.2%}), {p['distinct']} distinct"
        for p in shown
    )
    if verdict == "refuse":
        raise SplitOverlap(
            f"{version.name} was not committed: the leakage policy of {dataset} refuses "
            f"splits that overlap above {policy.max_rate:.2%} ({listed}): remove the shared "
            "records and write it again, or change the policy",
            version=version.name,
            max_rate=policy.max_rate,
            pairs=shown,
        )
    if verdict == "missing_refuse":
        raise LeakageCheckMissing(
            f"{version.name} was not committed: the leakage policy of {dataset} is refuse and "
            "the commit carries no leakage check. Write or publish it with record identity on "
            "(record_index=True, the default of client.writer, publish, derive and plan_write; "
            "not --no-record-index) with a client that checks splits before committing — a "
            "derivation needs a base with record identity: `recordkeeper index BASE` first — "
            "or set the dataset's policy to warn or off (recordkeeper leakage-policy)",
            version=version.name,
        )
    if verdict == "warn":
        return {"mode": policy.mode, "max_rate": policy.max_rate, "missing": False, "pairs": shown}
    if verdict == "missing_warn":
        return {"mode": policy.mode, "max_rate": policy.max_rate, "missing": True, "pairs": []}
    return None


def record_commit(
    session: Session,
    actor: str,
    dataset: str,
    version: m.Version,
    result: Mapping[str, Any] | None,
    warning: dict[str, Any] | None,
) -> dict[str, Any] | None:
    """Once ``version`` is committed (under its committed name): store the commit's leakage
    result as the version's (``source`` ``commit``) and record a ``warn`` policy's
    ``version.leakage_warning`` event; the warning, its pairs naming the committed version."""
    if result is not None:
        names = {n for n in (version.name, version.staged_name) if n is not None}
        _store(
            session, version, result, dict.fromkeys(names, version.id), source="commit", actor=actor
        )
    if warning is None:
        return None
    for pair in warning["pairs"]:
        pair["other_ref"] = version.name
    record_event(
        session, actor, "version.leakage_warning", dataset=dataset, version=version.name, **warning
    )
    return warning


class LeakageRepository:
    """Leakage policies and results; one transaction per call."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def policy(self, dataset: str) -> dict[str, Any]:
        """The leakage policy of ``dataset`` (``source`` ``default``: none set, ``off``)."""
        validate_dataset_name(dataset)
        with self._db.transaction(write=False) as session:
            return _policy_json(dataset, session.get(LeakagePolicyRow, dataset))

    def set_policy(self, dataset: str, *, mode: str, max_rate: float, actor: str) -> dict[str, Any]:
        """Set (replace) the leakage policy of ``dataset`` (it need not exist yet)."""
        validate_dataset_name(dataset)
        policy = LeakagePolicy(mode, max_rate)  # type: ignore[arg-type]
        with self._db.transaction() as session:
            row = session.get(LeakagePolicyRow, dataset)
            if row is None:
                row = LeakagePolicyRow(dataset=dataset)
                session.add(row)
            row.mode, row.max_rate = policy.mode, float(policy.max_rate)
            row.updated_at, row.updated_by = m.utcnow(), actor
            session.flush()
            record_event(
                session, actor, "dataset.leakage_policy", dataset=dataset, **policy.to_dict()
            )
            return _policy_json(dataset, row)

    def of_version(self, ref_text: str) -> dict[str, Any]:
        """The leakage check results stored for a version (``data`` empty: none)."""
        ref = parse_reference(ref_text)
        with self._db.transaction(write=False) as session:
            version = find_version(session, ref)
            data = _pair_rows(session, version.id)
            return {"version": version.name, "data": data, "count": len(data)}

    def save(self, ref_text: str, result: Mapping[str, Any], *, actor: str) -> dict[str, Any]:
        """Store a leakage check of a committed version (``recordkeeper check-leakage``):
        its pairs replace the stored pairs of the same splits and other versions."""
        ref = parse_reference(ref_text)
        if len(result["pairs"]) > MAX_PAIRS:
            raise InvalidRequest(f"a leakage result holds at most {MAX_PAIRS} pairs")
        with self._db.transaction() as session:
            version = find_version(session, ref)
            if version.state not in PUBLISHED_STATES:
                raise InvalidRequest(
                    f"{version.name} is {version.state}: a staged version's check is sent "
                    "with its commit"
                )
            _check_records(version.name, result["pairs"], _split_records(session, version.id))
            others: dict[str, int] = {}
            for p in result["pairs"]:
                other = p["other_ref"]
                if other not in others:
                    others[other] = find_version(session, parse_reference(other)).id
            _store(session, version, result, others, source="check", actor=actor)
            data = _pair_rows(session, version.id)
            return {"version": version.name, "data": data, "count": len(data)}

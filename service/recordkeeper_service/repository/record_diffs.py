"""Stored record diffs: keep the summary of a record diff a client computed, answer it.

The service never reads storage.  A client computes the record diff of versions A → B from their
per-shard record indexes (``recordkeeper diff A B --records``) and sends its summary
(:mod:`recordkeeper.core.record_diff_summary`).  The repository checks it with the core rule and
against what the registry knows of both versions: both committed (or deprecated) and given
record identity of the diff's kind and width; the diff's splits exactly the union of their
splits, each side's record count per split the version's own; and a split whose set digests are
equal in A and B shows no change, one whose digests differ shows one.  One row per pair and
identity; recording again replaces it (an audit event records who did, and when).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from recordkeeper.core.errors import InvalidRecordDiff, VersionNotFound
from recordkeeper.core.record_diff_summary import validate_record_diff
from recordkeeper.core.refs import PUBLISHED_STATES, parse_reference
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import iso_timestamp
from recordkeeper_service.repository.common import record_event
from recordkeeper_service.repository.record_sets import record_set_of, split_record_counts
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.tables.record_diffs import VersionRecordDiff

__all__ = ["RecordDiffRepository"]


def _to_json(row: VersionRecordDiff, a: m.Version, b: m.Version) -> dict[str, Any]:
    splits = row.document["splits"]
    return {
        "a": a.name,
        "b": b.name,
        "kind": row.kind,
        "width": row.width,
        "identical": not any(s["added"] or s["removed"] for s in splits),
        "new": row.document["new"],
        "gone": row.document["gone"],
        "splits": splits,
        "recorded_at": iso_timestamp(row.recorded_at),
        "recorded_by": row.recorded_by,
    }


def _published(session: Session, ref_text: str, *, for_update: bool = False) -> m.Version:
    version = find_version(session, parse_reference(ref_text), for_update=for_update)
    if version.state not in PUBLISHED_STATES:
        raise VersionNotFound(
            f"{version.name} is {version.state}: only committed versions have record diffs"
        )
    return version


def _split_digests(session: Session, version: m.Version, kind: str, width: int) -> dict[str, str]:
    row = record_set_of(session, version.id, kind, width)
    if row is None:
        raise InvalidRecordDiff(
            f"{version.name} has no {kind}/{width} record identity: a record diff is computed "
            f"from indexed versions (`recordkeeper index {version.name}`)"
        )
    return {split: entry["digest"] for split, entry in row.splits.items()}


def _check_against(
    document: dict[str, Any],
    counts: tuple[dict[str, int], dict[str, int]],
    digests: tuple[dict[str, str], dict[str, str]],
    names: tuple[str, str],
) -> None:
    """The diff agrees with what the registry knows of both versions."""
    (count_a, count_b), (digest_a, digest_b) = counts, digests
    expected = set(count_a) | set(count_b)
    given = {s["split"] for s in document["splits"]}
    if given != expected:
        want, got = (", ".join(sorted(x)) or "none" for x in (expected, given))
        raise InvalidRecordDiff(
            f"a record diff of {names[0]} → {names[1]} covers the splits {want}; this one {got}"
        )
    for s in document["splits"]:
        split = s["split"]
        for side, count, name in (("a", count_a, names[0]), ("b", count_b, names[1])):
            if s[f"records_{side}"] != count.get(split, 0):
                raise InvalidRecordDiff(
                    f"{split}: records_{side} is {s[f'records_{side}']}, but {name} holds "
                    f"{count.get(split, 0)} records in {split}"
                )
        if split in digest_a and split in digest_b:
            same = digest_a[split] == digest_b[split]
            if same == bool(s["added"] or s["removed"]):
                raise InvalidRecordDiff(
                    f"{split}: the split set digests of {names[0]} and {names[1]} are "
                    f"{'equal' if same else 'different'}, but the diff shows "
                    f"{'a change' if same else 'none'}"
                )


class RecordDiffRepository:
    """Stored record diff rows; one transaction per call."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def record(self, a_ref: str, b_ref: str, document: Any, *, actor: str) -> dict[str, Any]:
        """Store the record diff summary ``document`` of the committed versions A → B."""
        checked = validate_record_diff(document)
        kind, width = checked["kind"], checked["width"]
        with self._db.transaction() as session:
            # A's row locked: two clients storing the same pair at once replace, never collide
            a = _published(session, a_ref, for_update=True)
            b = _published(session, b_ref)
            _check_against(
                checked,
                (split_record_counts(session, a.id), split_record_counts(session, b.id)),
                (
                    _split_digests(session, a, kind, width),
                    _split_digests(session, b, kind, width),
                ),
                (a.name, b.name),
            )
            row = session.scalars(
                select(VersionRecordDiff).where(
                    VersionRecordDiff.version_a_id == a.id,
                    VersionRecordDiff.version_b_id == b.id,
                    VersionRecordDiff.kind == kind,
                    VersionRecordDiff.width == width,
                )
            ).one_or_none()
            if row is None:
                row = VersionRecordDiff(
                    version_a_id=a.id, version_b_id=b.id, kind=kind, width=width
                )
                session.add(row)
            row.document = {k: checked[k] for k in ("new", "gone", "splits")}
            row.recorded_by = actor
            row.recorded_at = m.utcnow()
            session.flush()
            record_event(
                session,
                actor,
                "version.record_diff",
                dataset=parse_reference(b_ref).dataset,
                version=b.name,
                base=a.name,
                kind=kind,
                width=width,
            )
            return _to_json(row, a, b)

    def of_pair(self, a_ref: str, b_ref: str) -> list[dict[str, Any]]:
        """The record diffs stored for A → B, one per identity kind and width (none: not
        computed with a token allowed to write yet)."""
        with self._db.transaction(write=False) as session:
            a = find_version(session, parse_reference(a_ref))
            b = find_version(session, parse_reference(b_ref))
            rows = session.scalars(
                select(VersionRecordDiff)
                .where(
                    VersionRecordDiff.version_a_id == a.id,
                    VersionRecordDiff.version_b_id == b.id,
                )
                .order_by(VersionRecordDiff.kind, VersionRecordDiff.width)
            )
            return [_to_json(row, a, b) for row in rows]

"""The rows a diff needs when one version is derived from the other: only those after the
positions both hold alike.

A derived version's commit copies its base's kept rows (:mod:`.derive`) and records, per split,
its :attr:`~recordkeeper.core.derive.SplitPlan.base_prefix` in ``version_splits``: the leading
positions holding the base's very rows at the same index.  Under the diff rule
(:mod:`recordkeeper.core.diff`) such positions are unchanged whatever the others hold and never
take part in a shift, so a diff of the pair reads each split from its prefix on — the 10 shards
appended to a 100,000-shard split, not the 100,010 — and its per-split counts from
``version_splits``.  Along a chain of derivations (``v2`` → ``v3`` → ``v4``) the positions both
ends hold alike are the smallest prefix of the links between them.

Versions committed before ``version_splits`` had prefixes (or with a base more than
:data:`MAX_DERIVATION_HOPS` links away) answer None here: the caller compares both versions'
rows, as for any other pair.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from recordkeeper_service import tables as m
from recordkeeper_service.domain import ShardRecord
from recordkeeper_service.repository.convert import SHARD_COLUMNS, shard_records
from recordkeeper_service.tables.version_splits import VersionSplit

__all__ = ["MAX_DERIVATION_HOPS", "common_prefixes", "shards_after", "split_totals"]

#: Most ``base`` links followed from one version towards the other.
MAX_DERIVATION_HOPS = 64

#: Split names per ``IN`` list when whole splits are read.
_SPLITS_PER_QUERY = 500


def _prefixes_of(session: Session, version_id: int) -> dict[str, int] | None:
    """The derived version's ``{split: base_prefix}``; None when any is unknown."""
    rows = session.execute(
        select(VersionSplit.split, VersionSplit.base_prefix).where(
            VersionSplit.version_id == version_id
        )
    ).all()
    prefixes = {split: prefix for split, prefix in rows if prefix is not None}
    if not rows or len(prefixes) < len(rows):
        return None
    return prefixes


def common_prefixes(session: Session, a_id: int, b_id: int) -> dict[str, int] | None:
    """``{split: n}``: the first ``n`` positions of each split hold the same rows in both
    versions, when one is derived from the other through ``base`` links (in either order);
    None when they are not, or a link's prefixes are unknown.  A base is always committed
    before its derived version is staged, so it has the smaller id: the walk starts from the
    larger one and stops below the other."""
    descendant, ancestor = max(a_id, b_id), min(a_id, b_id)
    prefixes: dict[str, int] | None = None
    current = descendant
    for _ in range(MAX_DERIVATION_HOPS):
        base = session.scalar(select(m.Version.base_version_id).where(m.Version.id == current))
        if base is None or base < ancestor:
            return None
        link = _prefixes_of(session, current)
        if link is None:
            return None
        # the descendant's split s holds the rows of this link's split s up to the link's
        # prefix; beyond the first link, the descendant's own splits are what is compared
        prefixes = (
            link
            if prefixes is None
            else {split: min(n, link.get(split, 0)) for split, n in prefixes.items()}
        )
        if base == ancestor:
            return prefixes
        current = base
    return None


def split_totals(session: Session, version_id: int) -> dict[str, tuple[int, int]] | None:
    """``{split: (records, shards)}`` of a committed version from ``version_splits``; None when
    it has no rows there (not committed)."""
    rows = session.execute(
        select(VersionSplit.split, VersionSplit.record_count, VersionSplit.shard_count).where(
            VersionSplit.version_id == version_id
        )
    ).all()
    if not rows:
        return None
    return {split: (int(records), int(shards)) for split, records, shards in rows}


def shards_after(
    session: Session, version_id: int, starts: Mapping[str, int]
) -> tuple[ShardRecord, ...]:
    """The version's shards of each split in ``starts`` at positions from ``starts[split]`` on,
    in ``(split, index)`` order (the unique ``(version_id, split, index)`` index reads only
    those)."""
    whole = sorted(split for split, start in starts.items() if start <= 0)
    out: list[ShardRecord] = []
    for lo in range(0, len(whole), _SPLITS_PER_QUERY):
        out.extend(
            _rows(
                session,
                m.Shard.version_id == version_id,
                m.Shard.split.in_(whole[lo : lo + _SPLITS_PER_QUERY]),
            )
        )
    for split, start in starts.items():
        if start > 0:
            out.extend(
                _rows(
                    session,
                    m.Shard.version_id == version_id,
                    m.Shard.split == split,
                    m.Shard.index >= start,
                )
            )
    out.sort(key=lambda shard: (shard.split, shard.index))
    return tuple(out)


def _rows(session: Session, *where: ColumnElement[bool]) -> tuple[ShardRecord, ...]:
    stmt = select(*SHARD_COLUMNS).where(*where).order_by(m.Shard.split, m.Shard.index)
    return shard_records(session.execute(stmt))

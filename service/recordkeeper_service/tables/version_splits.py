"""Per-split totals of committed versions: ``version_splits``.

One row per split of a version, written by its commit (:mod:`..repository.commit`) from the
one read of its rows commit makes anyway: shard and record counts and bytes, so that the split
counts of a version (a diff's per-split answer) never sum its shard rows again.

``base_prefix`` is set for the splits of a *derived* version (staged with ``base``, its kept
rows copied from the base at commit, :mod:`..repository.derive`): how many leading positions of
the split hold the very rows of the base's split of the same name, at the same index (0 for a
split renamed or new).  A diff of a version and one derived from it reads only the positions
after these (:mod:`..repository.derived_diff`).  None: not a derived version, or committed
before this table (revision a7c3e5d9b1f2 filled the totals of those, not the prefixes).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from recordkeeper_service.tables import Base

__all__ = ["VersionSplit"]


class VersionSplit(Base):
    """One split of a committed version: its totals and, derived, its prefix kept from the base."""

    __tablename__ = "version_splits"

    version_id: Mapped[int] = mapped_column(
        ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True
    )
    split: Mapped[str] = mapped_column(String(64), primary_key=True)
    shard_count: Mapped[int] = mapped_column(Integer)
    record_count: Mapped[int] = mapped_column(BigInteger)
    size: Mapped[int] = mapped_column(BigInteger)
    base_prefix: Mapped[int | None] = mapped_column(Integer)

"""Stored record diffs: ``version_record_diffs``.

One row per pair of committed versions (A → B, in that direction) and identity (kind, width):
the summary of the record diff a client computed from the two versions' record indexes
(:mod:`recordkeeper.core.record_diff_summary`: per split the records on each side, added,
removed, common, moved, duplicates and a few identities), who recorded it and when.  The
service never reads storage: it keeps what ``recordkeeper diff A B --records`` computed, after
checking it against both versions' record counts and split set digests, so the UI's compare
page can show it.  Computing it again replaces the row.
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from recordkeeper_service.tables import Base, BigId, utcnow

__all__ = ["VersionRecordDiff"]


class VersionRecordDiff(Base):
    """The stored record diff summary of versions A → B for one identity kind and width."""

    __tablename__ = "version_record_diffs"
    __table_args__ = (
        UniqueConstraint("version_a_id", "version_b_id", "kind", "width"),
        Index(None, "version_b_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    version_a_id: Mapped[int] = mapped_column(ForeignKey("versions.id", ondelete="CASCADE"))
    version_b_id: Mapped[int] = mapped_column(ForeignKey("versions.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))
    width: Mapped[int] = mapped_column(Integer)
    #: ``{"new": n, "gone": n, "splits": [...]}`` (validated, bounded: at most 256 splits of
    #: 10 identities per sample list)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    recorded_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    recorded_by: Mapped[str] = mapped_column(String(128))

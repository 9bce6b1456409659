"""How much of its data a checkpoint's segment consumed: ``checkpoint_consumption``.

One row per (checkpoint, version, role) whose registration said how many records that segment
read from that version in that role (``records``: records, or steps * batch size, counting
every time a record was read again — so more than the split's size means more than one
epoch).  A segment registered without a count has no row: its share is unknown, never
assumed.  Epochs are computed when asked: ``records`` over the records of the splits the
segment used (``checkpoint_data``, shard record counts), so they are never stored twice.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from recordkeeper_service.tables import Base

__all__ = ["CheckpointConsumption"]


class CheckpointConsumption(Base):
    """Records the segment ending at ``checkpoint_id`` read from ``version_id`` as ``role``."""

    __tablename__ = "checkpoint_consumption"
    __table_args__ = (CheckConstraint("records >= 0", name="records_not_negative"),)

    checkpoint_id: Mapped[int] = mapped_column(
        ForeignKey("checkpoints.id", ondelete="CASCADE"), primary_key=True
    )
    version_id: Mapped[int] = mapped_column(ForeignKey("versions.id"), primary_key=True)
    role: Mapped[str] = mapped_column(String(8), primary_key=True)
    records: Mapped[int] = mapped_column(BigInteger)

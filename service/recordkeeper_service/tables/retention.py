"""Retention tables: ``retention_policies`` and ``retention_pins``.

A policy row per scope: a dataset's name, or ``*`` for the service-wide default a dataset
without its own falls back to (:mod:`recordkeeper.core.retention` holds the rules).  A pin keeps
one version whatever its dataset's policy says (while the policy keeps pinned versions): the
service's record of the lock files and releases that need a version's data, registered with
``POST /retention/pins`` (``recordkeeper retention pin LOCKFILE``).

A version whose storage retention deleted keeps its row: ``versions.collected_at`` says when
and ``versions.collected_reason`` says by what (``retention``; ``gc`` for staged storage).
"""

from __future__ import annotations

import datetime

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from recordkeeper.core.retention import MAX_PIN_LABEL_LENGTH
from recordkeeper_service.tables import Base, BigId, utcnow

__all__ = ["RetentionPin", "RetentionPolicy"]


class RetentionPolicy(Base):
    """What retention keeps in one scope (a dataset, or ``*``: the service-wide default)."""

    __tablename__ = "retention_policies"
    __table_args__ = (UniqueConstraint("scope"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    scope: Mapped[str] = mapped_column(String(64))
    keep_last: Mapped[int | None] = mapped_column(Integer)
    keep_days: Mapped[int | None] = mapped_column(Integer)
    keep_aliased: Mapped[bool] = mapped_column(Boolean, default=True)
    keep_trained: Mapped[bool] = mapped_column(Boolean, default=True)
    keep_pinned: Mapped[bool] = mapped_column(Boolean, default=True)
    updated_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(128))


class RetentionPin(Base):
    """A registered need for one version's data: ``label`` names who needs it (a lock file)."""

    __tablename__ = "retention_pins"
    __table_args__ = (UniqueConstraint("version_id", "label"), Index(None, "label"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("versions.id", ondelete="CASCADE"))
    label: Mapped[str] = mapped_column(String(MAX_PIN_LABEL_LENGTH))
    created_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))

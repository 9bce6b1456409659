"""Leakage tables: ``leakage_policies`` and ``version_leakage``.

A policy row per dataset (by name, so a policy may be set before the dataset's first version):
``mode`` (``warn`` or ``refuse``; a dataset without a row, or with ``off``, is not checked) and
the leak rate tolerated per split pair (:mod:`recordkeeper.core.leakage_policy`).

``version_leakage`` keeps the leakage check results clients sent — with a commit under a policy,
or saved by ``recordkeeper check-leakage`` — one row per pair (evaluation split of the version,
other version and split), the newest result per pair.  The service never reads shards: a row is
what the client computed from the record identities it had.
"""

from __future__ import annotations

import datetime

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from recordkeeper_service.tables import Base, BigId, utcnow

__all__ = ["LeakagePolicyRow", "VersionLeakage"]


class LeakagePolicyRow(Base):
    """The leakage policy of one dataset (by name)."""

    __tablename__ = "leakage_policies"

    dataset: Mapped[str] = mapped_column(String(64), primary_key=True)
    mode: Mapped[str] = mapped_column(String(16))
    max_rate: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(128))


class VersionLeakage(Base):
    """One pair of a version's leakage check: records of evaluation split ``split`` found in
    ``other_split`` of the other version (the version itself for its own splits)."""

    __tablename__ = "version_leakage"
    __table_args__ = (
        UniqueConstraint("version_id", "split", "other_version_id", "other_split"),
        Index(None, "other_version_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("versions.id", ondelete="CASCADE"))
    split: Mapped[str] = mapped_column(String(64))
    other_version_id: Mapped[int] = mapped_column(ForeignKey("versions.id", ondelete="CASCADE"))
    other_split: Mapped[str] = mapped_column(String(64))
    records: Mapped[int] = mapped_column(BigInteger)
    leaked: Mapped[int] = mapped_column(BigInteger)
    #: distinct identities shared (not `distinct`: an SQL keyword)
    distinct_ids: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(16))
    width: Mapped[int] = mapped_column(Integer)
    #: ``commit`` (sent with the commit under a policy) or ``check`` (``check-leakage``)
    source: Mapped[str] = mapped_column(String(16))
    computed_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    computed_by: Mapped[str] = mapped_column(String(128))

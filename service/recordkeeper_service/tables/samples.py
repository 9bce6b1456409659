"""Sample records of versions: ``version_samples``.

One row per version: the first few records of each split, decoded for people to read
(:mod:`recordkeeper.core.record_sample`), as the publisher recorded them.  The service never
reads shards: the client that wrote or published the version sends the sample (or attaches one
later, ``recordkeeper head REF --record-sample``); the records it describes are immutable, so a
row may be written after commit and replaced.
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from recordkeeper_service.tables import Base, BigId, utcnow

__all__ = ["VersionSample"]


class VersionSample(Base):
    """The sample records document of one version."""

    __tablename__ = "version_samples"

    version_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True
    )
    #: ``{"splits": [{"split": "train", "records": [...]}]}`` (validated, at most 32 KiB)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: ``publish`` (sent by the publishing client) or ``attach`` (added after commit)
    source: Mapped[str] = mapped_column(String(16))
    recorded_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    recorded_by: Mapped[str] = mapped_column(String(128))

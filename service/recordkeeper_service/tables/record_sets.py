"""Record identity of versions: ``version_record_sets``.

One row per version and identity (kind, width): the version's record digest (the order- and
sharding-invariant digest of its records, :mod:`recordkeeper.core.record_index`), its record
count, each split's record count and set digest, and where its per-shard record indexes are.
A row says "this version has record identity"; ``records_digest`` answers "is there already a
version with exactly these records?" (indexed).  The service never reads shards: a client that
indexed the version (``recordkeeper index REF``) registers the split digests, and the service
checks them against the version's own per-split record counts and computes the version digest.
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from recordkeeper_service.tables import DIGEST_LENGTH, Base, BigId, utcnow

__all__ = ["VersionRecordSet"]


class VersionRecordSet(Base):
    """The record identity registered for one version, kind and width."""

    __tablename__ = "version_record_sets"
    __table_args__ = (
        UniqueConstraint("version_id", "kind", "width"),
        Index(None, "records_digest"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("versions.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))
    width: Mapped[int] = mapped_column(Integer)
    index_format: Mapped[int] = mapped_column(Integer)
    records_digest: Mapped[str] = mapped_column(String(DIGEST_LENGTH))
    record_count: Mapped[int] = mapped_column(BigInteger)
    #: ``{split: {"records": n, "digest": "sha256:…"}}``
    splits: Mapped[dict[str, Any]] = mapped_column(JSON)
    index_location: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))

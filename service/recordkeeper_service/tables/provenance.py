"""Provenance tables: ``version_provenance``, ``version_parents`` and ``version_sources``.

A version's provenance (:mod:`recordkeeper.core.provenance`) is written when it is staged,
may be replaced while it is staged, and never changes after its commit.

* ``version_provenance`` holds the whole document as answered (parents by name and role,
  sources with their identity, producer, canonical params and their digest, command,
  environment, note): reading a version's provenance is one row.
* ``version_parents`` repeats the parents as rows (child, parent, role, position) so that "the
  children of a version" is an index lookup (``ix_version_parents_parent_id``).
* ``version_sources`` repeats the sources (version, position, uri, identity digest) so that
  "the versions made from a source URI" is one too (``ix_version_sources_uri``; URIs are at
  most 2 KiB of UTF-8, within a PostgreSQL btree entry).
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from recordkeeper_service.tables import DIGEST_LENGTH, Base, utcnow

__all__ = ["VersionParent", "VersionProvenance", "VersionSource"]


class VersionProvenance(Base):
    """The provenance document of one version (``document`` is what the API answers)."""

    __tablename__ = "version_provenance"
    __table_args__ = (Index(None, "params_digest"), Index(None, "producer_commit"))

    version_id: Mapped[int] = mapped_column(
        ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True
    )
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    params_digest: Mapped[str | None] = mapped_column(String(DIGEST_LENGTH))
    producer_commit: Mapped[str | None] = mapped_column(String(64))
    recorded_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    recorded_by: Mapped[str] = mapped_column(String(128))


class VersionParent(Base):
    """One parent of a version: a registered version it was derived from, with a role."""

    __tablename__ = "version_parents"
    __table_args__ = (Index(None, "parent_id"),)

    version_id: Mapped[int] = mapped_column(
        ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    parent_id: Mapped[int] = mapped_column(ForeignKey("versions.id"))
    role: Mapped[str] = mapped_column(String(32))


class VersionSource(Base):
    """One source of a version outside the registry: a URI and its content identity."""

    __tablename__ = "version_sources"
    __table_args__ = (Index(None, "uri"),)

    version_id: Mapped[int] = mapped_column(
        ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    uri: Mapped[str] = mapped_column(Text)
    identity_digest: Mapped[str | None] = mapped_column(String(DIGEST_LENGTH))

"""SQLAlchemy 2 ORM models of the registry.

One :class:`Base` (and so one ``MetaData``) for the whole service: modules that add tables later
(:mod:`.lineage`: models, runs, checkpoints) subclass this ``Base`` so Alembic sees one schema.
Every constraint and index is named through :data:`NAMING_CONVENTION`, so migrations can refer to
them by name on SQLite and PostgreSQL alike.

Rows are converted to domain records explicitly in
:mod:`recordkeeper_service.repository.convert`; routes never see these classes.
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from recordkeeper.core.digests import DIGEST_PREFIX
from recordkeeper.core.lifecycle import VERSION_STATES
from recordkeeper.core.shards import COMPRESSIONS, RECORD_FORMATS

__all__ = [
    "NAMING_CONVENTION",
    "SCOPES",
    "VERSION_STATES",
    "Alias",
    "AliasHistory",
    "ApiToken",
    "AuditEvent",
    "Base",
    "Dataset",
    "SchemaBlob",
    "Shard",
    "Version",
    "utcnow",
]

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

SCOPES: tuple[str, ...] = ("read", "write", "admin")

#: 64-bit ids on PostgreSQL; SQLite only auto-increments ``INTEGER PRIMARY KEY``.
BigId = BigInteger().with_variant(Integer(), "sqlite")
#: UTC timestamps (SQLite stores them naive; conversion re-attaches UTC).
Timestamp = DateTime(timezone=True)
DIGEST_LENGTH = len(DIGEST_PREFIX) + 64  # 71


def utcnow() -> datetime.datetime:
    """The current time, timezone-aware UTC."""
    return datetime.datetime.now(datetime.UTC)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    """Declarative base of every registry table."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: dict[Any, Any] = {  # noqa: RUF012 (SQLAlchemy API)
        dict[str, Any]: JSON,
        datetime.datetime: Timestamp,
    }


class Dataset(Base):
    """A named family of versions.

    ``next_number`` allocates version numbers atomically when versions are committed;
    ``next_stage`` numbers the stagings (``…_staged{K}``), so a staging that never commits, or
    commits as a duplicate, consumes no version number.
    """

    __tablename__ = "datasets"
    __table_args__ = (
        UniqueConstraint("name"),
        CheckConstraint("next_number >= 1", name="next_number_positive"),
        CheckConstraint("next_stage >= 1", name="next_stage_positive"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(Text, default="")
    next_number: Mapped[int] = mapped_column(Integer, default=1)
    next_stage: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    created_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))


class SchemaBlob(Base):
    """A content-addressed schema body (shard or merged), stored once per digest."""

    __tablename__ = "schemas"

    digest: Mapped[str] = mapped_column(String(DIGEST_LENGTH), primary_key=True)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)


class Version(Base):
    """One version of a dataset; immutable content once committed.

    A staged version has no ``number`` yet and is named by its ``staged_name``; committing gives
    it the dataset's next number and its ``rk1`` ``name`` (``staged_name`` keeps answering).
    Rows staged before numbers moved to commit have a number and no ``staged_name``.
    """

    __tablename__ = "versions"
    __table_args__ = (
        UniqueConstraint("name"),
        UniqueConstraint("staged_name"),
        UniqueConstraint("dataset_id", "number"),
        CheckConstraint(_in("state", VERSION_STATES), name="state"),
        CheckConstraint("number >= 1", name="number_positive"),
        CheckConstraint(
            "number IS NOT NULL OR state IN ('staged', 'abandoned')", name="published_numbered"
        ),
        Index(None, "dataset_id", "content_digest"),
        Index(None, "state", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    number: Mapped[int | None] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(200))
    staged_name: Mapped[str | None] = mapped_column(String(200))
    date: Mapped[datetime.date] = mapped_column(Date)
    desc: Mapped[str | None] = mapped_column(String(80))
    convention: Mapped[str] = mapped_column(String(16), default="rk1")
    state: Mapped[str] = mapped_column(String(16), default="staged")
    storage_prefix: Mapped[str] = mapped_column(Text)
    content_digest: Mapped[str | None] = mapped_column(String(DIGEST_LENGTH))
    schema_digest: Mapped[str | None] = mapped_column(ForeignKey("schemas.digest"))
    record_count: Mapped[int] = mapped_column(BigInteger, default=0)
    shard_count: Mapped[int] = mapped_column(Integer, default=0)
    size: Mapped[int] = mapped_column(BigInteger, default=0)
    extra_metadata: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    created_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    committed_at: Mapped[datetime.datetime | None] = mapped_column()
    deprecated_at: Mapped[datetime.datetime | None] = mapped_column()
    deprecated_reason: Mapped[str | None] = mapped_column(Text)
    abandoned_at: Mapped[datetime.datetime | None] = mapped_column()
    #: When the version's storage was deleted, and by what: ``gc`` (staged storage) or
    #: ``retention`` (a committed version's data; its row, digests and lineage are kept).
    collected_at: Mapped[datetime.datetime | None] = mapped_column()
    collected_reason: Mapped[str | None] = mapped_column(String(16))
    #: Who claimed the version's storage for garbage collection (``POST /gc/claims``), and when.
    gc_claimed_by: Mapped[str | None] = mapped_column(String(128))
    gc_claimed_at: Mapped[datetime.datetime | None] = mapped_column()
    duplicate_of_id: Mapped[int | None] = mapped_column(
        ForeignKey("versions.id", ondelete="SET NULL")
    )
    #: The version this one is derived from (staged with ``base``): at commit its kept shards
    #: are referenced by this version (:mod:`recordkeeper_service.repository.derive`).
    base_version_id: Mapped[int | None] = mapped_column(
        ForeignKey("versions.id", ondelete="SET NULL")
    )


class Shard(Base):
    """One record file of a version (``format``: tfrecord, array_record or riegeli)."""

    __tablename__ = "shards"
    __table_args__ = (
        UniqueConstraint("version_id", "split", "index"),
        CheckConstraint(_in("compression", COMPRESSIONS), name="compression"),
        CheckConstraint(_in("format", RECORD_FORMATS), name="format"),
        CheckConstraint('"index" >= 0 AND "index" < count', name="index_in_range"),
        CheckConstraint("size >= 0 AND record_count >= 0", name="sizes_not_negative"),
        # by ``sha256``: lineage of a shard by content (``shard_consumers``); by ``uri``: which
        # versions list an object (deletion, registration, derive).  Nothing looks shards up by
        # ``records_sha256``: its index (dropped by revision 3b8c6d0e5f14) only cost every
        # inserted row, a derived commit's copied rows most (docs/performance.md, session 12).
        Index(None, "sha256"),
        Index(None, "uri"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("versions.id", ondelete="CASCADE"))
    split: Mapped[str] = mapped_column(String(64))
    index: Mapped[int] = mapped_column(Integer)
    count: Mapped[int] = mapped_column(Integer)
    uri: Mapped[str] = mapped_column(Text)
    compression: Mapped[str] = mapped_column(String(8))
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    crc32c: Mapped[str] = mapped_column(String(8))
    records_sha256: Mapped[str] = mapped_column(String(64))
    record_count: Mapped[int] = mapped_column(BigInteger)
    format: Mapped[str] = mapped_column(String(16), default="tfrecord", server_default="tfrecord")
    schema_digest: Mapped[str | None] = mapped_column(ForeignKey("schemas.digest"))
    storage_identity: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    registered_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)


class Alias(Base):
    """A movable name (``prod``, ``golden``) pointing at a committed version."""

    __tablename__ = "aliases"
    __table_args__ = (UniqueConstraint("dataset_id", "name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(64))
    version_id: Mapped[int] = mapped_column(ForeignKey("versions.id"))
    updated_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(128))


class AliasHistory(Base):
    """One move of an alias: ``from_version`` → ``to_version`` (either may be null)."""

    __tablename__ = "alias_history"
    __table_args__ = (Index(None, "dataset_id", "alias"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    alias: Mapped[str] = mapped_column(String(64))
    from_version_id: Mapped[int | None] = mapped_column(ForeignKey("versions.id"))
    to_version_id: Mapped[int | None] = mapped_column(ForeignKey("versions.id"))
    at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    by: Mapped[str] = mapped_column(String(128))


class AuditEvent(Base):
    """One state change, who made it and when."""

    __tablename__ = "audit_events"
    __table_args__ = (Index(None, "dataset"), Index(None, "version"), Index(None, "action"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    actor: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(64))
    dataset: Mapped[str | None] = mapped_column(String(64))
    version: Mapped[str | None] = mapped_column(String(200))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class ApiToken(Base):
    """An API token; only the sha256 of the secret is stored."""

    __tablename__ = "api_tokens"
    __table_args__ = (
        UniqueConstraint("token_hash"),
        CheckConstraint(_in("scope", SCOPES), name="scope"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64))
    scope: Mapped[str] = mapped_column(String(8))
    token_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    revoked_at: Mapped[datetime.datetime | None] = mapped_column()
    last_used_at: Mapped[datetime.datetime | None] = mapped_column()

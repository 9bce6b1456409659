"""Schemas: content-addressed bodies, by digest or as a version's merged schema."""

from __future__ import annotations

from sqlalchemy import select

from recordkeeper.core.digests import parse_digest
from recordkeeper.core.errors import SchemaNotFound
from recordkeeper.core.refs import parse_reference
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import SchemaRecord
from recordkeeper_service.repository.resolve import find_version

__all__ = ["SchemaRepository"]


class SchemaRepository:
    """Schema reads; each public method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, digest: str) -> SchemaRecord:
        """The schema stored under ``digest`` (``sha256:<64 hex>``; the prefix may be left out)."""
        digest = parse_digest(digest, "schema digest")
        with self._db.transaction(write=False) as session:
            body = session.scalar(select(m.SchemaBlob.body).where(m.SchemaBlob.digest == digest))
            if body is None:
                raise SchemaNotFound(f"no schema with digest {digest}")
            return SchemaRecord(digest=digest, schema=body)

    def of_version(self, ref_text: str) -> SchemaRecord:
        """The merged schema of the version ``ref_text`` resolves to."""
        ref = parse_reference(ref_text)
        with self._db.transaction(write=False) as session:
            version = find_version(session, ref)
            if version.schema_digest is None:
                why = (
                    "it is not committed yet"
                    if version.state in ("staged", "abandoned")
                    else "not every shard was registered with a schema"
                )
                raise SchemaNotFound(f"{version.name} has no merged schema: {why}")
            body = session.scalar(
                select(m.SchemaBlob.body).where(m.SchemaBlob.digest == version.schema_digest)
            )
            if body is None:  # pragma: no cover - the foreign key forbids it
                raise SchemaNotFound(f"schema {version.schema_digest} is missing")
            return SchemaRecord(digest=version.schema_digest, schema=body)

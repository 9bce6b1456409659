"""Compare two versions (the rules are :mod:`recordkeeper.core.diff`, shared with the client).

Both versions are resolved as ``GET /versions/{ref}`` resolves them (committed ones from the
version cache), and their merged schemas are read only when the schema digests differ.  A
version without a merged schema (staged, or shards registered without one) compares as an empty
schema.
"""

from __future__ import annotations

from recordkeeper.core import diff as core_diff
from recordkeeper.core.schema import Schema
from recordkeeper_service.domain import ShardRecord, VersionRecord
from recordkeeper_service.repository.schemas import SchemaRepository
from recordkeeper_service.repository.versions import VersionRepository

__all__ = ["DiffRepository"]


class DiffRepository:
    """``diff(old, new)``: each version is read in its own read-only transaction; committed
    versions are immutable, so the two reads compare what each reference named at the time."""

    def __init__(self, versions: VersionRepository, schemas: SchemaRepository) -> None:
        self._versions = versions
        self._schemas = schemas

    def _side(self, version: VersionRecord) -> core_diff.DiffSide[ShardRecord]:
        digest = version.schema_digest

        def schema() -> Schema:
            if digest is None:
                return Schema()
            return Schema.from_dict(self._schemas.get(digest).schema)

        return core_diff.DiffSide(
            name=version.name,
            content_digest=version.content_digest,
            schema_digest=digest,
            shards=version.shards or (),
            schema=schema,
        )

    def diff(self, old_ref: str, new_ref: str) -> core_diff.VersionDiff[ShardRecord]:
        """What changed from the version ``old_ref`` names to the one ``new_ref`` names."""
        old = self._versions.resolve(old_ref, shards=True)
        new = self._versions.resolve(new_ref, shards=True)
        return core_diff.diff_versions(self._side(old), self._side(new))

"""Shards: bulk registration of a staged version's shards (``POST /versions/{name}/shards``).

A version's shards are answered inside the Version object (:class:`ShardOut`, in
:mod:`recordkeeper_service.routes.versions`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from recordkeeper_service.deps import RepositoryDep, Writer
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, OutModel, errors

__all__ = ["RegisterOut", "ShardBatchIn", "ShardIn", "ShardOut", "router"]

router = APIRouter(tags=["versions"], responses=AUTHENTICATED)


class ShardIn(InModel):
    split: str = Field(examples=["train"])
    index: int
    count: int
    uri: str
    compression: str = Field(examples=["gzip"], description="none, gzip or zlib")
    size: int
    sha256: str = Field(description="sha256 of the stored bytes, 64 lowercase hex digits")
    crc32c: str = Field(description="CRC32C of the stored bytes, 8 lowercase hex digits")
    records_sha256: str = Field(description="sha256 of the uncompressed framed record stream")
    record_count: int
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    storage_identity: dict[str, Any] | None = None

    def as_mapping(self) -> dict[str, Any]:
        """The fields as the repository takes them (``schema`` under its wire name)."""
        return {
            "split": self.split,
            "index": self.index,
            "count": self.count,
            "uri": self.uri,
            "compression": self.compression,
            "size": self.size,
            "sha256": self.sha256,
            "crc32c": self.crc32c,
            "records_sha256": self.records_sha256,
            "record_count": self.record_count,
            "schema": self.schema_,
            "storage_identity": self.storage_identity,
        }


class ShardBatchIn(InModel):
    shards: list[ShardIn] = Field(description="up to 10,000 shards per request")


class ShardOut(OutModel):
    split: str
    index: int
    count: int
    uri: str
    compression: str
    size: int
    sha256: str
    crc32c: str
    records_sha256: str
    record_count: int
    schema_digest: str | None
    storage_identity: dict[str, Any] | None
    registered_at: str


class RegisterOut(OutModel):
    registered: int
    unchanged: int
    shard_count: int


@router.post(
    "/versions/{version_name}/shards",
    response_model=RegisterOut,
    responses=errors(400, 404, 409, 413),
)
def register_shards(
    version_name: str, body: ShardBatchIn, repository: RepositoryDep, who: Writer
) -> dict[str, Any]:
    """Register up to 10,000 shards of a staged version; identical repeats are no-ops."""
    result = repository.shards.register(
        version_name, [shard.as_mapping() for shard in body.shards], actor=who.name
    )
    return result.to_json()

"""Pydantic models of the REST API: request bodies, and response shapes for the OpenAPI page.

Request models check only JSON *types* (wrong types → ``422 invalid_request``); the rules with
their own error codes (names, hashes, ranges, URIs) are checked by the repository so that bad
input gets the precise code from docs/rest-api.md.  Responses are built from domain records and
rendered directly with orjson; the ``*Out`` models here document them.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

__all__ = [
    "AliasHistoryOut",
    "AliasOut",
    "AliasSet",
    "CommitRequest",
    "DatasetCreate",
    "DatasetOut",
    "DeprecateRequest",
    "ErrorOut",
    "EventOut",
    "InfoOut",
    "JsonObject",
    "ListOut",
    "ReadyOut",
    "RegisterOut",
    "SchemaOut",
    "ShardBatch",
    "ShardIn",
    "ShardOut",
    "SplitOut",
    "StageRequest",
    "StatusOut",
    "TokenCreate",
    "TokenCreatedOut",
    "TokenOut",
    "VersionOut",
]

T = TypeVar("T")


def _renderable(value: dict[str, Any]) -> dict[str, Any]:
    # Free-form JSON is stored as sent and answered later by orjson, which refuses integers
    # beyond 64 bits: refuse them here (422) rather than answer 500 on every later read.
    try:
        orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError as exc:
        raise ValueError(f"not plain JSON: {exc}") from None
    return value


#: A free-form JSON object (metadata, metrics) that the service can render back.
JsonObject = Annotated[dict[str, Any], AfterValidator(_renderable)]


class _In(BaseModel):
    """Request bodies: unknown fields are ignored (forward compatible clients)."""

    model_config = ConfigDict(extra="ignore")


class DatasetCreate(_In):
    name: str = Field(examples=["coco"])
    description: str = ""


class StageRequest(_In):
    desc: str | None = Field(default=None, examples=["add_person"])
    date: str | None = Field(default=None, description="YYYYMMDD or YYYY-MM-DD; default today")
    root: str | None = Field(default=None, examples=["s3://ml-data/datasets"])
    metadata: JsonObject = Field(default_factory=dict)


class ShardIn(_In):
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


class ShardBatch(_In):
    shards: list[ShardIn] = Field(description="up to 10,000 shards per request")


class CommitRequest(_In):
    on_duplicate: Literal["error", "use_existing", "commit"] = "error"


class DeprecateRequest(_In):
    reason: str | None = Field(default=None, examples=["labels were wrong"])
    force: bool = Field(default=False, description="admin only: deprecate even if in use")


class AliasSet(_In):
    version: str = Field(examples=["coco@v3"])


class TokenCreate(_In):
    name: str = Field(examples=["ci"])
    scope: Literal["read", "write", "admin"] = "read"


# ------------------------------------------------------------------------------ responses


class ErrorOut(BaseModel):
    code: str
    detail: str


class ListOut(BaseModel, Generic[T]):
    data: list[T]
    count: int
    limit: int
    offset: int


class DatasetOut(BaseModel):
    name: str
    description: str
    created_at: str
    created_by: str
    version_count: int
    latest: str | None


class ShardOut(BaseModel):
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


class SplitOut(BaseModel):
    shard_count: int
    record_count: int
    size: int
    shards: list[ShardOut]


class VersionOut(BaseModel):
    name: str
    dataset: str
    number: int
    date: str
    desc: str | None
    convention: str
    state: Literal["staged", "committed", "deprecated", "abandoned"]
    ref: str
    storage_prefix: str
    content_digest: str | None
    schema_digest: str | None
    record_count: int
    shard_count: int
    size: int
    created_at: str
    committed_at: str | None
    created_by: str
    deprecated_at: str | None
    deprecated_reason: str | None
    metadata: dict[str, Any]
    duplicate_of: str | None
    splits: dict[str, SplitOut] | None


class RegisterOut(BaseModel):
    registered: int
    unchanged: int
    shard_count: int


class SchemaOut(BaseModel):
    digest: str
    schema_: dict[str, Any] = Field(alias="schema")


class AliasOut(BaseModel):
    dataset: str
    alias: str
    version: str
    updated_at: str | None
    updated_by: str | None


class AliasHistoryOut(BaseModel):
    from_version: str | None
    to_version: str | None
    at: str
    by: str


class EventOut(BaseModel):
    id: int
    at: str
    actor: str
    action: str
    dataset: str | None
    version: str | None
    detail: dict[str, Any]


class TokenOut(BaseModel):
    id: int
    name: str
    scope: str
    created_at: str
    created_by: str
    revoked_at: str | None
    last_used_at: str | None


class TokenCreatedOut(TokenOut):
    token: str = Field(description="the secret; shown only in this answer")


class InfoOut(BaseModel):
    version: str
    naming_convention: str
    storage_root: str
    allowed_roots: list[str]
    auth: Literal["open", "token"]
    max_shards_per_request: int
    max_body_bytes: int


class StatusOut(BaseModel):
    status: str


class ReadyOut(BaseModel):
    status: str
    database: str
    revision: str

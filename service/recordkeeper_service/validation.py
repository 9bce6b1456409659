"""Validation of shard registrations, turning bad input into errors with stable codes.

Each problem names the shard's position in the request (``extra["shard"]``).  Schemas are parsed
once per distinct body, so 10,000 shards sharing a schema cost one parse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from recordkeeper.core.digests import validate_crc32c, validate_sha256
from recordkeeper.core.errors import (
    InvalidHash,
    InvalidShard,
    RecordkeeperError,
    StorageRootNotAllowed,
)
from recordkeeper.core.roots import AllowedRoots, UriError
from recordkeeper.core.schema import Schema
from recordkeeper.core.splits import validate_split_name
from recordkeeper_service.models import COMPRESSIONS

__all__ = ["MAX_SHARDS_PER_REQUEST", "MAX_SHARD_COUNT", "ValidShard", "validate_shards"]

MAX_SHARDS_PER_REQUEST = 10_000
#: Upper bound of a split's shard count (``count``), far above any real dataset.
MAX_SHARD_COUNT = 10_000_000
_MAX_INT64 = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ValidShard:
    """A checked shard registration, ready to insert."""

    position: int
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

    @property
    def key(self) -> tuple[str, int]:
        return (self.split, self.index)

    def same_content(self, other: Mapping[str, Any]) -> bool:
        """True if ``other`` (a stored shard's columns) describes the same file and bytes."""
        return (
            self.count == other["count"]
            and self.uri == other["uri"]
            and self.compression == other["compression"]
            and self.size == other["size"]
            and self.sha256 == other["sha256"]
            and self.crc32c == other["crc32c"]
            and self.records_sha256 == other["records_sha256"]
            and self.record_count == other["record_count"]
        )


def _at(position: int, exc: RecordkeeperError) -> RecordkeeperError:
    """Re-raise-ready copy of ``exc`` naming the shard position."""
    cls = type(exc)
    return cls(f"shard {position}: {exc.detail}", **{**exc.extra, "shard": position})


def validate_shards(
    shards: Sequence[Mapping[str, Any]], roots: AllowedRoots
) -> tuple[list[ValidShard], dict[str, Schema]]:
    """Check every shard; return them plus the distinct schemas by digest.

    Raises:
        InvalidShard: bad split, index/count, compression, size, URI or schema.
        InvalidHash: sha256/records_sha256/crc32c not in hex form.
        StorageRootNotAllowed: a URI outside the allowed roots.
    """
    if not shards:
        raise InvalidShard("the request registers no shards", shard=None)
    if len(shards) > MAX_SHARDS_PER_REQUEST:
        raise InvalidShard(
            f"{len(shards)} shards in one request; at most {MAX_SHARDS_PER_REQUEST} are allowed "
            "(send several requests)",
            shard=None,
        )
    schemas_by_body: dict[bytes, tuple[str, Schema]] = {}
    schemas: dict[str, Schema] = {}
    out: list[ValidShard] = []
    for position, raw in enumerate(shards):
        try:
            out.append(_validate_one(position, raw, roots, schemas_by_body, schemas))
        except (InvalidShard, InvalidHash, StorageRootNotAllowed) as exc:
            raise _at(position, exc) from None
    return out, schemas


def _validate_one(
    position: int,
    raw: Mapping[str, Any],
    roots: AllowedRoots,
    schemas_by_body: dict[bytes, tuple[str, Schema]],
    schemas: dict[str, Schema],
) -> ValidShard:
    split = validate_split_name(raw["split"])
    index, count = raw["index"], raw["count"]
    if index < 0:
        raise InvalidShard(f"index {index} is negative")
    if not 1 <= count <= MAX_SHARD_COUNT:
        raise InvalidShard(f"count {count} must be between 1 and {MAX_SHARD_COUNT}")
    if index >= count:
        raise InvalidShard(
            f"index {index} is out of range for count {count} (indices are 0..{count - 1})"
        )
    compression = raw["compression"]
    if compression not in COMPRESSIONS:
        raise InvalidShard(f"compression {compression!r} is not one of {', '.join(COMPRESSIONS)}")
    size, record_count = raw["size"], raw["record_count"]
    for field, value in (("size", size), ("record_count", record_count)):
        if not 0 <= value <= _MAX_INT64:
            raise InvalidShard(f"{field} {value} must be a non-negative 64-bit integer")
    try:
        uri = roots.check(raw["uri"], "shard URI")
    except UriError as exc:
        raise InvalidShard(f"uri: {exc}") from None
    identity = raw.get("storage_identity")
    if identity is not None and not isinstance(identity, dict):
        raise InvalidShard("storage_identity must be an object or null")
    if identity is not None:
        try:
            orjson.dumps(identity)  # stored as is and answered later: must render
        except TypeError as exc:
            raise InvalidShard(f"storage_identity is not plain JSON: {exc}") from None
    return ValidShard(
        position=position,
        split=split,
        index=index,
        count=count,
        uri=uri,
        compression=compression,
        size=size,
        sha256=validate_sha256(raw["sha256"], "sha256"),
        crc32c=validate_crc32c(raw["crc32c"], "crc32c"),
        records_sha256=validate_sha256(raw["records_sha256"], "records_sha256"),
        record_count=record_count,
        schema_digest=_schema_digest(raw.get("schema"), schemas_by_body, schemas),
        storage_identity=identity,
    )


def _schema_digest(
    raw: object,
    schemas_by_body: dict[bytes, tuple[str, Schema]],
    schemas: dict[str, Schema],
) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InvalidShard("schema must be an object or null")
    try:
        body = orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:
        raise InvalidShard(f"schema is not plain JSON: {exc}") from None
    cached = schemas_by_body.get(body)
    if cached is None:
        try:
            schema = Schema.from_dict(raw)
        except RecordkeeperError as exc:
            raise InvalidShard(f"schema: {exc.detail}") from None
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            # Defensive: the schema model should only raise InvalidRequest, but a non-object
            # feature entry can escape as a plain error.
            raise InvalidShard(f"schema is malformed: {type(exc).__name__}") from None
        cached = (schema.digest(), schema)
        schemas_by_body[body] = cached
        schemas[cached[0]] = schema
    return cached[0]

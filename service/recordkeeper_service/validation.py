"""Validation of shard registrations, turning bad input into errors with stable codes.

Each problem names the shard's position in the request (``extra["shard"]``).  Schemas are parsed
once per distinct body, so 10,000 shards sharing a schema cost one parse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from recordkeeper.core.errors import (
    InvalidHash,
    InvalidShard,
    RecordkeeperError,
    StorageRootNotAllowed,
)
from recordkeeper.core.limits import MAX_SHARDS_PER_REQUEST
from recordkeeper.core.roots import AllowedRoots
from recordkeeper.core.schema import Schema, check_shard_schema
from recordkeeper.core.shards import ShardRecord, validate_shard

__all__ = ["ValidShard", "validate_shards"]


@dataclass(frozen=True, slots=True)
class ValidShard:
    """A checked shard registration, ready to insert: the record and its place in the request."""

    position: int
    record: ShardRecord

    @property
    def key(self) -> tuple[str, int]:
        return self.record.key


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
    record = validate_shard(raw, roots)
    if record.storage_identity is not None:
        try:
            orjson.dumps(record.storage_identity)  # stored as is and answered later
        except TypeError as exc:
            raise InvalidShard(f"storage_identity is not plain JSON: {exc}") from None
    digest = _schema_digest(raw.get("schema"), schemas_by_body, schemas)
    if digest is not None:
        check_shard_schema(schemas[digest], record.record_count)
        # the record was made just now and is not shared: set the derived field in place
        # (dataclasses.replace validated and rebuilt every field again, ~3 µs a shard)
        object.__setattr__(record, "schema_digest", digest)
    return ValidShard(position=position, record=record)


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

"""The canonical manifest of a version and its ``content_digest``.

The digest covers *what the data is*, not where or how it is stored: splits, shard order, each
shard's ``records_sha256`` (sha256 of the uncompressed framed record stream) and record count.
So re-publishing the same records with another compression or under another URI gives the same
digest, and a reordered or changed shard gives another.

Canonical form (UTF-8 JSON, keys sorted, no whitespace)::

    {"format":"rk-manifest-1","splits":{"train":[[<records_sha256>,<record_count>], ...], ...}}

with shards listed in index order.  ``content_digest = "sha256:" + sha256(canonical).hexdigest()``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import orjson

from recordkeeper.errors import InvalidHash, InvalidShard

__all__ = [
    "DIGEST_PREFIX",
    "MANIFEST_FORMAT",
    "ManifestEntry",
    "canonical_manifest",
    "content_digest",
    "shard_file_name",
    "validate_crc32c",
    "validate_sha256",
    "validate_split_name",
]

MANIFEST_FORMAT = "rk-manifest-1"
DIGEST_PREFIX = "sha256:"
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_CRC32C_RE = re.compile(r"[0-9a-f]{8}")
_SPLIT_RE = re.compile(r"[a-z][a-z0-9_-]{0,63}")


@dataclass(frozen=True)
class ManifestEntry:
    """One shard as the manifest sees it."""

    split: str
    index: int
    count: int
    records_sha256: str
    record_count: int


def validate_sha256(value: object, field: str = "sha256") -> str:
    """Return ``value`` if it is 64 lowercase hex digits, else raise :class:`InvalidHash`."""
    if not isinstance(value, str) or not _SHA256_RE.fullmatch(value):
        shown = value if isinstance(value, str) and len(value) < 80 else type(value).__name__
        raise InvalidHash(f"{field} must be 64 lowercase hex digits, got {shown!r}")
    return value


def validate_crc32c(value: object, field: str = "crc32c") -> str:
    """Return ``value`` if it is 8 lowercase hex digits (big-endian CRC32C), else raise."""
    if not isinstance(value, str) or not _CRC32C_RE.fullmatch(value):
        shown = value if isinstance(value, str) and len(value) < 80 else type(value).__name__
        raise InvalidHash(f"{field} must be 8 lowercase hex digits, got {shown!r}")
    return value


def validate_split_name(split: object) -> str:
    """Split names are like dataset names: ``train``, ``validation``, ``test_hard``."""
    if not isinstance(split, str) or not _SPLIT_RE.fullmatch(split):
        raise InvalidShard(
            f"split name {split!r} is invalid: lowercase letters, digits, '_' and '-', "
            "starting with a letter"
        )
    return split


def shard_file_name(split: str, index: int, count: int, suffix: str = ".tfrecord") -> str:
    """The versioned layout's file name: ``train-00003-of-00016.tfrecord``."""
    return f"{split}-{index:05d}-of-{count:05d}{suffix}"


def canonical_manifest(entries: Iterable[ManifestEntry]) -> bytes:
    """The canonical bytes that :func:`content_digest` hashes (see the module docstring)."""
    splits: dict[str, list[ManifestEntry]] = {}
    for entry in entries:
        splits.setdefault(entry.split, []).append(entry)
    body: dict[str, list[list[object]]] = {}
    for split, shards in splits.items():
        shards.sort(key=lambda e: e.index)
        body[split] = [[e.records_sha256, e.record_count] for e in shards]
    return orjson.dumps({"format": MANIFEST_FORMAT, "splits": body}, option=orjson.OPT_SORT_KEYS)


def content_digest(entries: Iterable[ManifestEntry] | Mapping[str, list[ManifestEntry]]) -> str:
    """``sha256:<hex>`` over the canonical manifest of ``entries``."""
    if isinstance(entries, Mapping):
        entries = [e for shards in entries.values() for e in shards]
    return DIGEST_PREFIX + hashlib.sha256(canonical_manifest(entries)).hexdigest()

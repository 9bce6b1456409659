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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from recordkeeper.core.canonical import canonical_json
from recordkeeper.core.digests import format_digest

__all__ = [
    "MANIFEST_FORMAT",
    "ManifestEntry",
    "canonical_manifest",
    "content_digest",
    "digest_of_splits",
]

MANIFEST_FORMAT = "rk-manifest-1"


@dataclass(frozen=True)
class ManifestEntry:
    """One shard as the manifest sees it."""

    split: str
    index: int
    count: int
    records_sha256: str
    record_count: int


def canonical_manifest(entries: Iterable[ManifestEntry]) -> bytes:
    """The canonical bytes that :func:`content_digest` hashes (see the module docstring)."""
    splits: dict[str, list[ManifestEntry]] = {}
    for entry in entries:
        splits.setdefault(entry.split, []).append(entry)
    body: dict[str, list[list[object]]] = {}
    for split, shards in splits.items():
        shards.sort(key=lambda e: e.index)
        body[split] = [[e.records_sha256, e.record_count] for e in shards]
    return _canonical(body)


def _canonical(body: Mapping[str, list[list[object]]]) -> bytes:
    return canonical_json({"format": MANIFEST_FORMAT, "splits": body})


def digest_of_splits(body: Mapping[str, list[list[object]]]) -> str:
    """:func:`content_digest` of ``{split: [[records_sha256, record_count], ...]}`` with each
    split's shards already in index order (what a query ordered by split and index gives,
    without building an entry per shard)."""
    return format_digest(hashlib.sha256(_canonical(body)).hexdigest())


def content_digest(entries: Iterable[ManifestEntry] | Mapping[str, list[ManifestEntry]]) -> str:
    """``sha256:<hex>`` over the canonical manifest of ``entries``."""
    if isinstance(entries, Mapping):
        entries = [e for shards in entries.values() for e in shards]
    return format_digest(hashlib.sha256(canonical_manifest(entries)).hexdigest())

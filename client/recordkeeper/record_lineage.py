"""Which checkpoints saw this record: record → shards → versions → checkpoints, no shard read.

Each indexed version has a *record lookup* (:mod:`recordkeeper.core.record_lookup`), written by
``recordkeeper index`` next to the version's data::

    <storage prefix>/.recordkeeper/records.rklookup

A question (:func:`record_lineage`) computes the record's identity for the lookup's kind and
width, reads four small ranges of each version's lookup for the shards that may hold it,
confirms each in that shard's own index (a binary search by range reads), then asks the
registry for every registration of those shard files — by the shard's sha256, so a version
that holds the same file (a copy, a version derived as a change that kept the shard, a
zero-copy derive) is found whether or not it was indexed itself — and for the checkpoints
trained on them (``GET /shards/consumers?sha256=…``), transitively through restored and
initialised-from checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recordkeeper.checkpoint_lineage import shard_consumers
from recordkeeper.core.errors import InvalidIndex, InvalidRequest, NotFound, StorageError
from recordkeeper.core.lineage import Consumer
from recordkeeper.core.record_identity import IdentityKind, record_hash
from recordkeeper.core.record_lookup import HEADER_SIZE as LOOKUP_HEADER_SIZE
from recordkeeper.core.record_lookup import (
    LookupHeader,
    count_in_index,
    lookup_candidates,
)
from recordkeeper.record_sets import index_uri, lookup_uri
from recordkeeper.storage import open_read
from recordkeeper.values import DatasetVersion

if TYPE_CHECKING:
    from recordkeeper.http import HttpCore

__all__ = ["RecordLineage", "record_lineage"]


def _reader(fh: Any) -> Any:
    def read(offset: int, size: int) -> bytes:
        fh.seek(offset)
        data: bytes = fh.read(size)
        return data

    return read


@dataclass(frozen=True)
class RecordLineage:
    """Where a record is and what trained on it.

    ``shards``: each registration of a shard file holding the record (``version``, ``split``,
    ``index``, ``uri``, ``sha256``, ``copies``: how many times the shard holds it);
    ``versions``: the versions holding such a shard; ``checkpoints``: every checkpoint trained
    on a split holding one (``direct=False``: inherited from an ancestor checkpoint);
    ``searched``: versions whose lookup was read; ``not_indexed``: versions asked about that
    have no record lookup (run ``recordkeeper index`` on them: they may hold the record in a
    shard of their own).
    """

    identities: Mapping[str, str]
    shards: tuple[dict[str, Any], ...]
    versions: tuple[dict[str, Any], ...]
    checkpoints: tuple[Consumer, ...]
    searched: tuple[str, ...] = ()
    not_indexed: tuple[str, ...] = ()
    models: tuple[str, ...] = field(default=())

    @property
    def found(self) -> bool:
        return bool(self.shards)

    @property
    def refs(self) -> list[str]:
        return [str(c.ref) for c in self.checkpoints]

    def to_json(self) -> dict[str, Any]:
        return {
            "identities": dict(self.identities),
            "found": self.found,
            "shards": [dict(s) for s in self.shards],
            "versions": [dict(v) for v in self.versions],
            "checkpoints": [c.to_json() for c in self.checkpoints],
            "models": list(self.models),
            "searched": list(self.searched),
            "not_indexed": list(self.not_indexed),
        }


def _record_bytes(record: Any) -> bytes | None:
    if isinstance(record, bytes | bytearray | memoryview):
        return bytes(record)
    serialize = getattr(record, "SerializeToString", None)
    if callable(serialize):
        data = serialize()
        if isinstance(data, bytes):
            return data
    if isinstance(record, str):
        return None
    raise InvalidRequest(
        f"a record is bytes, a tf.train.Example or its identity as hex; got {type(record).__name__}"
    )


def _identity(record: Any, data: bytes | None, kind: IdentityKind, width: int) -> bytes:
    if data is not None:
        return record_hash(data, kind, width)
    text = str(record).strip().lower().removeprefix("sha256:")
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise InvalidRequest(f"{record!r} is not a record identity (hex digits)") from None
    if len(raw) != width:
        raise InvalidRequest(
            f"the lookup holds {width}-byte identities ({2 * width} hex digits), got {len(raw)}"
        )
    return raw


def record_lineage(
    http: HttpCore,
    targets: Sequence[DatasetVersion],
    record: Any,
    *,
    transitive: bool = True,
) -> RecordLineage:
    """The shards holding ``record`` (bytes, a ``tf.train.Example``, or its identity as hex),
    their versions, and every checkpoint trained on them, searching the versions ``targets``
    (see the module docstring; :meth:`recordkeeper.Client.record_lineage` picks them)."""
    data = _record_bytes(record)
    identities: dict[tuple[str, int], bytes] = {}
    matched: dict[str, tuple[bytes, dict[str, Any]]] = {}  # sha256 → (identity, options)
    searched: list[str] = []
    missing: list[str] = []
    for version in targets:
        options = dict(version.storage_options)
        try:
            fh = open_read(lookup_uri(version), options)
        except (StorageError, NotFound, OSError):
            missing.append(version.name)
            continue
        with fh:
            read = _reader(fh)
            header = LookupHeader.from_bytes(read(0, LOOKUP_HEADER_SIZE))
            key = (header.kind, header.width)
            if key not in identities:
                identities[key] = _identity(record, data, header.kind, header.width)
            _, found = lookup_candidates(read, identities[key])
        searched.append(version.name)
        for _, row in found:
            matched.setdefault(row.sha256, (identities[key], options))
    shards: list[dict[str, Any]] = []
    versions_out: dict[str, dict[str, Any]] = {}
    consumers: dict[str, Consumer] = {}
    for sha256, (identity, storage) in sorted(matched.items()):
        answer = shard_consumers(http, sha256, transitive=transitive)
        copies: int | None = None
        for shard in answer.shards:  # the first registration whose index can tell
            copies = _confirm(shard["uri"], identity, storage)
            if copies is not None:
                break
        if not copies:
            continue  # a chance match of the 8-byte prefix (or no index left to confirm it)
        shards.extend({**shard, "copies": copies} for shard in answer.shards)
        for entry in answer.versions:
            versions_out.setdefault(entry["name"], entry)
        for c in answer.checkpoints:
            known = consumers.get(str(c.ref))
            if known is None or (c.direct and not known.direct):
                consumers[str(c.ref)] = c
    checkpoints = tuple(sorted(consumers.values(), key=lambda c: str(c.ref)))
    return RecordLineage(
        identities={f"{k}/{w}": h.hex() for (k, w), h in identities.items()},
        shards=tuple(shards),
        versions=tuple(versions_out.values()),
        checkpoints=checkpoints,
        searched=tuple(searched),
        not_indexed=tuple(missing),
        models=tuple(sorted({c.model for c in checkpoints})),
    )


def _confirm(shard_uri: str, identity: bytes, storage: Mapping[str, Any]) -> int | None:
    """Copies of ``identity`` in the shard at ``shard_uri`` from its index; None when there
    is no readable index there to tell."""
    try:
        with open_read(index_uri(shard_uri), dict(storage)) as fh:
            return count_in_index(_reader(fh), identity)
    except (StorageError, NotFound, OSError, InvalidIndex):
        return None

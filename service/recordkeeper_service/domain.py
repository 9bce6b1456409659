"""Domain records: immutable values the repository returns and the routes serialise.

They carry no database state.  Each has ``to_json()`` giving exactly the shape documented in
docs/rest-api.md (dates ``YYYY-MM-DD``, timestamps ISO 8601 UTC with ``Z``).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from recordkeeper.core import shards as core_shards
from recordkeeper.core.provenance import empty_provenance
from recordkeeper.core.refs import PUBLISHED_STATES
from recordkeeper.core.shard_columns import to_columns

__all__ = [
    "PUBLISHED_STATES",
    "AliasMove",
    "AliasRecord",
    "DatasetRecord",
    "EventRecord",
    "GcCandidate",
    "GcObjects",
    "Page",
    "RegisterResult",
    "SchemaRecord",
    "ShardPage",
    "ShardRecord",
    "TokenRecord",
    "VerificationRecord",
    "VersionRecord",
    "data_state_json",
    "iso_timestamp",
    "provenance_answer",
]

T = TypeVar("T")


def iso_timestamp(value: datetime.datetime | None) -> str | None:
    """ISO 8601 in UTC with a ``Z`` suffix; naive values (from SQLite) are taken as UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    else:
        value = value.astimezone(datetime.UTC)
    return value.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class DatasetRecord:
    name: str
    description: str
    created_at: datetime.datetime
    created_by: str
    version_count: int
    latest: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "created_at": iso_timestamp(self.created_at),
            "created_by": self.created_by,
            "version_count": self.version_count,
            "latest": self.latest,
        }


def data_state_of(released_at: datetime.datetime | None, collected_at: Any) -> str:
    """``stored``, ``deleting`` (released for deletion, not finished) or ``deleted``
    (:data:`recordkeeper.core.retention.DATA_STATES`)."""
    if collected_at is not None:
        return "deleted"
    return "deleting" if released_at is not None else "stored"


def data_state_json(
    state: str,
    released_at: datetime.datetime | None,
    collected_at: datetime.datetime | None,
    collected_reason: str | None,
) -> dict[str, Any]:
    """``data_state``, ``data_deleted_at`` and ``data_deleted_reason`` of a version, as every
    answer naming a version with its data state carries them (the Version object, lineage
    entries, consumers, graph nodes).

    The reason is the one recorded at the deletion; while deleting (not recorded yet) it is
    ``retention`` for a published version (gc never releases one) and ``gc`` otherwise.
    """
    data_state = data_state_of(released_at, collected_at)
    reason = None
    if data_state != "stored":
        reason = collected_reason or ("retention" if state in PUBLISHED_STATES else "gc")
    return {
        "data_state": data_state,
        "data_deleted_at": iso_timestamp(collected_at),
        "data_deleted_reason": reason,
    }


@dataclass(frozen=True, slots=True)
class ShardRecord(core_shards.ShardRecord):
    """A registered shard: the core's shard record plus when it was registered."""

    registered_at: datetime.datetime | None = None

    def to_json(self) -> dict[str, Any]:
        out = core_shards.ShardRecord.to_json(self)
        out["registered_at"] = iso_timestamp(self.registered_at)
        return out


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """A version; ``shards`` is None when they were not asked for."""

    id: int
    name: str
    dataset: str
    #: None while staged (and for versions abandoned before their commit): numbers are given
    #: at commit.
    number: int | None
    date: datetime.date
    desc: str | None
    convention: str
    state: str
    storage_prefix: str
    content_digest: str | None
    schema_digest: str | None
    record_count: int
    shard_count: int
    size: int
    created_at: datetime.datetime
    created_by: str
    committed_at: datetime.datetime | None
    deprecated_at: datetime.datetime | None
    deprecated_reason: str | None
    metadata: dict[str, Any]
    duplicate_of: str | None
    #: The name the version was staged under (``coco_20231015_staged4``); None for versions
    #: staged when numbers were still given at staging.
    staged_name: str | None = None
    shards: tuple[ShardRecord, ...] | None = None
    #: When its storage was released for deletion (gc or retention claimed it), deleted, and
    #: by what (``gc``, ``retention``): the only parts of a published version that change
    #: besides its state (see :attr:`data_state`).
    released_at: datetime.datetime | None = None
    collected_at: datetime.datetime | None = None
    collected_reason: str | None = None
    #: The stored provenance document (parents, sources, producer, params...); None when the
    #: version recorded none.  Immutable once committed, so cached with the version.
    provenance: dict[str, Any] | None = None
    #: The commit's leakage warning (a ``warn`` leakage policy): only on the record a
    #: commit answers, never stored or cached (see :mod:`.repository.leakage`).
    leakage_warning: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    #: ``splits`` rendered once (see :meth:`with_rendered_splits`); never compared.
    rendered_splits: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def published(self) -> bool:
        """Committed or deprecated: its shards and content digest never change again."""
        return self.state in PUBLISHED_STATES

    @property
    def data_state(self) -> str:
        """``stored``, ``deleting`` (released for deletion, not finished) or ``deleted``."""
        return data_state_of(self.released_at, self.collected_at)

    def with_rendered_splits(self) -> VersionRecord:
        """A copy that keeps its ``splits`` JSON, for records answered many times (cached).

        Rendering 10,000 shards takes ~30 ms; committed shards never change, so once is enough.
        """
        if self.shards is None or self.rendered_splits is not None:
            return self
        return replace(self, rendered_splits=_splits_json(self.shards))

    def to_json(self, ref: str | None = None) -> dict[str, Any]:
        """The Version object; ``ref`` echoes the reference the caller used (default: name)."""
        return {
            "name": self.name,
            "dataset": self.dataset,
            "number": self.number,
            "date": self.date.isoformat(),
            "desc": self.desc,
            "convention": self.convention,
            "state": self.state,
            "ref": ref if ref is not None else self.name,
            "storage_prefix": self.storage_prefix,
            "content_digest": self.content_digest,
            "schema_digest": self.schema_digest,
            "record_count": self.record_count,
            "shard_count": self.shard_count,
            "size": self.size,
            "created_at": iso_timestamp(self.created_at),
            "committed_at": iso_timestamp(self.committed_at),
            "created_by": self.created_by,
            "deprecated_at": iso_timestamp(self.deprecated_at),
            "deprecated_reason": self.deprecated_reason,
            "metadata": self.metadata,
            "duplicate_of": self.duplicate_of,
            "staged_name": self.staged_name,
            **data_state_json(
                self.state, self.released_at, self.collected_at, self.collected_reason
            ),
            "provenance": provenance_answer(self.provenance),
            "splits": self._splits(),
        }

    def _splits(self) -> dict[str, Any] | None:
        if self.shards is None:
            return None
        if self.rendered_splits is not None:
            return self.rendered_splits
        return _splits_json(self.shards)


def provenance_answer(document: Mapping[str, Any] | None) -> dict[str, Any]:
    """A version's ``provenance`` as answered: the stored document, or empty parts."""
    return dict(document) if document is not None else empty_provenance()


def _splits_json(shards: Sequence[ShardRecord]) -> dict[str, Any]:
    splits: dict[str, dict[str, Any]] = {}
    for shard in sorted(shards, key=lambda s: (s.split, s.index)):
        entry = splits.get(shard.split)
        if entry is None:
            entry = splits[shard.split] = {
                "shard_count": 0,
                "record_count": 0,
                "size": 0,
                "shards": [],
            }
        entry["shard_count"] += 1
        entry["record_count"] += shard.record_count
        entry["size"] += shard.size
        entry["shards"].append(shard.to_json())
    return splits


@dataclass(frozen=True, slots=True)
class ShardPage:
    """One page of a version's shards in (split, index) order; ``next`` continues after it."""

    version: str
    content_digest: str | None
    shard_count: int
    limit: int
    next: str | None
    shards: tuple[ShardRecord, ...]

    def to_json(self, *, compact: bool = False) -> dict[str, Any]:
        """The ``ShardPage`` object: ``shards`` in the full form, or ``compact`` columns."""
        return {
            "version": self.version,
            "content_digest": self.content_digest,
            "shard_count": self.shard_count,
            "limit": self.limit,
            "next": self.next,
            "shards": None if compact else [s.to_json() for s in self.shards],
            "compact": to_columns(self.shards) if compact else None,
            "packed": None,
        }


@dataclass(frozen=True, slots=True)
class RegisterResult:
    registered: int
    unchanged: int
    shard_count: int

    def to_json(self) -> dict[str, Any]:
        return {
            "registered": self.registered,
            "unchanged": self.unchanged,
            "shard_count": self.shard_count,
        }


@dataclass(frozen=True, slots=True)
class VerificationRecord:
    """A client's failed verification, as recorded."""

    version: str
    mode: str
    checked: int
    problems: int

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "mode": self.mode,
            "checked": self.checked,
            "problems": self.problems,
        }


@dataclass(frozen=True, slots=True)
class SchemaRecord:
    digest: str
    schema: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "schema": self.schema}


@dataclass(frozen=True, slots=True)
class AliasRecord:
    dataset: str
    alias: str
    version: str
    updated_at: datetime.datetime | None
    updated_by: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "alias": self.alias,
            "version": self.version,
            "updated_at": iso_timestamp(self.updated_at),
            "updated_by": self.updated_by,
        }


@dataclass(frozen=True, slots=True)
class AliasMove:
    from_version: str | None
    to_version: str | None
    at: datetime.datetime
    by: str

    def to_json(self) -> dict[str, Any]:
        return {
            "from_version": self.from_version,
            "to_version": self.to_version,
            "at": iso_timestamp(self.at),
            "by": self.by,
        }


@dataclass(frozen=True, slots=True)
class EventRecord:
    id: int
    at: datetime.datetime
    actor: str
    action: str
    dataset: str | None
    version: str | None
    detail: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": iso_timestamp(self.at),
            "actor": self.actor,
            "action": self.action,
            "dataset": self.dataset,
            "version": self.version,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class GcCandidate:
    """A version whose storage prefix may be (or was) collected."""

    name: str
    dataset: str
    state: str
    created_at: datetime.datetime
    storage_prefix: str
    shard_count: int
    abandoned_at: datetime.datetime | None
    collected_at: datetime.datetime | None
    claimed_by: str | None = None
    claimed_at: datetime.datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dataset": self.dataset,
            "state": self.state,
            "created_at": iso_timestamp(self.created_at),
            "storage_prefix": self.storage_prefix,
            "shard_count": self.shard_count,
            "abandoned_at": iso_timestamp(self.abandoned_at),
            "collected_at": iso_timestamp(self.collected_at),
            "claimed_by": self.claimed_by,
            "claimed_at": iso_timestamp(self.claimed_at),
        }


@dataclass(frozen=True, slots=True)
class GcObjects:
    """The service's answer to "which of these objects may I delete?" for a released version.

    ``keep`` maps each object to keep to the live versions that reference it (empty: it lies
    outside the version's storage prefix).
    """

    version: str
    delete: tuple[str, ...]
    keep: Mapping[str, tuple[str, ...]]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "delete": list(self.delete),
            "keep": [
                {"uri": uri, "referenced_by": list(names)} for uri, names in self.keep.items()
            ],
        }


@dataclass(frozen=True, slots=True)
class TokenRecord:
    id: int
    name: str
    scope: str
    created_at: datetime.datetime
    created_by: str
    revoked_at: datetime.datetime | None
    last_used_at: datetime.datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "scope": self.scope,
            "created_at": iso_timestamp(self.created_at),
            "created_by": self.created_by,
            "revoked_at": iso_timestamp(self.revoked_at),
            "last_used_at": iso_timestamp(self.last_used_at),
        }


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list: ``data`` plus the total ``count`` matching the filters."""

    data: Sequence[T]
    count: int
    limit: int
    offset: int

    def to_json(self) -> dict[str, Any]:
        return {
            "data": [item.to_json() for item in self.data],  # type: ignore[attr-defined]
            "count": self.count,
            "limit": self.limit,
            "offset": self.offset,
        }

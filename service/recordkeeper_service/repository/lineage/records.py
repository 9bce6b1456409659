"""Immutable lineage results the repository returns and the routes serialise.

Each ``to_json()`` gives exactly the shape documented in docs/rest-api.md ("Lineage").  Records
built by the thousand per request are named tuples: a frozen dataclass costs twice as much to
construct, which shows at ~1,000 entries per upstream answer.  The ones the client reads back
as they are (:class:`~recordkeeper.core.lineage.LineageEntry` with its segments,
:class:`~recordkeeper.core.lineage.Consumer`) live in :mod:`recordkeeper.core.lineage`.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from recordkeeper.core.data_lineage import HistoryEntry
from recordkeeper.core.lineage import (
    CONSUMED_COLUMN,
    LINEAGE_COLUMNS,
    CheckpointRef,
    Consumer,
    LineageEntry,
    Segment,
    consumed_from_columns,
    entries_from_columns,
    pack_lineage_columns,
)
from recordkeeper.core.model_inputs import InputProblem, has_errors
from recordkeeper_service.domain import iso_timestamp

__all__ = [
    "CheckpointRecord",
    "ConsumersRecord",
    "DataRecord",
    "GraphRecord",
    "ImpactRecord",
    "LineageRecord",
    "ModelCheckEntryRecord",
    "ModelCheckRecord",
    "ModelRecord",
]


class DataRecord(NamedTuple):
    """One (version, role) of a checkpoint's own segment, with the splits it used and whether
    the version's data is still stored (``data_state``, see :class:`~.queries.VersionState`)."""

    version: str
    dataset: str
    content_digest: str | None
    role: str
    splits: tuple[str, ...]
    data_state: str = "stored"
    data_deleted_at: str | None = None
    data_deleted_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "dataset": self.dataset,
            "content_digest": self.content_digest,
            "data_state": self.data_state,
            "data_deleted_at": self.data_deleted_at,
            "data_deleted_reason": self.data_deleted_reason,
            "role": self.role,
            "splits": list(self.splits),
        }


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    model: str
    checkpoint: str
    step: int | None
    uri: str | None
    run: str
    parent: str | None
    parent_kind: str | None
    data: tuple[DataRecord, ...]
    saved_models: tuple[Mapping[str, Any], ...]
    metrics: Mapping[str, Any]
    metadata: Mapping[str, Any]
    created_at: datetime.datetime
    created_by: str
    state: str = "present"
    deleted_at: datetime.datetime | None = None
    deleted_reason: str | None = None

    @property
    def ref(self) -> str:
        """``model@run/checkpoint``: the checkpoint's exact reference."""
        return str(CheckpointRef(self.model, self.checkpoint, self.run))

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "checkpoint": self.checkpoint,
            "ref": self.ref,
            "state": self.state,
            "deleted_at": iso_timestamp(self.deleted_at) if self.deleted_at else None,
            "deleted_reason": self.deleted_reason,
            "step": self.step,
            "uri": self.uri,
            "run": self.run,
            "parent": self.parent,
            "parent_kind": self.parent_kind,
            "data": [d.to_json() for d in self.data],
            "saved_models": [dict(s) for s in self.saved_models],
            "metrics": dict(self.metrics),
            "metadata": dict(self.metadata),
            "created_at": iso_timestamp(self.created_at),
            "created_by": self.created_by,
        }


@dataclass(frozen=True, slots=True)
class ModelRecord:
    name: str
    created_at: datetime.datetime
    checkpoint_count: int
    latest_checkpoint: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "created_at": iso_timestamp(self.created_at),
            "checkpoint_count": self.checkpoint_count,
            "latest_checkpoint": self.latest_checkpoint,
        }


class ChainLinkRecord(NamedTuple):
    model: str
    checkpoint: str
    step: int | None
    uri: str | None
    depth: int
    parent_kind: str | None
    run: str
    state: str

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "run": self.run,
            "checkpoint": self.checkpoint,
            "ref": str(CheckpointRef(self.model, self.checkpoint, self.run)),
            "state": self.state,
            "step": self.step,
            "uri": self.uri,
            "depth": self.depth,
            "parent_kind": self.parent_kind,
        }


@dataclass(frozen=True)
class LineageRecord:
    """Which data trained a checkpoint: the complete chain and every (version, role) on it.

    The entries are kept as the compact form's ``columns`` (one list per field, segments as
    ``[depth, split, …]`` pairs into ``chain``: ``recordkeeper.core.lineage.LINEAGE_COLUMNS``),
    which is how they are assembled and what ``form=compact`` answers; :attr:`data` builds the
    entries.
    """

    checkpoint: CheckpointRecord
    chain: tuple[ChainLinkRecord, ...]
    columns: Mapping[str, list[Any]]
    #: the data's history: each version trained on that recorded provenance, and its
    #: ancestors (:mod:`recordkeeper.core.data_lineage`), nearest first
    history: tuple[HistoryEntry, ...] = ()
    history_truncated: bool = False

    @cached_property
    def data(self) -> tuple[LineageEntry, ...]:
        links = [
            Segment(link.model, link.checkpoint, link.step, link.depth, (), link.run, link.state)
            for link in self.chain
        ]
        return entries_from_columns(links, self.columns)

    @property
    def versions(self) -> list[str]:
        return list(dict.fromkeys(self.columns["version"]))

    def to_json(self, *, compact: bool = False, form: str | None = None) -> dict[str, Any]:
        """The answer of ``GET …/lineage``: entries in ``data`` (``form="full"``), as columns
        (``"compact"``, or ``compact=True``) or as packed columns (``"packed"``, what each
        segment read among them); ``consumed`` when the record holds it (:meth:`consumed`),
        in ``packed`` for the packed form."""
        form = form or ("compact" if compact else "full")
        columns = self.columns
        body = {
            "checkpoint": self.checkpoint.to_json(),
            "chain": [link.to_json() for link in self.chain],
            "data": [e.to_json() for e in self.data] if form == "full" else None,
            "versions": self.versions if form != "packed" else None,
            "history": [e.to_json() for e in self.history],
            "history_truncated": self.history_truncated,
        }
        if form == "compact":
            body["compact"] = {"columns": {name: columns[name] for name in LINEAGE_COLUMNS}}
        elif form == "packed":
            body["packed"] = {
                "length": len(columns["version"]),
                "columns": pack_lineage_columns(columns),
            }
        if CONSUMED_COLUMN in columns:
            body["consumed"] = None if form == "packed" else self.consumed()
        return body

    def consumed(self) -> list[dict[str, Any]]:
        """How much of each version (per role) the chain read, in entry order (the answer's
        ``consumed``; empty unless the record was built with the versions' split sizes)."""
        if CONSUMED_COLUMN not in self.columns:
            return []
        chain = [
            (str(CheckpointRef(link.model, link.checkpoint, link.run)), link.step)
            for link in self.chain
        ]
        return consumed_from_columns(chain, self.columns)


@dataclass(frozen=True, slots=True)
class ConsumersRecord:
    """Checkpoints downstream of some versions (or of one shard's registrations)."""

    versions: tuple[Mapping[str, Any], ...]
    checkpoints: tuple[Consumer, ...]
    shards: tuple[Mapping[str, Any], ...] = ()

    def models(self) -> list[dict[str, Any]]:
        """Per model: how many checkpoints are downstream, and how many consumed directly."""
        summary: dict[str, dict[str, Any]] = {}
        for c in self.checkpoints:
            entry = summary.setdefault(c.model, {"model": c.model, "checkpoints": 0, "direct": 0})
            entry["checkpoints"] += 1
            entry["direct"] += int(c.direct)
        return [summary[name] for name in sorted(summary)]

    def to_json(self, *, limit: int, offset: int) -> dict[str, Any]:
        page = self.checkpoints[offset : offset + limit]
        body: dict[str, Any] = {
            "versions": [dict(v) for v in self.versions],
            "models": self.models(),
            "data": [c.to_json() for c in page],
            "count": len(self.checkpoints),
            "limit": limit,
            "offset": offset,
        }
        if self.shards:
            body["shards"] = [dict(s) for s in self.shards]
        return body


@dataclass(frozen=True, slots=True)
class GraphRecord:
    root: str
    depth: int
    direction: str
    nodes: tuple[Mapping[str, Any], ...]
    edges: tuple[Mapping[str, Any], ...]
    truncated: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "depth": self.depth,
            "direction": self.direction,
            "nodes": [dict(n) for n in self.nodes],
            "edges": [dict(e) for e in self.edges],
            "truncated": self.truncated,
        }


@dataclass(frozen=True, slots=True)
class ModelCheckEntryRecord:
    """One SavedModel export compared with one version (``role``: its use, or ``asked``)."""

    saved_model: str
    version: str
    role: str
    problems: tuple[InputProblem, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "saved_model": self.saved_model,
            "version": self.version,
            "role": self.role,
            "ok": not has_errors(self.problems),
            "problems": [p.to_json() for p in self.problems],
        }


@dataclass(frozen=True, slots=True)
class ModelCheckRecord:
    """Will a checkpoint's SavedModel exports accept its data and the versions asked about?"""

    checkpoint: str
    checks: tuple[ModelCheckEntryRecord, ...]
    saved_models: tuple[Mapping[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "ok": all(not has_errors(c.problems) for c in self.checks),
            "checks": [c.to_json() for c in self.checks],
            "saved_models": [dict(s) for s in self.saved_models],
        }


@dataclass(frozen=True, slots=True)
class ImpactRecord:
    """What a version or a raw source affects: the versions derived from it (any depth) and
    the checkpoints trained on any of them (``checkpoint_versions``: by checkpoint reference,
    the affected versions its own segment used)."""

    target: Mapping[str, Any]
    sources: tuple[Mapping[str, Any], ...]
    versions: tuple[Mapping[str, Any], ...]
    checkpoints: tuple[Consumer, ...]
    checkpoint_versions: Mapping[str, tuple[str, ...]]
    versions_truncated: bool = False

    def models(self) -> list[dict[str, Any]]:
        return ConsumersRecord((), self.checkpoints).models()

    def to_json(self, *, limit: int, offset: int) -> dict[str, Any]:
        page = self.checkpoints[offset : offset + limit]
        return {
            "target": dict(self.target),
            "sources": [dict(s) for s in self.sources],
            "versions": [dict(v) for v in self.versions],
            "versions_truncated": self.versions_truncated,
            "models": self.models(),
            "data": [
                {**c.to_json(), "versions": list(self.checkpoint_versions.get(str(c.ref), ()))}
                for c in page
            ],
            "count": len(self.checkpoints),
            "limit": limit,
            "offset": offset,
        }

"""Checkpoint lineage: which data trained a checkpoint, and which checkpoints used some data.

Two halves:

* pure definitions shared with the service (no I/O): model and checkpoint names, the
  ``model/checkpoint`` reference, roles, parent kinds, and :func:`normalize_data`, which turns
  what users pass as ``data=`` into wire entries;
* the client calls (:func:`register_checkpoint`, :func:`lineage`, :func:`consumers`,
  :func:`shard_consumers`, :func:`lineage_graph`, ...), each taking the HTTP helper
  (:class:`recordkeeper.http.HttpCore`), and the immutable values they return.
  :class:`recordkeeper.Client` exposes each as a method that delegates here.

A checkpoint's *segment* is the training it did since its parent checkpoint; ``data`` lists what
that segment consumed.  "Which data trained X" is the union of segments along X's parent chain
(restored from = a resumed run, initialised from = fine-tuning, possibly across models).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

from recordkeeper.core.data_lineage import HistoryEntry, history_lines
from recordkeeper.core.digests import DIGEST_PREFIX, digest_hex
from recordkeeper.core.errors import (
    AmbiguousCheckpoint,
    CheckpointNotFound,
    DeprecatedVersionWarning,
    InvalidCheckpoint,
    InvalidReference,
    InvalidRequest,
    InvalidResponse,
    NotFound,
)
from recordkeeper.core.lineage import (
    CONSUMED_COLUMN,
    CheckpointRef,
    Consumer,
    LineageEntry,
    ParentKind,
    Segment,
    checkpoint_parent,
    consumed_from_columns,
    entries_from_columns,
    parse_checkpoint_ref,
    run_of,
    unpack_lineage_columns,
    validate_checkpoint_name,
    validate_deletion_reason,
    validate_model_name,
    validate_role,
    validate_run_name,
)
from recordkeeper.core.model_inputs import InputProblem, ModelInput
from recordkeeper.core.refs import parse_reference
from recordkeeper.core.retention import data_status
from recordkeeper.core.splits import is_split_name
from recordkeeper.http import quote_segment, reading_answer
from recordkeeper.listing import Listing
from recordkeeper.provenance import source_uri

if TYPE_CHECKING:
    from recordkeeper.http import HttpCore

__all__ = [
    "CheckpointFields",
    "CheckpointInfo",
    "Consumer",
    "Consumers",
    "DataUse",
    "GraphEdge",
    "GraphNode",
    "HistoryEntry",
    "Impact",
    "Lineage",
    "LineageEntry",
    "LineageGraph",
    "ModelCheck",
    "ModelCheckEntry",
    "ModelInfo",
    "SavedModelExport",
    "Segment",
    "check_model",
    "check_model_json",
    "checkpoint",
    "checkpoints",
    "consumers",
    "impact",
    "impact_json",
    "lineage",
    "lineage_graph",
    "lineage_json",
    "mark_checkpoint_deleted",
    "models",
    "normalize_data",
    "normalize_saved_models",
    "register_checkpoint",
    "shard_consumers",
]

Direction = Literal["upstream", "downstream", "both"]


# -- data entries ------------------------------------------------------------------------


@dataclass(frozen=True)
class DataUse:
    """One entry of a segment's data: ``version`` (a reference) used as ``role``.

    ``splits=None`` lets the service choose: the split named like the role if the version has
    one (``eval`` also matches ``validation``), else every split.
    """

    version: str
    role: str = "train"
    splits: tuple[str, ...] | None = None
    #: Records the segment read from this version in this role (steps * batch size, re-reads
    #: counted); None: not counted.  Lineage answers turn it into epochs.
    records: int | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "version": self.version,
            "role": self.role,
            "splits": list(self.splits) if self.splits is not None else None,
        }
        if self.records is not None:
            body["records"] = self.records
        return body


def _version_ref(value: Any, where: str) -> str:
    """A reference string for a DatasetVersion (its exact name) or a reference string.

    Anything else is an :class:`InvalidReference` (``invalid_reference``), as the service
    answers for a bad version reference — also inside a checkpoint's data entries.
    """
    name = getattr(value, "name", None)
    if isinstance(name, str) and hasattr(value, "content_digest"):
        return name
    if isinstance(value, str):
        try:
            parse_reference(value)
        except InvalidReference as exc:
            raise InvalidReference(f"{where}: {exc.detail}") from None
        return value.strip()
    raise InvalidReference(
        f"{where}: expected a DatasetVersion or a reference such as 'coco@v3', "
        f"got {type(value).__name__}"
    )


def _splits(value: Any, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else list(value)
    if not items or not all(is_split_name(s) for s in items):
        raise InvalidCheckpoint(f"{where}: splits must be a non-empty list of split names")
    return tuple(dict.fromkeys(items))


def _records(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidCheckpoint(f"{where}: records must be a non-negative integer, got {value!r}")
    return value


def _role(value: Any, where: str) -> str:
    return validate_role(
        value,
        where,
        " (use the data mapping's keys train/eval/test, or give 'role' explicitly)",
    )


def _entry(value: Any, role: str | None, where: str) -> DataUse:
    if isinstance(value, DataUse):
        return value
    if isinstance(value, Mapping):
        unknown = set(value) - {"version", "ref", "role", "splits", "split", "digest", "records"}
        if unknown:
            raise InvalidCheckpoint(f"{where}: unknown keys {sorted(unknown)}")
        target = value.get("version", value.get("ref"))
        if target is None:
            raise InvalidCheckpoint(f"{where}: needs 'version' (a reference)")
        return DataUse(
            version=_version_ref(target, where),
            role=_role(value.get("role", role), where),
            splits=_splits(value.get("splits", value.get("split")), where),
            records=_records(value.get("records"), where),
        )
    return DataUse(version=_version_ref(value, where), role=_role(role, where))


def normalize_data(data: Any) -> list[DataUse]:
    """Turn the ``data=`` users pass into :class:`DataUse` entries.

    Accepted forms (values are :class:`~recordkeeper.DatasetVersion` objects or references)::

        {"train": v, "eval": "coco@v3"}                       # role → version
        {"train": [v1, v2]}                                   # several versions for one role
        {"train": {"version": v, "splits": ["train"]}}        # explicit splits
        [{"version": "coco@v3", "role": "eval", "splits": ["validation"]}, DataUse(...)]

    A mapping value may carry its own ``role`` (a pinned config may name entries freely).
    Duplicates are dropped; order is kept.
    """
    if data is None:
        return []
    entries: list[DataUse] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            where = f"data[{key!r}]"
            values = value if isinstance(value, list | tuple) else [value]
            for item in values:
                own_role = item.get("role") if isinstance(item, Mapping) else None
                role = own_role if own_role is not None else key
                entries.append(_entry(item, role, where))
    elif isinstance(data, Iterable) and not isinstance(data, str | bytes):
        for position, item in enumerate(data):
            entries.append(_entry(item, None, f"data[{position}]"))
    else:
        raise InvalidCheckpoint(
            f"data must be a mapping of role → version or a list of entries, "
            f"got {type(data).__name__}"
        )
    return list(dict.fromkeys(entries))


@dataclass(frozen=True)
class SavedModelExport:
    """A SavedModel exported next to a checkpoint (``ckpt-1234_saved_modules/<name>``).

    ``inputs`` is what its serving signatures parse (:func:`recordkeeper.tf.model_inputs`),
    recorded so that ``check_model`` can compare it with data; ``None`` when not read.
    """

    name: str
    uri: str
    inputs: tuple[ModelInput, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"name": self.name, "uri": self.uri}
        if self.inputs is not None:
            body["inputs"] = [i.to_json() for i in self.inputs]
        return body


def normalize_saved_models(value: Any) -> list[SavedModelExport]:
    """``{name: uri}``, ``[{"name", "uri"}]`` or :class:`SavedModelExport` list → exports."""
    if value is None:
        return []
    items: list[SavedModelExport] = []
    pairs: Iterable[Any] = value.items() if isinstance(value, Mapping) else value
    for item in pairs:
        if isinstance(item, SavedModelExport):
            items.append(item)
        elif isinstance(item, Mapping) and {"name", "uri"} <= set(item):
            raw_inputs = item.get("inputs")
            inputs = (
                None
                if raw_inputs is None
                else tuple(
                    i if isinstance(i, ModelInput) else ModelInput.from_json(i, "inputs")
                    for i in raw_inputs
                )
            )
            items.append(SavedModelExport(str(item["name"]), str(item["uri"]), inputs))
        elif isinstance(item, tuple) and len(item) == 2:
            items.append(SavedModelExport(str(item[0]), str(item[1])))
        else:
            raise InvalidCheckpoint(f"saved_models entries need a name and a uri, got {item!r}")
    for export in items:
        if not export.name or not export.uri:
            raise InvalidCheckpoint(f"saved model export {export!r} needs a name and a uri")
    return items


# -- values the service answers with -------------------------------------------------------
# (Consumer, LineageEntry and Segment are the service's own records: recordkeeper.core.lineage.)


@dataclass(frozen=True)
class CheckpointInfo:
    """A registered checkpoint of a model's run.  ``created`` is False when the registration
    already existed.  ``state`` is ``deleted`` once its files are gone (``deleted_at``,
    ``deleted_reason`` say when and how that became known); its lineage stays.  Each of
    ``data`` (its own segment's versions) carries the version's ``data_state``,
    ``data_deleted_at`` and ``data_deleted_reason`` (retention may have deleted its data)."""

    model: str
    checkpoint: str
    step: int | None = None
    uri: str | None = None
    run: str | None = None
    parent: CheckpointRef | None = None
    parent_kind: str | None = None
    data: tuple[dict[str, Any], ...] = ()
    saved_models: tuple[SavedModelExport, ...] = ()
    metrics: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: str | None = None
    created_by: str | None = None
    created: bool | None = None
    state: str = "present"
    deleted_at: str | None = None
    deleted_reason: str | None = None

    @property
    def ref(self) -> CheckpointRef:
        """``model@run/checkpoint``."""
        return CheckpointRef(self.model, self.checkpoint, self.run)

    @property
    def deleted(self) -> bool:
        return self.state == "deleted"

    @property
    def versions(self) -> list[str]:
        """Names of the versions this checkpoint's own segment consumed."""
        return list(dict.fromkeys(d["version"] for d in self.data))

    @classmethod
    @reading_answer("a checkpoint")
    def from_dict(cls, body: Mapping[str, Any]) -> CheckpointInfo:
        parent = body.get("parent")
        return cls(
            model=body["model"],
            checkpoint=body["checkpoint"],
            step=body.get("step"),
            uri=body.get("uri"),
            run=body.get("run"),
            parent=parse_checkpoint_ref(parent) if parent else None,
            parent_kind=body.get("parent_kind"),
            data=tuple(dict(d) for d in body.get("data") or ()),
            saved_models=tuple(normalize_saved_models(body.get("saved_models"))),
            metrics=dict(body.get("metrics") or {}),
            metadata=dict(body.get("metadata") or {}),
            created_at=body.get("created_at"),
            created_by=body.get("created_by"),
            created=body.get("created"),
            state=body.get("state") or "present",
            deleted_at=body.get("deleted_at"),
            deleted_reason=body.get("deleted_reason"),
        )


@dataclass(frozen=True)
class Lineage:
    """Which data trained a checkpoint: every entry along its complete parent chain.

    ``chain`` starts at the checkpoint itself and ends at the root (a checkpoint without a
    parent); each link says how it relates to the next (``restored_from``/``initialized_from``).

    A lineage read from an answer (:meth:`from_dict`) builds ``data`` (and, from a packed
    answer, ``consumed``) on first access: a long chain's answer holds ~1,000 entries, which
    ``versions``, ``chain`` and ``checkpoint`` do not need.  Equality, ``repr`` and
    :func:`dataclasses.replace` see them as plain fields.
    """

    checkpoint: CheckpointInfo
    chain: tuple[dict[str, Any], ...]
    data: tuple[LineageEntry, ...]
    #: How much of each version the chain read, per (version, role): ``records``, ``epochs``
    #: (sum over the segments that counted), ``counted_segments``, ``unknown_segments`` (used
    #: it without counting: ``epochs`` is then a lower bound) and the ``segments``.  (A
    #: factory, not a default: no class attribute, so a packed answer's is built when read.)
    consumed: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def epochs(self, version: str, role: str = "train") -> float | None:
        """Epochs of ``version`` (its name) the chain read in ``role``; None if no segment
        counted its records."""
        for entry in self.consumed:
            if entry["version"] == version and entry["role"] == role:
                return float(entry["epochs"]) if entry["counted_segments"] else None
        return None

    #: the data's history: every version trained on that recorded provenance and each of its
    #: ancestors (parents, sources, producer), nearest first
    history: tuple[HistoryEntry, ...] = ()
    history_truncated: bool = False

    if not TYPE_CHECKING:  # (type checkers see ``data`` as the field it is)

        def __getattr__(self, name: str) -> Any:
            # Called only for attributes not set on the instance: ``data`` (and ``consumed``,
            # from a packed answer) of a lineage made by from_dict, until first read.
            pending = self.__dict__.get(_PENDING.get(name, ""))
            if pending is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            built = _entries(self.chain, pending) if name == "data" else _consumed(self, pending)
            object.__setattr__(self, name, built)
            object.__setattr__(self, _PENDING[name], None)
            return built

    @property
    def versions(self) -> list[str]:
        """Distinct version names, oldest use first."""
        answered = self.__dict__.get("_versions")
        if answered is not None:
            return list(answered)
        return list(dict.fromkeys(e.version for e in self.data))

    def for_role(self, role: str) -> list[LineageEntry]:
        return [e for e in self.data if e.role == role]

    def history_of(self, version: str) -> list[HistoryEntry]:
        """The history of one version (its exact name or ``dataset@vN``): that version, then
        its ancestors nearest first; ``[]`` if it recorded no provenance."""
        by_name = {e.version: e for e in self.history}
        by_ref = {e.ref: e for e in self.history}
        first = by_name.get(version) or by_ref.get(version)
        if first is None:
            return []
        out: list[HistoryEntry] = []
        seen: set[str] = set()
        frontier = [first]
        while frontier:
            following = []
            for entry in frontier:
                if entry.version in seen:
                    continue
                seen.add(entry.version)
                out.append(entry)
                following += [
                    by_name[p["version"]] for p in entry.parents if p["version"] in by_name
                ]
            frontier = following
        return out

    def sources(self) -> list[str]:
        """Every raw source URI along the data's history (recorded order, distinct)."""
        return list(dict.fromkeys(s["uri"] for e in self.history for s in e.sources))

    def describe_data(self) -> list[str]:
        """One line per version of the history, e.g. ``coco@v3 ← coco@v2 + add_person @
        3f2a9c1 ← gs://raw/coco/annotations.json``, indented by depth
        (:func:`recordkeeper.core.data_lineage.history_lines`)."""
        return history_lines(self.history)

    def to_pandas(self) -> Any:
        """One row per entry (``pandas.DataFrame``; :mod:`recordkeeper.integrations.pandas`)."""
        from recordkeeper.integrations.pandas import to_pandas

        return to_pandas(self)

    def _repr_html_(self) -> str:
        """Notebook display (:mod:`recordkeeper.integrations.html`; every value escaped)."""
        from recordkeeper.integrations.html import lineage_html

        return lineage_html(self)

    @classmethod
    @reading_answer("a lineage")
    def from_dict(cls, body: Mapping[str, Any]) -> Lineage:
        """A lineage from the service's answer (any form); ``data`` (and a packed answer's
        ``consumed``) is built on first access."""
        lineage = object.__new__(cls)
        setattr_ = object.__setattr__
        setattr_(lineage, "checkpoint", CheckpointInfo.from_dict(body["checkpoint"]))
        setattr_(lineage, "chain", tuple(dict(link) for link in body.get("chain") or ()))
        compact, packed = body.get("compact"), body.get("packed")
        if packed is not None:
            try:
                columns = unpack_lineage_columns(packed["columns"], packed["length"])
            except (ValueError, TypeError, KeyError) as exc:
                raise InvalidResponse(
                    f"the service answered a malformed packed lineage: {exc}"
                ) from None
            setattr_(lineage, "_data_json", columns)
            # the packed form sends no `versions`: the distinct names of its version column
            setattr_(lineage, "_versions", tuple(dict.fromkeys(columns["version"])))
            if CONSUMED_COLUMN in columns:
                setattr_(lineage, "_consumed_columns", columns)
            else:
                setattr_(lineage, "consumed", ())
        else:
            setattr_(
                lineage,
                "_data_json",
                compact["columns"] if compact is not None else list(body.get("data") or ()),
            )
            setattr_(lineage, "consumed", tuple(dict(c) for c in body.get("consumed") or ()))
            versions = body.get("versions")
            setattr_(lineage, "_versions", None if versions is None else tuple(versions))
        setattr_(
            lineage,
            "history",
            tuple(HistoryEntry.from_json(e) for e in body.get("history") or ()),
        )
        setattr_(lineage, "history_truncated", bool(body.get("history_truncated")))
        return lineage


#: What :meth:`Lineage.__getattr__` builds on first access, from which pending answer part.
_PENDING = {"data": "_data_json", "consumed": "_consumed_columns"}


def _consumed(lineage: Lineage, columns: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """``consumed`` of a packed answer, from its columns and the chain's links."""
    try:
        links = [(str(link["ref"]), link.get("step")) for link in lineage.chain]
        return tuple(consumed_from_columns(links, columns))
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidResponse(f"the service answered a malformed packed lineage: {exc}") from None


def _entries(chain: Sequence[Mapping[str, Any]], pending: Any) -> tuple[LineageEntry, ...]:
    """The entries of an answer: its ``data`` list, or the compact form's ``columns``."""
    if isinstance(pending, Mapping):
        try:
            return entries_from_columns([Segment.from_json(link) for link in chain], pending)
        except (ValueError, TypeError, KeyError) as exc:
            raise InvalidResponse(
                f"the service answered a malformed compact lineage: {exc}"
            ) from None
    return tuple(LineageEntry.from_json(e) for e in pending)


@dataclass(frozen=True)
class Consumers:
    """Checkpoints and models trained on some data (``versions``; ``shards`` for a shard).

    Each of ``versions`` is the service's mapping: ``name``, ``content_digest``, ``state`` and
    ``data_state``/``data_deleted_at``/``data_deleted_reason`` (retention deleted its data: the
    checkpoints trained on it are still listed); :meth:`data_deleted` names those.
    """

    versions: tuple[dict[str, Any], ...]
    checkpoints: tuple[Consumer, ...]
    models: tuple[dict[str, Any], ...]
    count: int
    shards: tuple[dict[str, Any], ...] = ()

    @property
    def refs(self) -> list[str]:
        """``model@run/checkpoint`` of every consumer."""
        return [str(c.ref) for c in self.checkpoints]

    @property
    def model_names(self) -> list[str]:
        return [m["model"] for m in self.models]

    @property
    def data_deleted(self) -> dict[str, str]:
        """``{version: "data deleted 2026-12-01 (retention)"}`` for each of ``versions`` whose
        data was deleted (or is being deleted)."""
        return {
            v["name"]: data_status(
                v["data_state"], v.get("data_deleted_at"), v.get("data_deleted_reason")
            )
            for v in self.versions
            if (v.get("data_state") or "stored") != "stored"
        }

    def to_pandas(self) -> Any:
        """One row per consuming checkpoint (``pandas.DataFrame``)."""
        from recordkeeper.integrations.pandas import to_pandas

        return to_pandas(self)

    @classmethod
    @reading_answer("consumers")
    def from_dict(cls, body: Mapping[str, Any]) -> Consumers:
        return cls(
            versions=tuple(dict(v) for v in body.get("versions") or ()),
            checkpoints=tuple(Consumer.from_json(c) for c in body.get("data") or ()),
            models=tuple(dict(m) for m in body.get("models") or ()),
            count=int(body.get("count", 0)),
            shards=tuple(dict(s) for s in body.get("shards") or ()),
        )


@dataclass(frozen=True)
class ModelInfo:
    """A model as listed by the service."""

    name: str
    checkpoint_count: int
    latest_checkpoint: str | None
    created_at: str | None

    @classmethod
    @reading_answer("a model")
    def from_dict(cls, body: Mapping[str, Any]) -> ModelInfo:
        return cls(
            name=body["name"],
            checkpoint_count=int(body.get("checkpoint_count", 0)),
            latest_checkpoint=body.get("latest_checkpoint"),
            created_at=body.get("created_at"),
        )


@dataclass(frozen=True)
class Impact:
    """What a version or a raw source affects (:func:`impact`).

    ``versions`` are the version asked about (or those that recorded the source) at depth 0,
    then every version derived from them, each a mapping with ``name``, ``dataset``,
    ``number``, ``state``, ``depth`` and ``via`` (the ``{version, role}`` parents it derives
    through); ``sources`` the recorded sources that matched (``uri``, ``version``,
    ``identity_digest``); ``checkpoints`` every checkpoint trained on one of the versions
    (``direct``) or restored or initialised from one that was, and ``checkpoint_versions``
    which of the affected versions each direct one trained on.
    """

    target: Mapping[str, Any]
    sources: tuple[dict[str, Any], ...]
    versions: tuple[dict[str, Any], ...]
    checkpoints: tuple[Consumer, ...]
    checkpoint_versions: Mapping[str, tuple[str, ...]]
    models: tuple[dict[str, Any], ...]
    count: int
    versions_truncated: bool = False

    @property
    def version_names(self) -> list[str]:
        return [v["name"] for v in self.versions]

    @property
    def derived(self) -> list[str]:
        """The names of the versions derived from what was asked about (depth ≥ 1)."""
        return [v["name"] for v in self.versions if v.get("depth")]

    @property
    def refs(self) -> list[str]:
        """``model@run/checkpoint`` of every affected checkpoint."""
        return [str(c.ref) for c in self.checkpoints]

    @classmethod
    @reading_answer("an impact answer")
    def from_dict(cls, body: Mapping[str, Any]) -> Impact:
        rows = list(body.get("data") or ())
        return cls(
            target=dict(body.get("target") or {}),
            sources=tuple(dict(s) for s in body.get("sources") or ()),
            versions=tuple(dict(v) for v in body.get("versions") or ()),
            checkpoints=tuple(Consumer.from_json(c) for c in rows),
            checkpoint_versions={
                str(c["ref"]): tuple(c.get("versions") or ()) for c in rows if c.get("versions")
            },
            models=tuple(dict(m) for m in body.get("models") or ()),
            count=int(body.get("count") or len(rows)),
            versions_truncated=bool(body.get("versions_truncated")),
        )


@dataclass(frozen=True)
class GraphNode:
    """``id`` is ``checkpoint:<model>/<ckpt>`` or ``version:<name>``; ``attrs`` the rest.

    A version node's ``attrs`` carry its ``data_state`` (``stored``, ``deleting``,
    ``deleted``), ``data_deleted_at`` and ``data_deleted_reason``: :attr:`data_state` and
    :meth:`data_status` read them (a checkpoint node's data state is ``None``).
    """

    id: str
    kind: str
    attrs: Mapping[str, Any]

    @property
    def data_state(self) -> str | None:
        """A version node's data state (``stored`` from a service that does not say)."""
        if self.kind != "version":
            return None
        return str(self.attrs.get("data_state") or "stored")

    @property
    def data_deleted(self) -> bool:
        """Whether this is a version whose data was deleted (or is being deleted)."""
        return self.data_state not in (None, "stored")

    def data_status(self) -> str | None:
        """``data deleted 2026-12-01 (retention)``, ``data being deleted (retention)`` or
        ``stored`` for a version node; ``None`` for a checkpoint."""
        state = self.data_state
        if state is None:
            return None
        return data_status(
            state, self.attrs.get("data_deleted_at"), self.attrs.get("data_deleted_reason")
        )


@dataclass(frozen=True)
class GraphEdge:
    """Data flows ``source`` → ``target``: version → checkpoint, or parent → child."""

    source: str
    target: str
    kind: str
    attrs: Mapping[str, Any]


@dataclass(frozen=True)
class LineageGraph:
    """Nodes and edges around one node, up to ``depth`` hops in ``direction``."""

    root: str
    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    truncated: bool

    @classmethod
    @reading_answer("a lineage graph")
    def from_dict(cls, body: Mapping[str, Any]) -> LineageGraph:
        return cls(
            root=body["root"],
            nodes=tuple(
                GraphNode(
                    n["id"], n["kind"], {k: v for k, v in n.items() if k not in ("id", "kind")}
                )
                for n in body.get("nodes") or ()
            ),
            edges=tuple(
                GraphEdge(
                    e["source"],
                    e["target"],
                    e["kind"],
                    {k: v for k, v in e.items() if k not in ("source", "target", "kind")},
                )
                for e in body.get("edges") or ()
            ),
            truncated=bool(body.get("truncated")),
        )


@dataclass(frozen=True)
class ModelCheckEntry:
    """One SavedModel export compared with one version: ``role`` is how the version relates to
    the checkpoint (``train``/``eval``/``test`` from its lineage, or ``asked``)."""

    saved_model: str
    version: str
    role: str
    problems: tuple[InputProblem, ...]

    @property
    def ok(self) -> bool:
        """No problem of severity ``error``."""
        return not any(p.severity == "error" for p in self.problems)

    @classmethod
    @reading_answer("a model check")
    def from_dict(cls, body: Mapping[str, Any]) -> ModelCheckEntry:
        return cls(
            body["saved_model"],
            body["version"],
            body["role"],
            tuple(InputProblem.from_json(p) for p in body.get("problems") or ()),
        )


@dataclass(frozen=True)
class ModelCheck:
    """Will this checkpoint's SavedModel exports accept this data?  (``check_model``)"""

    checkpoint: CheckpointRef
    checks: tuple[ModelCheckEntry, ...]
    saved_models: tuple[SavedModelExport, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def problems(self) -> list[InputProblem]:
        """Every problem of every check."""
        return [p for c in self.checks for p in c.problems]

    @classmethod
    @reading_answer("a model check")
    def from_dict(cls, body: Mapping[str, Any]) -> ModelCheck:
        return cls(
            parse_checkpoint_ref(body["checkpoint"]),
            tuple(ModelCheckEntry.from_dict(c) for c in body.get("checks") or ()),
            tuple(normalize_saved_models(body.get("saved_models"))),
        )


# -- client calls ------------------------------------------------------------------------


def _q(value: str) -> str:
    return quote_segment(value)


def _checkpoint_path(ref: CheckpointRef) -> str:
    return f"/models/{_q(ref.model)}/checkpoints/{_q(ref.checkpoint)}"


def _run_params(ref: CheckpointRef) -> dict[str, str]:
    return {} if ref.run is None else {"run": ref.run}


class CheckpointFields(TypedDict, total=False):
    """What a checkpoint registration may say besides ``model`` and ``checkpoint``.

    ``step`` (a non-negative integer), ``uri`` (where the checkpoint is stored), ``data`` (the
    data its segment consumed: a role → version mapping, a list of entries, pinned data),
    ``parent`` (``"model@run/ckpt-N"``, or ``"model/ckpt-N"`` when one run has it) and
    ``parent_kind`` (default ``"restored_from"`` when a parent is given), ``saved_models``
    (exports made from it), ``run`` (default: derived from the directory of ``uri``, see
    :func:`recordkeeper.core.lineage.run_of`), ``metrics`` and ``metadata``.  Every key is
    optional; absent and ``None`` mean the same.
    """

    step: int | None
    uri: str | None
    data: Any
    parent: str | CheckpointRef | None
    parent_kind: ParentKind | None
    saved_models: Any
    run: str | None
    metrics: Mapping[str, Any] | None
    metadata: Mapping[str, Any] | None


def register_checkpoint(
    http: HttpCore, *, model: str, checkpoint: str, **fields: Unpack[CheckpointFields]
) -> CheckpointInfo:
    """Register ``model/checkpoint`` with the data its segment consumed (idempotent).

    ``fields``: see :class:`CheckpointFields`.  ``parent`` is the checkpoint this one was
    restored from (default ``parent_kind="restored_from"``) or initialised from
    (``"initialized_from"``; the parent may belong to another model).  Registering the same
    checkpoint again with the same lineage answers the existing record (``created=False``);
    different lineage raises :class:`~recordkeeper.errors.CheckpointConflict`.  The request is
    a ``PUT``, so the HTTP helper retries it safely on connection errors and 5xx answers.
    """
    body = checkpoint_body(model=model, checkpoint=checkpoint, **fields)
    ref = CheckpointRef(body.pop("model"), body.pop("checkpoint"))
    answer = http.api("PUT", _checkpoint_path(ref), json=body)
    info = CheckpointInfo.from_dict(answer)
    warn_deprecated_data(info, stacklevel=3)
    return info


def warn_deprecated_data(info: CheckpointInfo, *, stacklevel: int = 2) -> None:
    """Warn (:class:`~recordkeeper.values.DeprecatedVersionWarning`, with the reason) once per
    deprecated version ``info``'s own segment trained on (the service marks them).  The message
    names the run, not the checkpoint, so Python's default filter shows it once per run and
    version rather than at every save."""
    seen: set[str] = set()
    for entry in info.data:
        name = str(entry.get("version"))
        if entry.get("state") != "deprecated" or name in seen:
            continue
        seen.add(name)
        reason = entry.get("deprecated_reason")
        warnings.warn(
            DeprecatedVersionWarning(
                f"{info.model}@{info.run} trains on {name}, which is deprecated"
                f"{f': {reason}' if reason else ''}; registered anyway (a lock or load_pinned "
                "would refuse it)"
            ),
            stacklevel=stacklevel + 1,
        )


def mark_checkpoint_deleted(
    http: HttpCore,
    ref: str | CheckpointRef,
    *,
    reason: str = "max_to_keep",
    deleted_at: str | None = None,
) -> CheckpointInfo:
    """Record that the files of ``ref`` (``model@run/ckpt-N``) were deleted; idempotent.

    Its lineage stays: it is shown as deleted everywhere.  ``deleted_at`` is an ISO 8601
    timestamp (default: now, on the service).
    """
    parsed = parse_checkpoint_ref(ref)
    body = {"run": parsed.run, "reason": validate_deletion_reason(reason), "deleted_at": deleted_at}
    answer = http.api("PUT", _checkpoint_path(parsed) + "/deletion", json=body)
    return CheckpointInfo.from_dict(answer)


def checkpoint_body(
    *, model: str, checkpoint: str, **fields: Unpack[CheckpointFields]
) -> dict[str, Any]:
    """Validate a registration and build its JSON form (also what the offline queue stores)."""
    unknown = sorted(set(fields) - CheckpointFields.__optional_keys__)
    if unknown:  # what a signature listing the fields would refuse
        raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
    validate_model_name(model)
    validate_checkpoint_name(checkpoint)
    step = fields.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise InvalidCheckpoint(f"step must be a non-negative integer, got {step!r}")
    uri = fields.get("uri")
    run = run_of(fields.get("run"), uri)
    own = CheckpointRef(model, checkpoint, run)
    parent_ref, parent_kind = checkpoint_parent(
        own, fields.get("parent"), fields.get("parent_kind")
    )
    return {
        "model": model,
        "checkpoint": checkpoint,
        "step": step,
        "uri": uri,
        "run": run,
        "parent": str(parent_ref) if parent_ref else None,
        "parent_kind": parent_kind,
        "data": [d.to_json() for d in normalize_data(fields.get("data"))],
        "saved_models": [s.to_json() for s in normalize_saved_models(fields.get("saved_models"))],
        "metrics": dict(fields.get("metrics") or {}),
        "metadata": dict(fields.get("metadata") or {}),
    }


def checkpoint(http: HttpCore, ref: str | CheckpointRef) -> CheckpointInfo:
    """One registered checkpoint (``"model@run/ckpt-N"``, or ``"model/ckpt-N"`` when a single
    run has it; else :class:`~recordkeeper.errors.AmbiguousCheckpoint` lists the candidates)."""
    parsed = parse_checkpoint_ref(ref)
    answer = http.api("GET", _checkpoint_path(parsed), params=_run_params(parsed))
    return CheckpointInfo.from_dict(answer)


def _path_forms(location: str) -> set[str]:
    """The spellings of one checkpoint location to compare: a URI as it is, a local path (or
    ``file://`` URI) as given and as an absolute path of the current directory."""
    text = location.strip().rstrip("/")
    if text.startswith("file://"):
        text = text[len("file://") :]
    if "://" in text:
        return {text}
    return {text, os.path.abspath(text)}


def checkpoint_at(http: HttpCore, location: str) -> CheckpointInfo:
    """The registered checkpoint whose URI is ``location`` — the checkpoint prefix a training
    script prints (``checkpoints/mnist/ckpt-2``, an absolute path, ``file://`` or ``s3://`` URI).

    Its last component names the checkpoint; each model's checkpoints of that name (every run)
    are compared by URI, relative paths resolved against the current directory.  No match
    raises :class:`~recordkeeper.errors.CheckpointNotFound`; several (the same path registered
    by two models) :class:`~recordkeeper.errors.AmbiguousCheckpoint` with the candidates.
    """
    if not isinstance(location, str):
        raise InvalidCheckpoint(
            f"a checkpoint location is a path or URI (a string), got {type(location).__name__}"
        )
    wanted = _path_forms(location)
    name = location.strip().rstrip("/").rpartition("/")[2]
    try:
        validate_checkpoint_name(name)
    except InvalidCheckpoint:
        raise InvalidCheckpoint(
            f"{location!r} is neither a checkpoint reference ('model/checkpoint', "
            "'model@run/checkpoint') nor a checkpoint path ending in a checkpoint name"
        ) from None
    found: list[CheckpointInfo] = []
    for model in models(http):
        try:
            candidates = [checkpoint(http, CheckpointRef(model.name, name))]
        except NotFound:
            continue
        except AmbiguousCheckpoint as exc:
            candidates = [checkpoint(http, ref) for ref in exc.extra.get("candidates") or ()]
        found.extend(c for c in candidates if c.uri and _path_forms(c.uri) & wanted)
    if not found:
        raise CheckpointNotFound(
            f"no registered checkpoint is stored at {location!r} (looked for checkpoints named "
            f"{name!r} in every model, by URI); name it as 'model/checkpoint' instead",
            checkpoint=location,
        )
    if len(found) > 1:
        refs = [str(c.ref) for c in found]
        raise AmbiguousCheckpoint(
            f"{location!r} is the path of {len(found)} registered checkpoints: "
            f"{', '.join(refs)}; name one of them",
            candidates=refs,
        )
    return found[0]


def checkpoint_ref_or_path(http: HttpCore, text: str) -> CheckpointRef:
    """``text`` as a checkpoint reference, or else as the path of a registered checkpoint
    (:func:`checkpoint_at`): what ``recordkeeper lineage`` accepts."""
    try:
        return parse_checkpoint_ref(text)
    except InvalidCheckpoint:
        if "/" not in text:
            raise
    return checkpoint_at(http, text).ref


def checkpoints(
    http: HttpCore,
    model: str,
    *,
    run: str | None = None,
    state: Literal["present", "deleted"] | None = None,
    limit: int | None = None,
    data: Any = None,
    direct: bool = False,
) -> Listing[CheckpointInfo]:
    """Checkpoints of ``model`` (of one ``run``; only ``present`` or ``deleted`` ones),
    highest step first, each with its exports (``saved_models``) and ``state``.

    ``data`` (a reference such as ``"coco@v3"``, or a DatasetVersion) keeps the checkpoints
    trained on that version: in their own segment, or (unless ``direct``) inherited from a
    checkpoint they were restored or initialised from.
    """
    validate_model_name(model)
    params = {"run": validate_run_name(run) if run is not None else None, "state": state}
    wanted: set[str] | None = None
    if data is not None:
        used = consumers(http, data, transitive=not direct)
        wanted = {str(c.ref) for c in used.checkpoints if c.model == model}
    found: Listing[CheckpointInfo] = Listing()
    for body in http.paged(f"/models/{_q(model)}/checkpoints", params, None):
        info = CheckpointInfo.from_dict(body)
        if wanted is None or str(info.ref) in wanted:
            found.append(info)
            if limit is not None and len(found) >= limit:
                break
    return found


def models(
    http: HttpCore, prefix: str | None = None, *, limit: int | None = None
) -> list[ModelInfo]:
    """Every model that has checkpoints (optionally only names starting with ``prefix``)."""
    return [ModelInfo.from_dict(m) for m in http.paged("/models", {"prefix": prefix}, limit)]


def lineage(http: HttpCore, ref: str | CheckpointRef) -> Lineage:
    """Which data trained ``model/ckpt``: the complete union along its parent chain.

    Asked in the packed form (entries and what each segment read as packed columns: ~40 % of
    the compact form's bytes on a long chain, and no per-entry objects until ``data`` or
    ``consumed`` is read); from a service without it (it refuses the ``form`` value: asked
    once per client), in the compact form."""
    parsed = parse_checkpoint_ref(ref)
    path = _checkpoint_path(parsed) + "/lineage"
    answer = http.get_in_form(path, _run_params(parsed), "lineage", ("packed", "compact"))
    return Lineage.from_dict(answer)


def lineage_json(http: HttpCore, ref: str | CheckpointRef, *, form: str = "full") -> dict[str, Any]:
    """The service's lineage answer for ``model/ckpt`` as JSON (what ``lineage --json`` prints);
    ``form="compact"`` gives the entries as columns, ``"packed"`` as packed columns
    (docs/rest-api.md)."""
    parsed = parse_checkpoint_ref(ref)
    params = {**_run_params(parsed), **({"form": form} if form != "full" else {})}
    answer: dict[str, Any] = http.api("GET", _checkpoint_path(parsed) + "/lineage", params=params)
    return answer


def check_model_json(
    http: HttpCore, ref: str | CheckpointRef, data: Iterable[Any] = ()
) -> dict[str, Any]:
    """The service's ``check_model`` answer as JSON (what ``check-model --json`` prints)."""
    parsed = parse_checkpoint_ref(ref)
    versions = [_version_ref(v, "check_model data") for v in data]
    params: dict[str, Any] = {**_run_params(parsed), "data": versions}
    answer: dict[str, Any] = http.api(
        "GET", _checkpoint_path(parsed) + "/model-check", params=params
    )
    return answer


def check_model(http: HttpCore, ref: str | CheckpointRef, data: Iterable[Any] = ()) -> ModelCheck:
    """Will the SavedModel exports of checkpoint ``ref`` accept data?  Their recorded serving
    inputs are compared with the schema of every version the checkpoint trained on (its
    lineage) and of each version in ``data`` (references or DatasetVersions): missing features,
    dtype and shape mismatches (see :mod:`recordkeeper.core.model_inputs`)."""
    return ModelCheck.from_dict(check_model_json(http, ref, data))


def _consumers(
    http: HttpCore, path: str, params: Mapping[str, Any], limit: int | None
) -> Consumers:
    page = 10_000 if limit is None else max(1, min(limit, 10_000))
    rows: list[dict[str, Any]] = []
    first: Mapping[str, Any] | None = None
    for body in http.pages(path, params, page=page):
        first = first or body
        rows.extend(body.get("data") or [])
        if limit and len(rows) >= limit:
            break
    merged = dict(first or {})
    merged["data"] = rows[:limit] if limit else rows
    return Consumers.from_dict(merged)


def consumers(
    http: HttpCore,
    ref: Any,
    *,
    transitive: bool = True,
    limit: int | None = None,
) -> Consumers:
    """Checkpoints and models trained on a version (``ref`` or a DatasetVersion).

    With ``transitive`` (the default) checkpoints that inherited the data from an ancestor
    (resumed or fine-tuned from a direct consumer) are included, marked ``direct=False``.
    """
    target = _version_ref(ref, "consumers")
    path = f"/versions/{_q(target)}/consumers"
    return _consumers(http, path, {"transitive": str(transitive).lower()}, limit)


def shard_consumers(
    http: HttpCore,
    uri_or_sha256: str,
    *,
    transitive: bool = True,
    limit: int | None = None,
) -> Consumers:
    """Checkpoints trained on one shard, given its URI or its sha256 (impact of a bad shard).

    Only segments that used the shard's split count.  ``Consumers.shards`` lists the shard
    registrations that matched (one file may belong to several versions).
    """
    if not isinstance(uri_or_sha256, str) or not uri_or_sha256.strip():
        raise InvalidCheckpoint("give a shard URI or its sha256")
    value = uri_or_sha256.strip()
    params: dict[str, Any] = {"transitive": str(transitive).lower()}
    if "://" in value:
        params["uri"] = value
    elif value.startswith(DIGEST_PREFIX) or len(value) == 64:
        params["sha256"] = digest_hex(value, "sha256")  # InvalidHash unless 64 lowercase hex
    else:
        raise InvalidCheckpoint(
            f"{value!r} is neither a shard URI (scheme://...) nor a sha256 (64 hex digits)"
        )
    return _consumers(http, "/shards/consumers", params, limit)


def impact_json(
    http: HttpCore,
    *,
    version: Any = None,
    source: str | None = None,
    prefix: bool = False,
    transitive: bool = True,
    limit: int | None = None,
) -> dict[str, Any]:
    """The service's impact answer (every page merged) as JSON (what ``impact --json``
    prints)."""
    if (version is None) == (source is None):  # the caller's request, not a checkpoint
        raise InvalidRequest("impact: give exactly one of version= or source=")
    params: dict[str, Any] = {"transitive": str(transitive).lower()}
    if version is not None:
        params["version"] = _version_ref(version, "impact")
    else:
        if not isinstance(source, str) or not source.strip():
            raise InvalidRequest("impact: source must be a URI (a file or a prefix)")
        params["source"] = source_uri(source.strip())
        params["prefix"] = str(bool(prefix)).lower()
    page = 10_000 if limit is None else max(1, min(limit, 10_000))
    rows: list[dict[str, Any]] = []
    first: Mapping[str, Any] | None = None
    for body in http.pages("/lineage/impact", params, page=page):
        first = first or body
        rows.extend(body.get("data") or [])
        if limit and len(rows) >= limit:
            break
    merged = dict(first or {})
    merged["data"] = rows[:limit] if limit else rows
    return merged


def impact(
    http: HttpCore,
    *,
    version: Any = None,
    source: str | None = None,
    prefix: bool = False,
    transitive: bool = True,
    limit: int | None = None,
) -> Impact:
    """What a version (a reference or DatasetVersion) or a raw source URI affects: every
    version derived from it through provenance parents (any depth) and every checkpoint
    trained on one of them ("this raw annotation file was wrong — what is affected?").

    ``source`` matches versions that recorded that URI, or a prefix it lies under (a file
    inside a recorded directory); a local path is asked as its ``file://`` URI, as a publish
    with that path recorded it (:func:`recordkeeper.provenance.source_uri`); ``prefix=True``
    also matches sources recorded under it. With ``transitive`` (the default) checkpoints
    restored or initialised from an affected one are included (``direct=False``).
    """
    return Impact.from_dict(
        impact_json(
            http,
            version=version,
            source=source,
            prefix=prefix,
            transitive=transitive,
            limit=limit,
        )
    )


def lineage_graph(
    http: HttpCore,
    *,
    checkpoint: str | CheckpointRef | None = None,
    version: Any = None,
    depth: int = 3,
    direction: Direction = "both",
    source: str | None = None,
) -> LineageGraph:
    """The lineage graph around a checkpoint, a version or a recorded raw source URI,
    ``depth`` hops each way (versions' parents and sources included)."""
    if sum(x is not None for x in (checkpoint, version, source)) != 1:
        raise InvalidCheckpoint("give exactly one of checkpoint=, version= or source=")
    params: dict[str, Any] = {"depth": depth, "direction": direction}
    if checkpoint is not None:
        params["checkpoint"] = str(parse_checkpoint_ref(checkpoint))
    elif source is not None:
        params["source"] = source
    else:
        params["version"] = _version_ref(version, "lineage_graph")
    return LineageGraph.from_dict(http.api("GET", "/lineage/graph", params=params))

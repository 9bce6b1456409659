"""Lineage under ``/api/v1``: register checkpoints, upstream, downstream, graph.

=====================================================  ===========================================
``PUT  /models/{model}/checkpoints/{checkpoint}``      register (idempotent): 201 new, 200 same
``PUT  /models/{model}/checkpoints/{ckpt}/deletion``   record that its files were deleted
``GET  /models``                                       models with checkpoint counts
``GET  /models/{model}/checkpoints``                   checkpoints, highest step first
``GET  /models/{model}/checkpoints/{checkpoint}``      one checkpoint (``?run=``)
``GET  /models/{model}/checkpoints/{ckpt}/lineage``    which data trained it (complete chain)
``GET  /models/{model}/checkpoints/{ckpt}/model-check``  will its SavedModels accept data
``GET  /versions/{ref}/consumers``                     checkpoints trained on a version
``GET  /shards/consumers?uri=…|sha256=…``              checkpoints trained on one shard
``GET  /lineage/impact?version=…|source=…``            derived versions + checkpoints affected
``GET  /lineage/graph?checkpoint=…|version=…``         nodes and edges, bounded depth
=====================================================  ===========================================

A checkpoint is ``(model, run, checkpoint)``; the routes that read one take ``?run=``.  Without
it they answer when exactly one run has that checkpoint, else ``409 ambiguous_checkpoint``
listing the candidates.

An upstream answer changes only when a state it shows changes (the lineage epoch, see
``repository.lineage.epoch``): it is rendered once per (checkpoint, epoch, form), kept per
process, and carries an ``ETag`` (``If-None-Match`` → ``304``).

As everywhere, request models check JSON *types* only (wrong types → ``422 invalid_request``);
names, roles, splits and references are checked by the repository so that bad input gets its
precise code (``invalid_checkpoint``, ``invalid_reference``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, Literal, get_args

import anyio.to_thread
import orjson
from fastapi import APIRouter, Query, Request, Response
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from recordkeeper.core.limits import MAX_INT64
from recordkeeper.core.lineage import CHECKPOINT_STATES, PARENT_KINDS, ROLES, CheckpointRef
from recordkeeper_service.deps import (
    MAX_OFFSET,
    HeavyReads,
    Limit,
    Offset,
    Reader,
    RepositoryDep,
    Writer,
    get_principal,
)
from recordkeeper_service.repository import Repository
from recordkeeper_service.repository.lineage import (
    GRAPH_NODES,
    MAX_GRAPH_DEPTH,
    MAX_GRAPH_NODES,
    CheckpointInput,
    DataInput,
    LineageHead,
)
from recordkeeper_service.routes.common import (
    AUTHENTICATED,
    NOT_MODIFIED,
    IfNoneMatch,
    InModel,
    Int64,
    JsonObject,
    ListOut,
    OutModel,
    entity_tag,
    errors,
    etag_matches,
    not_modified,
)
from recordkeeper_service.routes.hot import HOT_PARAMS, HotRoute, Parse, boolean, choice, integer

__all__ = [
    "ChainLinkOut",
    "CheckpointIn",
    "CheckpointOut",
    "ConsumedOut",
    "ConsumedSegmentOut",
    "ConsumedVersionOut",
    "ConsumerOut",
    "ConsumersOut",
    "DataIn",
    "DataOut",
    "DeletionIn",
    "GraphOut",
    "HistoryEntryOut",
    "HotLineageRoute",
    "ImpactOut",
    "InputProblemOut",
    "LineageEntryOut",
    "LineageOut",
    "ModelCheckEntryOut",
    "ModelCheckOut",
    "ModelInputIn",
    "ModelOut",
    "PackedLineageOut",
    "SavedModelIn",
    "SegmentOut",
    "consumers_response",
    "hot_lineage_routes",
    "lineage_etag",
    "lineage_response",
    "router",
]


class DataIn(InModel):
    version: str = Field(examples=["coco@v3", "coco_20231015_v3"])
    role: str = Field(default="train", examples=list(ROLES))
    splits: list[str] | None = Field(
        default=None,
        description="default: the split named like the role (eval: also 'validation'), "
        "else every split",
    )
    records: int | None = Field(
        default=None,
        ge=0,
        le=MAX_INT64,
        description="records this segment read from the version in this role (steps * batch "
        "size; re-reads counted): how much of it the checkpoint saw",
    )


class ModelInputIn(InModel):
    """What a serving signature parses: one key (see recordkeeper.core.model_inputs)."""

    name: str = Field(examples=["image/encoded"])
    kind: str = Field(examples=["dense", "sparse", "ragged", "tensor"])
    dtype: str = Field(examples=["string", "float32", "int64"])
    shape: list[Int64 | None] | None = Field(default=None, examples=[[3]])
    has_default: bool = False
    signature: str | None = None


class SavedModelIn(InModel):
    name: str = Field(examples=["classifier"])
    uri: str = Field(examples=["s3://models/run1/ckpt-1234_saved_modules/classifier"])
    inputs: list[ModelInputIn] | None = Field(
        default=None, description="what its serving signatures parse (for model-check)"
    )


class CheckpointIn(InModel):
    """``PUT /models/{model}/checkpoints/{checkpoint}``."""

    step: int | None = Field(default=None, ge=0, le=MAX_INT64, examples=[1234])
    uri: str | None = Field(default=None, examples=["s3://models/run1/ckpt-1234"])
    run: str | None = Field(
        default=None,
        max_length=128,
        examples=["sweep-7"],
        description="default: derived from the directory of `uri` (the same directory is the "
        "same run), else 'default'",
    )
    parent: str | None = Field(default=None, examples=["coco_detection/ckpt-1000"])
    parent_kind: str | None = Field(default=None, examples=list(PARENT_KINDS))
    data: list[DataIn] = Field(default_factory=list)
    saved_models: list[SavedModelIn] = Field(default_factory=list)
    metrics: JsonObject = Field(default_factory=dict)
    metadata: JsonObject = Field(default_factory=dict)

    def to_input(self) -> CheckpointInput:
        return CheckpointInput(
            step=self.step,
            uri=self.uri,
            run=self.run or None,
            parent=self.parent or None,
            parent_kind=self.parent_kind,
            data=tuple(
                DataInput(
                    version=d.version,
                    role=d.role,
                    splits=tuple(d.splits) if d.splits is not None else None,
                    records=d.records,
                )
                for d in self.data
            ),
            saved_models=tuple(
                {
                    "name": s.name,
                    "uri": s.uri,
                    "inputs": None if s.inputs is None else [i.model_dump() for i in s.inputs],
                }
                for s in self.saved_models
            ),
            metrics=self.metrics,
            metadata=self.metadata,
        )


class DeletionIn(InModel):
    """``PUT /models/{model}/checkpoints/{checkpoint}/deletion``."""

    run: str | None = Field(default=None, max_length=128, examples=["run1-3f2a9c1b7e"])
    reason: str = Field(default="max_to_keep", examples=["max_to_keep", "files_missing"])
    deleted_at: str | None = Field(
        default=None,
        examples=["2026-11-30T12:00:00Z"],
        description="when the files were deleted, ISO 8601 with an offset (default: now)",
    )


DataState = Literal["stored", "deleting", "deleted"]
_DATA_STATE = (
    "whether the version's objects are stored: 'deleting' once retention released them, "
    "'deleted' after (the lineage stays; reading its records answers 409 version_data_deleted)"
)
_DATA_DELETED_AT = "when retention deleted the version's data (null unless 'deleted')"
_DATA_DELETED_REASON = "what deleted (or is deleting) it: 'retention' or 'gc'"


class DataOut(OutModel):
    version: str
    dataset: str
    content_digest: str | None
    data_state: DataState = Field(description=_DATA_STATE)
    data_deleted_at: str | None = Field(description=_DATA_DELETED_AT)
    data_deleted_reason: str | None = Field(description=_DATA_DELETED_REASON)
    role: str
    splits: list[str]
    state: str | None = Field(
        default=None,
        description="'deprecated' when the version was deprecated (null otherwise)",
    )
    deprecated_reason: str | None = Field(
        default=None, description="why it was deprecated (only with state 'deprecated')"
    )


class CheckpointOut(OutModel):
    model: str
    checkpoint: str
    ref: str = Field(description="model@run/checkpoint")
    state: str = Field(examples=list(CHECKPOINT_STATES))
    deleted_at: str | None
    deleted_reason: str | None
    step: int | None
    uri: str | None
    run: str
    parent: str | None
    parent_kind: str | None
    data: list[DataOut]
    saved_models: list[dict[str, Any]]
    metrics: dict[str, Any]
    metadata: dict[str, Any]
    created_at: str
    created_by: str
    created: bool | None = Field(default=None, description="only in the answer to a PUT")


class ModelOut(OutModel):
    name: str
    created_at: str
    checkpoint_count: int
    latest_checkpoint: str | None


class SegmentOut(OutModel):
    model: str
    run: str | None
    checkpoint: str
    ref: str
    state: str
    step: int | None
    depth: int
    splits: list[str]


class LineageEntryOut(OutModel):
    version: str
    dataset: str
    number: int
    content_digest: str | None
    state: str
    data_state: DataState = Field(description=_DATA_STATE)
    data_deleted_at: str | None = Field(description=_DATA_DELETED_AT)
    data_deleted_reason: str | None = Field(description=_DATA_DELETED_REASON)
    role: str
    splits: list[str]
    segments: list[SegmentOut]


class ChainLinkOut(OutModel):
    model: str
    run: str
    checkpoint: str
    ref: str
    state: str
    step: int | None
    uri: str | None
    depth: int
    parent_kind: str | None


class LineageColumnsOut(OutModel):
    """The entries as one array per field (``recordkeeper.core.lineage.LINEAGE_COLUMNS``)."""

    version: list[str]
    dataset: list[str]
    number: list[int]
    content_digest: list[str | None]
    state: list[str]
    data_state: list[DataState]
    data_deleted_at: list[str | None]
    data_deleted_reason: list[str | None]
    role: list[str]
    uses: list[list[int | str]] = Field(
        description="per entry `[depth, split, depth, split, …]`: the chain link at that depth "
        "used the version with that split (deepest first); the entry's splits are the distinct "
        "splits, its segments the links"
    )


class CompactLineageOut(OutModel):
    columns: LineageColumnsOut


class PackedLineageOut(OutModel):
    """The entries as packed columns (``recordkeeper.core.lineage.unpack_lineage_columns``)."""

    length: int = Field(description="the number of entries: every column expands to as many")
    columns: dict[str, Any] = Field(
        description="the compact form's columns and `consumed` (per entry `[split_records, "
        "records, …]`, one pair per segment of its `uses`), each a plain array, "
        '`{"runs": [[value, repeat], …]}` or `{"lines": "a\\nb…"}`'
    )


class ConsumedSegmentOut(OutModel):
    checkpoint: str = Field(description="the checkpoint whose segment this is (model@run/ckpt)")
    step: int | None
    splits: list[str]
    split_records: int = Field(description="records of those splits in the version")
    records: int | None = Field(description="records the segment read; null: not counted")
    epochs: float | None = Field(description="records / split_records; null: not counted")


class ConsumedOut(OutModel):
    """How much of one version (in one role) the chain read (docs/lineage.md)."""

    version: str
    role: str
    records: int = Field(description="records read by the counted segments")
    epochs: float = Field(
        description="sum of the counted segments' epochs (a lower bound when unknown_segments > 0)"
    )
    counted_segments: int
    unknown_segments: int
    segments: list[ConsumedSegmentOut]


class HistoryParentOut(OutModel):
    version: str
    dataset: str
    number: int | None
    role: str = Field(examples=["base", "source", "labels"])


class HistorySourceOut(OutModel):
    uri: str = Field(examples=["gs://raw/coco/annotations.json"])
    identity: dict[str, Any] | None = Field(
        description="method, digest, files, size: the listing identity recorded at stage"
    )


class HistoryProducerOut(OutModel):
    vcs: str
    commit: str | None
    remote: str | None
    branch: str | None
    dirty: bool | None
    diff_digest: str | None
    entry: str | None


class HistoryEntryOut(OutModel):
    """What one version was made of (docs/lineage.md § Lineage through the data)."""

    version: str
    dataset: str
    number: int | None
    desc: str | None
    content_digest: str | None
    state: str
    depth: int = Field(
        description="parent links from the versions the chain trained on (0: one of them)"
    )
    parents: list[HistoryParentOut]
    sources: list[HistorySourceOut]
    producer: HistoryProducerOut | None
    params_digest: str | None


class LineageOut(OutModel):
    checkpoint: CheckpointOut
    chain: list[ChainLinkOut]
    data: list[LineageEntryOut] | None = Field(
        description="the entries (form=full); null with form=compact"
    )
    versions: list[str] | None = Field(
        description="the distinct version names, oldest use first; null with form=packed "
        "(the distinct names of its `version` column)"
    )
    history: list[HistoryEntryOut] = Field(
        description="the data's history: every version trained on that recorded provenance "
        "and every ancestor of one (through parents, any depth), nearest first"
    )
    history_truncated: bool = Field(
        description="the walk stopped at its guard (100,000 versions); never on real chains"
    )
    compact: CompactLineageOut | None = Field(
        default=None, description="the entries as columns (form=compact only)"
    )
    packed: PackedLineageOut | None = Field(
        default=None,
        description="the entries and what each segment read, as packed columns (form=packed only)",
    )
    consumed: list[ConsumedOut] | None = Field(
        default_factory=list,
        description="how much of each version the chain read (segments that counted records), "
        "in entry order; null with form=packed (the `consumed` column of `packed`)",
    )


class ConsumerOut(OutModel):
    model: str
    run: str | None
    checkpoint: str
    ref: str
    state: str
    step: int | None
    uri: str | None
    direct: bool
    roles: list[str]
    splits: list[str]
    parent: str | None


class ConsumedVersionOut(OutModel):
    """A version a consumers answer is about."""

    name: str
    content_digest: str | None
    state: str
    data_state: DataState = Field(description=_DATA_STATE)
    data_deleted_at: str | None = Field(description=_DATA_DELETED_AT)
    data_deleted_reason: str | None = Field(description=_DATA_DELETED_REASON)


class ConsumersOut(OutModel):
    versions: list[ConsumedVersionOut]
    models: list[dict[str, Any]]
    data: list[ConsumerOut]
    count: int
    limit: int
    offset: int
    shards: list[dict[str, Any]] | None = None


class ImpactVersionOut(ConsumedVersionOut):
    dataset: str
    number: int | None
    depth: int = Field(description="parent links below the version or source asked about")
    via: list[dict[str, str]] = Field(
        description="the parents (version, role) through which it derives (depth > 0)"
    )


class ImpactSourceOut(OutModel):
    uri: str = Field(description="the source as the version recorded it")
    version: str
    identity_digest: str | None


class ImpactConsumerOut(ConsumerOut):
    versions: list[str] = Field(
        description="the affected versions its own segment trained on (empty: inherited)"
    )


class ImpactOut(OutModel):
    target: dict[str, Any]
    sources: list[ImpactSourceOut] = Field(description="the recorded sources that matched")
    versions: list[ImpactVersionOut] = Field(
        description="the version asked about, or those that recorded the source, then every "
        "version derived from them (any depth)"
    )
    versions_truncated: bool
    models: list[dict[str, Any]]
    data: list[ImpactConsumerOut]
    count: int
    limit: int
    offset: int


class InputProblemOut(OutModel):
    problem: str = Field(
        examples=["missing_feature", "dtype_mismatch", "shape_mismatch", "not_compared"]
    )
    severity: str = Field(examples=["error", "warning", "info"])
    feature: str | None
    detail: str


class ModelCheckEntryOut(OutModel):
    saved_model: str
    version: str
    role: str = Field(description="train/eval/test (its lineage) or asked")
    ok: bool
    problems: list[InputProblemOut]


class ModelCheckOut(OutModel):
    checkpoint: str
    ok: bool
    checks: list[ModelCheckEntryOut]
    saved_models: list[dict[str, Any]]


class GraphOut(OutModel):
    root: str
    depth: int
    direction: str
    nodes: list[dict[str, Any]] = Field(
        description="checkpoints (model, run, checkpoint, state, step, uri) and versions "
        "(name, dataset, number, content_digest, state, data_state, data_deleted_at, "
        "data_deleted_reason), each with its id, kind, upstream_count and downstream_count"
    )
    edges: list[dict[str, Any]]
    truncated: bool


def render_lineage(body: dict[str, Any]) -> bytes:
    """The JSON of an upstream answer (``LineageRecord.to_json``), once per (checkpoint, epoch,
    form).

    Serialised as it is by orjson (as every stored checkpoint was checked to render when it was
    written: ``ensure_renderable``), without building ``LineageOut`` first: the record's JSON
    has the model's fields in the model's order (``created``, only in the answer to a PUT, left
    out), so the bytes are those of the model's rendering with ``exclude_unset``
    (``tests/service/test_lineage_answers.py`` compares them on every kind of answer), at a
    tenth of the time for a long chain (~1,000 entries: validating them into models and
    serialising those took ~8 ms here; pydantic's untyped serialiser ~1 ms).
    """
    return orjson.dumps(body)


def lineage_etag(head: LineageHead, form: str = "full") -> str:
    """The ``ETag`` of a checkpoint's upstream answer: its key (checkpoint, lineage epoch) and,
    for the compact form, the form.

    Weak: the answer is the same JSON value for every way of naming the checkpoint, not
    necessarily the same bytes across service releases.
    """
    return entity_tag(*head.key, *(() if form == "full" else (form,)), weak=True)


router = APIRouter(tags=["lineage"], responses=AUTHENTICATED)

#: Consumers answers may be long (every checkpoint below a version); pages go up to 10,000.
#: The page size of the consumer listings (``limit``): the default and the largest.
DEFAULT_CONSUMERS_PAGE, MAX_CONSUMERS_PAGE = 1000, 10_000
ConsumerLimit = Annotated[
    int, Query(ge=1, le=MAX_CONSUMERS_PAGE, description=f"page size (1-{MAX_CONSUMERS_PAGE})")
]
#: The forms of an upstream answer (``form``).
LineageForm = Literal["full", "compact", "packed"]
Transitive = Annotated[
    bool,
    Query(description="include checkpoints restored or initialised from a direct consumer"),
]
RunQuery = Annotated[
    str | None,
    Query(max_length=128, description="the checkpoint's run (needed when several runs have it)"),
]


def _ref(model: str, checkpoint: str, run: str | None) -> str:
    return str(CheckpointRef(model, checkpoint, run))


def _mark_deprecated(repository: Repository, checkpoints: list[dict[str, Any]]) -> None:
    """Mark each data entry of ``checkpoints`` whose version is deprecated (``state``,
    ``deprecated_reason``), so that registering, listing and showing checkpoints say so."""
    names = {d["version"] for c in checkpoints for d in c.get("data") or ()}
    deprecated = repository.versions.deprecations(names)
    if not deprecated:
        return
    for c in checkpoints:
        for d in c.get("data") or ():
            if d["version"] in deprecated:
                d["state"] = "deprecated"
                d["deprecated_reason"] = deprecated[d["version"]]


@router.put(
    "/models/{model}/checkpoints/{checkpoint}",
    response_model=CheckpointOut,
    response_model_exclude_unset=True,  # a data entry's `state` only when it is deprecated
    responses={
        201: {"model": CheckpointOut, "description": "registered now"},
        **errors(400, 404, 409, 413),
    },
)
def register_checkpoint(
    model: str,
    checkpoint: str,
    body: CheckpointIn,
    repository: RepositoryDep,
    who: Writer,
    response: Response,
) -> dict[str, Any]:
    """Register a checkpoint and the data its segment consumed; repeating it is a no-op."""
    record, created = repository.lineage.register(
        model, checkpoint, body.to_input(), actor=who.name
    )
    response.status_code = 201 if created else 200
    answer = {**record.to_json(), "created": created}
    _mark_deprecated(repository, [answer])
    return answer


@router.put(
    "/models/{model}/checkpoints/{checkpoint}/deletion",
    response_model=CheckpointOut,
    response_model_exclude_unset=True,
    responses=errors(400, 404, 409, 413),
)
def mark_checkpoint_deleted(
    model: str, checkpoint: str, body: DeletionIn, repository: RepositoryDep, who: Writer
) -> dict[str, Any]:
    """Record that a checkpoint's files were deleted (idempotent); its lineage stays."""
    record, _ = repository.lineage.mark_deleted(
        _ref(model, checkpoint, body.run),
        actor=who.name,
        reason=body.reason,
        deleted_at=body.deleted_at,
    )
    return record.to_json()


@router.get("/models", response_model=ListOut[ModelOut])
def list_models(
    repository: RepositoryDep,
    _who: Reader,
    prefix: Annotated[str | None, Query(max_length=128)] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Models by name with their checkpoint count and highest-step checkpoint."""
    return repository.lineage.list_models(prefix=prefix, limit=limit, offset=offset).to_json()


@router.get(
    "/models/{model}/checkpoints",
    response_model=ListOut[CheckpointOut],
    response_model_exclude_unset=True,  # `created` is only in the answer to a PUT
    responses=errors(400, 404),
)
def list_checkpoints(
    model: str,
    repository: RepositoryDep,
    _who: Reader,
    run: RunQuery = None,
    state: Annotated[str | None, Query(description="present or deleted")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Checkpoints of a model (optionally of one run, in one state), highest step first."""
    page = repository.lineage.list_checkpoints(
        model, run=run, state=state, limit=limit, offset=offset
    )
    answer = page.to_json()
    _mark_deprecated(repository, answer["data"])
    return answer


@router.get(
    "/models/{model}/checkpoints/{checkpoint}",
    response_model=CheckpointOut,
    response_model_exclude_unset=True,
    responses=errors(400, 404, 409),
)
def get_checkpoint(
    model: str, checkpoint: str, repository: RepositoryDep, _who: Reader, run: RunQuery = None
) -> dict[str, Any]:
    """One checkpoint with its own segment's data."""
    answer = repository.lineage.get(_ref(model, checkpoint, run)).to_json()
    _mark_deprecated(repository, [answer])
    return answer


@router.get(
    "/models/{model}/checkpoints/{checkpoint}/lineage",
    response_model=LineageOut,
    response_model_exclude_unset=True,  # what the kept rendering does (tests/service/test_openapi)
    responses={**NOT_MODIFIED, **errors(400, 404, 409)},
)
def checkpoint_lineage(
    model: str,
    checkpoint: str,
    repository: RepositoryDep,
    _who: Reader,
    run: RunQuery = None,
    form: Annotated[
        LineageForm,
        Query(
            description="`full`: `data` lists the entries; `compact`: `compact.columns` holds "
            "them as one array per field, segments as `[depth, split, …]` pairs into `chain`; "
            "`packed`: `packed.columns`, the compact columns and what each segment read, with "
            "runs and joined strings"
        ),
    ] = "full",
    if_none_match: IfNoneMatch = None,
) -> Response:
    """Which data trained the checkpoint: the union along its complete parent chain.

    The answer carries an ``ETag``; sent back in ``If-None-Match``, it makes the service answer
    ``304`` while the reference designates the same checkpoint and no state the answer shows
    (a checkpoint deleted, a version deprecated) has changed since.
    """
    return lineage_response(repository, model, checkpoint, run, form, if_none_match)


def lineage_response(
    repository: Repository,
    model: str,
    checkpoint: str,
    run: str | None,
    form: str,
    if_none_match: str | None,
) -> Response:
    """The answer to ``GET …/lineage`` (the declared route and its hot route,
    :func:`hot_lineage_routes`): the head (one statement), then the kept rendering or a new
    one."""
    lineage = repository.lineage
    head = lineage.lineage_head(_ref(model, checkpoint, run))  # one query: the ref and the epoch
    etag = lineage_etag(head, form)
    if etag_matches(if_none_match, etag):
        return not_modified(etag)
    key = (*head.key, form)
    rendered = lineage.rendered.get(key)
    if rendered is None:
        rendered = render_lineage(lineage.answer_from(head).to_json(form=form))
        lineage.rendered.put(key, rendered)
    return Response(
        rendered,
        media_type="application/json",
        headers={"ETag": etag, "Cache-Control": "no-cache"},
    )


@router.get(
    "/models/{model}/checkpoints/{checkpoint}/model-check",
    response_model=ModelCheckOut,
    responses=errors(400, 404, 409),
)
def check_model(
    model: str,
    checkpoint: str,
    repository: RepositoryDep,
    _who: Reader,
    run: RunQuery = None,
    data: Annotated[
        list[str] | None,
        Query(max_length=100, description="versions to check besides the lineage's"),
    ] = None,
) -> dict[str, Any]:
    """Will the checkpoint's SavedModel exports accept its training data and ``data``?"""
    return repository.lineage.check_model(_ref(model, checkpoint, run), data or ()).to_json()


@router.get(
    "/versions/{ref}/consumers",
    response_model=ConsumersOut,
    response_model_exclude_unset=True,  # `shards` only in answers about a shard
    responses=errors(400, 404),
)
def version_consumers(
    ref: str,
    repository: RepositoryDep,
    _who: Reader,
    transitive: Transitive = True,
    limit: ConsumerLimit = DEFAULT_CONSUMERS_PAGE,
    offset: Offset = 0,
) -> Response:
    """Checkpoints (and models) trained on a version; an alias is resolved now."""
    return consumers_response(repository, ref, transitive, limit, offset)


def consumers_response(
    repository: Repository, ref: str, transitive: bool, limit: int, offset: int
) -> Response:
    """The answer to ``GET /versions/{ref}/consumers`` (the declared route and its hot route),
    rendered by orjson: the record's JSON has :class:`ConsumersOut`'s fields in its order
    (``tests/service/test_hot_lineage.py`` compares the bytes with the model's rendering)."""
    record = repository.lineage.consumers(ref, transitive=transitive)
    body = record.to_json(limit=limit, offset=offset)
    return Response(orjson.dumps(body), media_type="application/json")


@router.get(
    "/shards/consumers",
    response_model=ConsumersOut,
    response_model_exclude_unset=True,
    responses=errors(400, 404),
)
def shard_consumers(
    repository: RepositoryDep,
    _who: Reader,
    uri: Annotated[str | None, Query(max_length=4096)] = None,
    sha256: Annotated[str | None, Query(max_length=71)] = None,
    transitive: Transitive = True,
    limit: ConsumerLimit = DEFAULT_CONSUMERS_PAGE,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Checkpoints whose segments used the split holding a shard (by URI or sha256)."""
    record = repository.lineage.shard_consumers(uri=uri, sha256=sha256, transitive=transitive)
    return record.to_json(limit=limit, offset=offset)


@router.get("/lineage/impact", response_model=ImpactOut, responses=errors(400, 404))
def lineage_impact(
    repository: RepositoryDep,
    _who: Reader,
    version: Annotated[str | None, Query(description="a version reference")] = None,
    source: Annotated[
        str | None,
        Query(
            max_length=4096,
            description="a raw source URI: versions that recorded it, or a prefix it lies under",
        ),
    ] = None,
    prefix: Annotated[
        bool, Query(description="also versions whose recorded sources lie under `source`")
    ] = False,
    transitive: Transitive = True,
    limit: ConsumerLimit = DEFAULT_CONSUMERS_PAGE,
    offset: Offset = 0,
) -> dict[str, Any]:
    """What a version or a raw source affects: every version derived from it (through
    provenance parents, any depth) and every checkpoint trained on any of them."""
    record = repository.lineage.impact(
        version=version, source=source, prefix=prefix, transitive=transitive
    )
    return record.to_json(limit=limit, offset=offset)


@router.get("/lineage/graph", response_model=GraphOut, responses=errors(400, 404, 409))
async def lineage_graph(
    repository: RepositoryDep,
    _who: Reader,
    heavy: HeavyReads,
    checkpoint: Annotated[
        str | None, Query(description="model/checkpoint or model@run/checkpoint")
    ] = None,
    version: Annotated[str | None, Query(description="a version reference")] = None,
    source: Annotated[
        str | None,
        Query(max_length=4096, description="a raw source URI exactly as a version recorded it"),
    ] = None,
    depth: Annotated[int, Query(ge=1, le=MAX_GRAPH_DEPTH)] = 3,
    direction: Literal["upstream", "downstream", "both"] = "both",
    limit: Annotated[
        int,
        Query(
            ge=1,
            le=MAX_GRAPH_NODES,
            description=f"nodes at most (1-{MAX_GRAPH_NODES}); `truncated` says the walk "
            "stopped there, the nodes' counts say how many neighbours were left out",
        ),
    ] = GRAPH_NODES,
) -> Response:
    """Nodes and edges within ``depth`` hops of one checkpoint, version or recorded raw source
    (at most ``limit`` nodes: a version with thousands of consumers costs no more than
    ``limit`` of them)."""
    graph = partial(
        repository.lineage.graph,
        checkpoint=checkpoint,
        version=version,
        source=source,
        depth=depth,
        direction=direction,
        max_nodes=limit,
    )
    # One expensive answer at a time per worker (deps.HeavyReads), rendered in that thread
    # too: the record's JSON has exactly GraphOut's fields, and validating a few hundred nodes
    # into the model on the event loop would stall every other request meanwhile.
    body = await anyio.to_thread.run_sync(lambda: orjson.dumps(graph().to_json()), limiter=heavy)
    return Response(body, media_type="application/json")


# -- hot routes -------------------------------------------------------------------------------


class HotLineageRoute(HotRoute):
    """A lineage read (``GET`` without a body) in its common forms, without FastAPI's routing
    scan, dependency solving and parameter parsing (~15 % and more of a lineage request's
    server CPU here), as :class:`~recordkeeper_service.routes.versions.HotResolveRoute` does
    for resolves.

    Matched before the API router; it takes only requests whose query holds the parameters
    of ``query`` at most once each, each in a form its parser accepts (canonical values:
    ``true``/``false``, digits in range, the forms by name) and nothing else.  Anything else
    falls through to the declared route (which stays the one in the OpenAPI document).
    Authentication, the answer and its errors are the declared route's own functions
    (:func:`~recordkeeper_service.deps.get_principal`, :func:`lineage_response` /
    :func:`consumers_response` run in the thread pool as FastAPI runs the declared route, the
    app's error handlers).
    """

    def __init__(
        self,
        path: str,
        query: dict[str, Parse],
        defaults: dict[str, Any],
        answer: Callable[[Repository, dict[str, str], dict[str, Any], str | None], Response],
    ) -> None:
        super().__init__(path, self._endpoint, query, defaults)
        self._answer = answer

    async def _endpoint(self, request: Request) -> Response:
        principal = await get_principal(request)
        principal.require("read")
        return await run_in_threadpool(
            self._answer,
            request.app.state.repository,
            request.path_params,
            request.scope[HOT_PARAMS],
            request.headers.get("if-none-match"),
        )


def hot_lineage_routes(prefix: str) -> list[HotLineageRoute]:
    """The hot routes of a checkpoint's upstream answer and of a version's consumers (install
    them before the API router)."""
    return [
        HotLineageRoute(
            f"{prefix}/models/{{model}}/checkpoints/{{checkpoint}}/lineage",
            {"form": choice(*get_args(LineageForm))},
            {"form": "full"},
            lambda repository, path, params, if_none_match: lineage_response(
                repository, path["model"], path["checkpoint"], None, params["form"], if_none_match
            ),
        ),
        HotLineageRoute(
            f"{prefix}/versions/{{ref}}/consumers",
            {
                "transitive": boolean,
                "limit": integer(1, MAX_CONSUMERS_PAGE),
                "offset": integer(0, MAX_OFFSET),
            },
            {"transitive": True, "limit": DEFAULT_CONSUMERS_PAGE, "offset": 0},
            lambda repository, path, params, _etag: consumers_response(
                repository, path["ref"], params["transitive"], params["limit"], params["offset"]
            ),
        ),
    ]

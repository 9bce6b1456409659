"""Lineage routes under ``/api/v1``: register checkpoints, upstream, downstream, graph.

=====================================================  ===========================================
``PUT  /models/{model}/checkpoints/{checkpoint}``      register (idempotent): 201 new, 200 same
``GET  /models``                                       models with checkpoint counts
``GET  /models/{model}/checkpoints``                   checkpoints, highest step first
``GET  /models/{model}/checkpoints/{checkpoint}``      one checkpoint
``GET  /models/{model}/checkpoints/{ckpt}/lineage``    which data trained it (complete chain)
``GET  /versions/{ref}/consumers``                     checkpoints trained on a version
``GET  /shards/consumers?uri=…|sha256=…``              checkpoints trained on one shard
``GET  /lineage/graph?checkpoint=…|version=…``         nodes and edges, bounded depth
=====================================================  ===========================================
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request

from recordkeeper_service.api_models import ListOut
from recordkeeper_service.deps import Limit, Offset, Reader, Writer
from recordkeeper_service.lineage.repository import MAX_GRAPH_DEPTH, LineageRepository
from recordkeeper_service.lineage.schemas import (
    CheckpointIn,
    CheckpointOut,
    ConsumersOut,
    GraphOut,
    LineageOut,
    ModelOut,
)
from recordkeeper_service.responses import JSON

__all__ = ["get_lineage_repository", "router"]

router = APIRouter(tags=["lineage"])

#: Consumers answers may be long (every checkpoint below a version); pages go up to 10,000.
ConsumerLimit = Annotated[int, Query(ge=1, le=10_000, description="page size (1-10000)")]
Transitive = Annotated[
    bool,
    Query(description="include checkpoints restored or initialised from a direct consumer"),
]


async def get_lineage_repository(request: Request) -> LineageRepository:
    """The app's lineage repository, built once over the registry's database."""
    state = request.app.state
    repository: LineageRepository | None = getattr(state, "lineage_repository", None)
    if repository is None:
        repository = LineageRepository(state.repository.db)
        state.lineage_repository = repository
    return repository


LineageDep = Annotated[LineageRepository, Depends(get_lineage_repository)]


@router.put(
    "/models/{model}/checkpoints/{checkpoint}",
    response_model=CheckpointOut,
    responses={201: {"model": CheckpointOut, "description": "registered now"}},
)
def register_checkpoint(
    model: str, checkpoint: str, body: CheckpointIn, lineage: LineageDep, who: Writer
) -> JSON:
    """Register a checkpoint and the data its segment consumed; repeating it is a no-op."""
    record, created = lineage.register(model, checkpoint, body.to_input(), actor=who.name)
    return JSON({**record.to_json(), "created": created}, status_code=201 if created else 200)


@router.get("/models", response_model=ListOut[ModelOut])
def list_models(
    lineage: LineageDep,
    _who: Reader,
    prefix: Annotated[str | None, Query(max_length=128)] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> JSON:
    """Models by name with their checkpoint count and highest-step checkpoint."""
    return JSON(lineage.list_models(prefix=prefix, limit=limit, offset=offset).to_json())


@router.get("/models/{model}/checkpoints", response_model=ListOut[CheckpointOut])
def list_checkpoints(
    model: str, lineage: LineageDep, _who: Reader, limit: Limit = 100, offset: Offset = 0
) -> JSON:
    """Checkpoints of a model, highest step first."""
    return JSON(lineage.list_checkpoints(model, limit=limit, offset=offset).to_json())


@router.get("/models/{model}/checkpoints/{checkpoint}", response_model=CheckpointOut)
def get_checkpoint(model: str, checkpoint: str, lineage: LineageDep, _who: Reader) -> JSON:
    """One checkpoint with its own segment's data."""
    return JSON(lineage.get(f"{model}/{checkpoint}").to_json())


@router.get("/models/{model}/checkpoints/{checkpoint}/lineage", response_model=LineageOut)
def checkpoint_lineage(model: str, checkpoint: str, lineage: LineageDep, _who: Reader) -> JSON:
    """Which data trained the checkpoint: the union along its complete parent chain."""
    return JSON(lineage.lineage(f"{model}/{checkpoint}").to_json())


@router.get("/versions/{ref}/consumers", response_model=ConsumersOut)
def version_consumers(
    ref: str,
    lineage: LineageDep,
    _who: Reader,
    transitive: Transitive = True,
    limit: ConsumerLimit = 1000,
    offset: Offset = 0,
) -> JSON:
    """Checkpoints (and models) trained on a version; an alias is resolved now."""
    record = lineage.consumers(ref, transitive=transitive)
    return JSON(record.to_json(limit=limit, offset=offset))


@router.get("/shards/consumers", response_model=ConsumersOut)
def shard_consumers(
    lineage: LineageDep,
    _who: Reader,
    uri: Annotated[str | None, Query(max_length=4096)] = None,
    sha256: Annotated[str | None, Query(max_length=71)] = None,
    transitive: Transitive = True,
    limit: ConsumerLimit = 1000,
    offset: Offset = 0,
) -> JSON:
    """Checkpoints whose segments used the split holding a shard (by URI or sha256)."""
    record = lineage.shard_consumers(uri=uri, sha256=sha256, transitive=transitive)
    return JSON(record.to_json(limit=limit, offset=offset))


@router.get("/lineage/graph", response_model=GraphOut)
def lineage_graph(
    lineage: LineageDep,
    _who: Reader,
    checkpoint: Annotated[str | None, Query(description="model/checkpoint")] = None,
    version: Annotated[str | None, Query(description="a version reference")] = None,
    depth: Annotated[int, Query(ge=1, le=MAX_GRAPH_DEPTH)] = 3,
    direction: Literal["upstream", "downstream", "both"] = "both",
) -> JSON:
    """Nodes and edges within ``depth`` hops of one checkpoint or version."""
    record = lineage.graph(checkpoint=checkpoint, version=version, depth=depth, direction=direction)
    return JSON(record.to_json())

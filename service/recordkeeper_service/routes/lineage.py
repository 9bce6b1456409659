"""Pydantic models of the lineage REST API: request bodies, and response shapes for OpenAPI.

As in :mod:`recordkeeper_service.api_models`, request models check JSON *types* only (wrong types
→ ``422 invalid_request``); names, roles, splits and references are checked by the repository so
that bad input gets its precise code (``invalid_checkpoint``, ``invalid_reference``, ...).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from recordkeeper_service.api_models import JsonObject
from recordkeeper_service.lineage.repository import CheckpointInput, DataInput

__all__ = [
    "CheckpointIn",
    "CheckpointOut",
    "ConsumerOut",
    "ConsumersOut",
    "DataIn",
    "DataOut",
    "GraphOut",
    "LineageEntryOut",
    "LineageOut",
    "ModelOut",
    "SavedModelIn",
    "SegmentOut",
]


class _In(BaseModel):
    model_config = ConfigDict(extra="ignore")


class DataIn(_In):
    version: str = Field(examples=["coco@v3", "coco_20231015_v3"])
    role: str = Field(default="train", examples=["train", "eval", "test"])
    splits: list[str] | None = Field(
        default=None,
        description="default: the split named like the role (eval: also 'validation'), "
        "else every split",
    )


class SavedModelIn(_In):
    name: str = Field(examples=["classifier"])
    uri: str = Field(examples=["s3://models/run1/ckpt-1234_saved_modules/classifier"])


class CheckpointIn(_In):
    """``PUT /models/{model}/checkpoints/{checkpoint}``."""

    step: int | None = Field(default=None, ge=0, le=2**63 - 1, examples=[1234])
    uri: str | None = Field(default=None, examples=["s3://models/run1/ckpt-1234"])
    run: str | None = Field(default=None, max_length=128, examples=["2023-10-15-a"])
    parent: str | None = Field(default=None, examples=["coco_detection/ckpt-1000"])
    parent_kind: str | None = Field(default=None, examples=["restored_from", "initialized_from"])
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
                )
                for d in self.data
            ),
            saved_models=tuple({"name": s.name, "uri": s.uri} for s in self.saved_models),
            metrics=self.metrics,
            metadata=self.metadata,
        )


class DataOut(BaseModel):
    version: str
    dataset: str
    content_digest: str | None
    role: str
    splits: list[str]


class CheckpointOut(BaseModel):
    model: str
    checkpoint: str
    ref: str
    step: int | None
    uri: str | None
    run: str | None
    parent: str | None
    parent_kind: str | None
    data: list[DataOut]
    saved_models: list[dict[str, str]]
    metrics: dict[str, Any]
    metadata: dict[str, Any]
    created_at: str
    created_by: str
    created: bool | None = Field(default=None, description="only in the answer to a PUT")


class ModelOut(BaseModel):
    name: str
    created_at: str
    checkpoint_count: int
    latest_checkpoint: str | None


class SegmentOut(BaseModel):
    model: str
    checkpoint: str
    step: int | None
    depth: int
    splits: list[str]


class LineageEntryOut(BaseModel):
    version: str
    dataset: str
    number: int
    content_digest: str | None
    state: str
    role: str
    splits: list[str]
    segments: list[SegmentOut]


class ChainLinkOut(BaseModel):
    model: str
    checkpoint: str
    step: int | None
    uri: str | None
    depth: int
    parent_kind: str | None


class LineageOut(BaseModel):
    checkpoint: CheckpointOut
    chain: list[ChainLinkOut]
    data: list[LineageEntryOut]
    versions: list[str]


class ConsumerOut(BaseModel):
    model: str
    checkpoint: str
    ref: str
    step: int | None
    uri: str | None
    direct: bool
    roles: list[str]
    splits: list[str]
    parent: str | None


class ConsumersOut(BaseModel):
    versions: list[dict[str, Any]]
    models: list[dict[str, Any]]
    data: list[ConsumerOut]
    count: int
    limit: int
    offset: int
    shards: list[dict[str, Any]] | None = None


class GraphOut(BaseModel):
    root: str
    depth: int
    direction: str
    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    truncated: bool

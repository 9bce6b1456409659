"""Lineage tables: ``models``, ``runs``, ``checkpoints``, ``checkpoint_data``, ``lineage_epoch``.

A checkpoint belongs to a model and a run; ``(model, run, name)`` identifies it (model names
are reused across reruns and sweeps, so ``ckpt-N`` alone does not).  A run is named
explicitly or derived from its checkpoint directory (:func:`recordkeeper.core.lineage.run_of`).
A checkpoint whose files were deleted keeps its row and its lineage (``state = 'deleted'``).
Its *segment* is the training it did since its parent checkpoint; ``checkpoint_data`` holds one
row per (version, split, role) that segment consumed.  ``parent_id`` links a checkpoint to the
checkpoint it was restored from (a resumed run) or initialised from (fine-tuning; the parent may
belong to another model).  "Which data trained
X" is the union of ``checkpoint_data`` along the parent chain of X.

Lineage is acyclic by construction: a parent must exist before its child is registered and a
registered checkpoint's parent never changes.  The recursive queries still guard against cycles.

Indexes serve the two hot queries (see ``bench/bench_lineage.py``):

* upstream: ``checkpoints`` primary key (walk up ``parent_id``) and the ``checkpoint_data``
  primary key, whose leading column is ``checkpoint_id``;
* downstream: ``ix_checkpoint_data_version_id_checkpoint_id`` (edges of one version, index-only)
  and ``ix_checkpoints_parent_id_id`` (walk down to descendants, index-only).

A registered checkpoint's upstream answer never changes except for the *states* it shows (a
checkpoint marked deleted, a version deprecated).  ``lineage_epoch`` is one counter row bumped in
the same transaction as every such change, so a rendered answer tagged with the epoch it was
computed at stays valid while the epoch does (see ``repository.lineage.epoch``).
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from recordkeeper.core.lineage import CHECKPOINT_STATES, PARENT_KINDS, ROLES
from recordkeeper_service.tables import Base, BigId, utcnow

__all__ = ["Checkpoint", "CheckpointData", "LineageEpoch", "Model", "Run"]


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Model(Base):
    """A trained model family (``coco_detection``); created on its first checkpoint."""

    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))


class Run(Base):
    """A training run of a model (``sweep-7``, or ``run1-3f2a9c1b7e`` derived from its
    directory); created on first use.  ``directory`` is where its first checkpoint was."""

    __tablename__ = "runs"
    __table_args__ = (UniqueConstraint("model_id", "name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    directory: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))


class Checkpoint(Base):
    """One saved checkpoint (``ckpt-1234``) of a model's run, with its parent link."""

    __tablename__ = "checkpoints"
    __table_args__ = (
        UniqueConstraint("model_id", "run_id", "name"),
        CheckConstraint(_in("state", CHECKPOINT_STATES), name="state"),
        CheckConstraint(
            "(parent_id IS NULL AND parent_kind IS NULL) OR "
            f"(parent_id IS NOT NULL AND {_in('parent_kind', PARENT_KINDS)})",
            name="parent_kind",
        ),
        CheckConstraint("parent_id IS NULL OR parent_id <> id", name="not_own_parent"),
        # (parent_id, id): the downstream walk reads children from the index alone.
        Index(None, "parent_id", "id"),
        Index(None, "run_id"),
        # ``model/ckpt-N`` without a run: every run's checkpoint of that name.
        Index(None, "model_id", "name"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    step: Mapped[int | None] = mapped_column(BigInteger)
    uri: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("checkpoints.id"))
    parent_kind: Mapped[str | None] = mapped_column(String(16))
    #: ``[{"name": "classifier", "uri": "./ckpt-1234_saved_modules/classifier", "inputs": …}]``
    saved_models: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    extra_metadata: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    created_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(8), default="present", server_default="present")
    #: When the files were deleted (as reported), and how it became known (``max_to_keep``,
    #: ``check``, ...).
    deleted_at: Mapped[datetime.datetime | None] = mapped_column()
    deleted_reason: Mapped[str | None] = mapped_column(Text)


class CheckpointData(Base):
    """An edge: the segment ending at ``checkpoint_id`` consumed ``split`` of ``version_id``."""

    __tablename__ = "checkpoint_data"
    __table_args__ = (
        CheckConstraint(_in("role", ROLES), name="role"),
        Index(None, "version_id", "checkpoint_id"),
    )

    checkpoint_id: Mapped[int] = mapped_column(
        ForeignKey("checkpoints.id", ondelete="CASCADE"), primary_key=True
    )
    # No cascade: a version that trained a checkpoint can never silently disappear.
    version_id: Mapped[int] = mapped_column(ForeignKey("versions.id"), primary_key=True)
    split: Mapped[str] = mapped_column(String(64), primary_key=True)
    role: Mapped[str] = mapped_column(String(8), primary_key=True)


class LineageEpoch(Base):
    """One row (``id = 1``): a counter bumped whenever a lineage answer's states may change."""

    __tablename__ = "lineage_epoch"
    __table_args__ = (CheckConstraint("id = 1", name="one_row"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    value: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")

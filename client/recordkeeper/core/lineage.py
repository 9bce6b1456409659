"""The lineage grammar: model and checkpoint names, ``model/checkpoint`` references, roles and
parent kinds.

Shared by the client (``register_checkpoint``, ``lineage``) and the service (validation and the
database's check constraints).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from recordkeeper.core.errors import InvalidCheckpoint
from recordkeeper.core.limits import MAX_CHECKPOINT_NAME_LENGTH, MAX_MODEL_NAME_LENGTH

__all__ = [
    "PARENT_KINDS",
    "ROLES",
    "CheckpointRef",
    "ParentKind",
    "parse_checkpoint_ref",
    "validate_checkpoint_name",
    "validate_model_name",
    "validate_parent_kind",
    "validate_role",
]

#: What a segment used a version for.
ROLES: tuple[str, ...] = ("train", "eval", "test")
#: How a checkpoint relates to its parent: a resumed run, or fine-tuning from another checkpoint.
PARENT_KINDS: tuple[str, ...] = ("restored_from", "initialized_from")
ParentKind = Literal["restored_from", "initialized_from"]

_MODEL_RE = re.compile(r"[a-z][a-z0-9_.-]*")
_CHECKPOINT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def validate_model_name(name: str) -> str:
    """Return ``name`` if usable as a model name (``coco_detection``), else raise."""
    if (
        not isinstance(name, str)
        or not _MODEL_RE.fullmatch(name)
        or len(name) > MAX_MODEL_NAME_LENGTH
    ):
        raise InvalidCheckpoint(
            f"model name {name!r} is invalid: use lowercase letters, digits, '_', '-' and '.', "
            f"starting with a letter, at most {MAX_MODEL_NAME_LENGTH} characters"
        )
    return name


def validate_checkpoint_name(name: str) -> str:
    """Return ``name`` if usable as a checkpoint name (``ckpt-1234``), else raise."""
    if (
        not isinstance(name, str)
        or not _CHECKPOINT_RE.fullmatch(name)
        or len(name) > MAX_CHECKPOINT_NAME_LENGTH
    ):
        raise InvalidCheckpoint(
            f"checkpoint name {name!r} is invalid: use letters, digits, '_', '-' and '.', "
            f"starting with a letter or digit, at most {MAX_CHECKPOINT_NAME_LENGTH} characters "
            "(the base name of the checkpoint prefix, e.g. 'ckpt-1234')"
        )
    return name


def validate_role(role: object, where: str, hint: str = "") -> str:
    """Return ``role`` if it is one of :data:`ROLES`, else raise naming ``where``."""
    if role not in ROLES:
        raise InvalidCheckpoint(f"{where}: role {role!r} is not one of {', '.join(ROLES)}{hint}")
    return str(role)


def validate_parent_kind(kind: object) -> str:
    """Return ``kind`` if it is one of :data:`PARENT_KINDS`, else raise."""
    if kind not in PARENT_KINDS:
        raise InvalidCheckpoint(f"parent_kind {kind!r} is not one of {', '.join(PARENT_KINDS)}")
    return str(kind)


@dataclass(frozen=True, order=True)
class CheckpointRef:
    """``coco_detection/ckpt-1234``: a checkpoint of a model."""

    model: str
    checkpoint: str

    def __str__(self) -> str:
        return f"{self.model}/{self.checkpoint}"


def parse_checkpoint_ref(text: str | CheckpointRef) -> CheckpointRef:
    """Parse ``model/checkpoint``, raising :class:`InvalidCheckpoint` with the reason."""
    if isinstance(text, CheckpointRef):
        return text
    if not isinstance(text, str) or text.count("/") != 1:
        raise InvalidCheckpoint(
            f"checkpoint reference {text!r} must look like 'model/checkpoint', "
            "e.g. 'coco_detection/ckpt-1234'"
        )
    model, _, name = text.strip().partition("/")
    return CheckpointRef(validate_model_name(model), validate_checkpoint_name(name))

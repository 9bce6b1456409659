"""The lineage grammar: model and checkpoint names, ``model/checkpoint`` references, roles and
parent kinds; and the lineage answers both sides share (:class:`Consumer`, :class:`Segment`,
:class:`LineageEntry`).

Shared by the client (``register_checkpoint``, ``lineage``) and the service (validation and the
database's check constraints; the records it answers with).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from recordkeeper.core.errors import InvalidCheckpoint
from recordkeeper.core.limits import (
    MAX_CHECKPOINT_NAME_LENGTH,
    MAX_MODEL_NAME_LENGTH,
    MAX_SAVED_MODEL_NAME_LENGTH,
    MAX_URI_LENGTH,
    is_scalar_text,
)

__all__ = [
    "PARENT_KINDS",
    "ROLES",
    "CheckpointRef",
    "Consumer",
    "LineageEntry",
    "ParentKind",
    "Segment",
    "parse_checkpoint_ref",
    "validate_artifact_uri",
    "validate_checkpoint_name",
    "validate_model_name",
    "validate_parent_kind",
    "validate_role",
    "validate_saved_model_name",
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


def validate_artifact_uri(uri: object, field: str) -> str:
    """Return ``uri`` (a checkpoint's or saved model's location, as the trainer wrote it) if it
    is non-empty Unicode text of at most :data:`MAX_URI_LENGTH` UTF-8 bytes, else raise."""
    if not isinstance(uri, str) or not uri or not is_scalar_text(uri):
        raise InvalidCheckpoint(f"{field} must be a non-empty string of Unicode text")
    if len(uri.encode("utf-8")) > MAX_URI_LENGTH:
        raise InvalidCheckpoint(f"{field} is longer than {MAX_URI_LENGTH} bytes")
    return uri


def validate_saved_model_name(name: object, field: str) -> str:
    """Return ``name`` if it is non-empty Unicode text of at most
    :data:`MAX_SAVED_MODEL_NAME_LENGTH` characters, else raise."""
    if not isinstance(name, str) or not name or not is_scalar_text(name):
        raise InvalidCheckpoint(f"{field} must be a non-empty string of Unicode text")
    if len(name) > MAX_SAVED_MODEL_NAME_LENGTH:
        raise InvalidCheckpoint(
            f"{field} is {len(name)} characters long; at most {MAX_SAVED_MODEL_NAME_LENGTH} "
            "are allowed"
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


@dataclass(frozen=True, order=True, slots=True)
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


# -- lineage answers -------------------------------------------------------------------------
#
# The service builds these by the thousand per request straight from database rows (which the
# schema already guarantees), so they are named tuples constructed positionally, without
# validation: a frozen dataclass costs three times as much to construct.  ``to_json`` gives the
# shape documented in docs/rest-api.md ("Lineage"); ``from_json`` reads it back (the client).


def _strings(items: Iterable[str] | None) -> tuple[str, ...]:
    return tuple(items or ())


def _ref_text(ref: CheckpointRef | None) -> str | None:
    return None if ref is None else f"{ref.model}/{ref.checkpoint}"


class Segment(NamedTuple):
    """A checkpoint whose own segment used a version (``depth`` 0 = the queried checkpoint)."""

    model: str
    checkpoint: str
    step: int | None
    depth: int
    splits: tuple[str, ...]

    @property
    def ref(self) -> CheckpointRef:
        return CheckpointRef(self.model, self.checkpoint)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "checkpoint": self.checkpoint,
            "step": self.step,
            "depth": self.depth,
            "splits": list(self.splits),
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Segment:
        return cls(
            body["model"],
            body["checkpoint"],
            body.get("step"),
            int(body["depth"]),
            _strings(body.get("splits")),
        )


class LineageEntry(NamedTuple):
    """One version (in one role) that trained a checkpoint, and the segments that used it."""

    version: str
    dataset: str
    number: int
    content_digest: str | None
    state: str
    role: str
    splits: tuple[str, ...]
    segments: tuple[Segment, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "dataset": self.dataset,
            "number": self.number,
            "content_digest": self.content_digest,
            "state": self.state,
            "role": self.role,
            "splits": list(self.splits),
            "segments": [s.to_json() for s in self.segments],
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> LineageEntry:
        return cls(
            body["version"],
            body["dataset"],
            int(body["number"]),
            body.get("content_digest"),
            body["state"],
            body["role"],
            _strings(body.get("splits")),
            tuple(Segment.from_json(s) for s in body.get("segments") or ()),
        )


class Consumer(NamedTuple):
    """A checkpoint downstream of some data.

    ``direct`` is True when its own segment consumed the data (``roles``/``splits`` say how);
    otherwise it inherited the data from an ancestor (restored or initialised from it).
    ``parent`` is the checkpoint it was restored or initialised from, if any.
    """

    model: str
    checkpoint: str
    step: int | None
    uri: str | None
    direct: bool
    roles: tuple[str, ...]
    splits: tuple[str, ...]
    parent: CheckpointRef | None

    @property
    def ref(self) -> CheckpointRef:
        return CheckpointRef(self.model, self.checkpoint)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "checkpoint": self.checkpoint,
            "ref": f"{self.model}/{self.checkpoint}",
            "step": self.step,
            "uri": self.uri,
            "direct": self.direct,
            "roles": list(self.roles),
            "splits": list(self.splits),
            "parent": _ref_text(self.parent),
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Consumer:
        parent = body.get("parent")
        return cls(
            body["model"],
            body["checkpoint"],
            body.get("step"),
            body.get("uri"),
            bool(body.get("direct")),
            _strings(body.get("roles")),
            _strings(body.get("splits")),
            parse_checkpoint_ref(parent) if parent else None,
        )

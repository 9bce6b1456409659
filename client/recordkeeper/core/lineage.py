"""The lineage grammar: model, run and checkpoint names, checkpoint references, roles, parent
kinds and checkpoint states; and the lineage answers both sides share (:class:`Consumer`,
:class:`Segment`, :class:`LineageEntry`).

A checkpoint is identified by its model, its **run** and its name.  The reference grammar,
defined here once (:func:`parse_checkpoint_ref`, :meth:`CheckpointRef.__str__`)::

    coco_detection@det-run1-3f2a9c1b7e/ckpt-1234    model @ run / checkpoint   (exact)
    coco_detection/ckpt-1234                        model / checkpoint         (any run: answers
                                                    when exactly one run has that checkpoint)

A run is named explicitly (``run="sweep-7"``) or derived from the directory the checkpoint was
written to (:func:`run_for_directory`): the same directory gives the same run (a resume), a
fresh directory a new one (a rerun, a sweep, a colleague's job).  A checkpoint registered with
neither a run nor a URI belongs to the run :data:`DEFAULT_RUN`.

Shared by the client (``register_checkpoint``, ``lineage``) and the service (validation and the
database's check constraints; the records it answers with).
"""

from __future__ import annotations

import datetime
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from recordkeeper.core.errors import InvalidCheckpoint
from recordkeeper.core.limits import (
    MAX_CHECKPOINT_NAME_LENGTH,
    MAX_INT64,
    MAX_MODEL_NAME_LENGTH,
    MAX_REASON_LENGTH,
    MAX_RUN_NAME_LENGTH,
    MAX_SAVED_MODEL_NAME_LENGTH,
    MAX_URI_LENGTH,
    is_valid_text,
)
from recordkeeper.core.retention import data_status
from recordkeeper.core.shard_columns import pack_values, unpack_values

__all__ = [
    "CHECKPOINT_STATES",
    "CONSUMED_COLUMN",
    "DEFAULT_RUN",
    "DELETED_BY_MANAGER",
    "DELETED_FILES_MISSING",
    "LINEAGE_COLUMNS",
    "MAX_PACKED_LINEAGE_ENTRIES",
    "PACKED_LINEAGE_COLUMNS",
    "PARENT_KINDS",
    "ROLES",
    "CheckpointRef",
    "Consumer",
    "LineageEntry",
    "ParentKind",
    "Segment",
    "ambiguous_checkpoint_message",
    "checkpoint_directory",
    "checkpoint_parent",
    "consumed_from_columns",
    "entries_from_columns",
    "pack_lineage_columns",
    "parse_checkpoint_ref",
    "parse_deleted_at",
    "run_for_directory",
    "run_of",
    "unpack_lineage_columns",
    "validate_artifact_uri",
    "validate_checkpoint_name",
    "validate_deletion_reason",
    "validate_model_name",
    "validate_parent_kind",
    "validate_role",
    "validate_run_name",
    "validate_saved_model_name",
]

#: What a segment used a version for.
ROLES: tuple[str, ...] = ("train", "eval", "test")
#: How a checkpoint relates to its parent: a resumed run, or fine-tuning from another checkpoint.
PARENT_KINDS: tuple[str, ...] = ("restored_from", "initialized_from")
ParentKind = Literal["restored_from", "initialized_from"]
#: A checkpoint is ``present`` until its files are deleted (by a manager's ``max_to_keep``, or
#: found missing by a check); a ``deleted`` checkpoint keeps its lineage.
CHECKPOINT_STATES: tuple[str, ...] = ("present", "deleted")
#: Why a checkpoint is marked deleted: its manager's ``max_to_keep`` removed it, or a check
#: (``client.check_checkpoints``) found its files missing.  Other reasons are free text.
DELETED_BY_MANAGER = "max_to_keep"
DELETED_FILES_MISSING = "files_missing"
#: The run of a checkpoint registered with neither a run nor a URI.
DEFAULT_RUN = "default"

_MODEL_RE = re.compile(r"[a-z][a-z0-9_.-]*")
_CHECKPOINT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_RUN_RE = _CHECKPOINT_RE
_SLUG_DROP_RE = re.compile(r"[^A-Za-z0-9_.-]+")
#: Hex digits of the directory's sha256 in a derived run name (40 bits: collisions between the
#: directories of one model are not a practical concern).
_RUN_HASH_DIGITS = 10
_RUN_SLUG_LENGTH = 40


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


def validate_run_name(name: object) -> str:
    """Return ``name`` if usable as a run name (``sweep-7``, ``run1-3f2a9c1b7e``), else raise."""
    if not isinstance(name, str) or not _RUN_RE.fullmatch(name) or len(name) > MAX_RUN_NAME_LENGTH:
        raise InvalidCheckpoint(
            f"run name {name!r} is invalid: use letters, digits, '_', '-' and '.', starting "
            f"with a letter or digit, at most {MAX_RUN_NAME_LENGTH} characters"
        )
    return name


def checkpoint_directory(uri: str) -> str:
    """The directory of a checkpoint prefix URI: ``file:///ck/run1/ckpt-3`` → ``file:///ck/run1``.

    A URI without a ``/`` after its scheme has no directory: it is returned unchanged.
    """
    trimmed = uri.rstrip("/")
    head, sep, _ = trimmed.rpartition("/")
    if not sep or head.endswith(":/") or head.endswith(":"):
        return trimmed
    return head


def run_for_directory(directory_uri: str) -> str:
    """The run name derived from the directory a run writes its checkpoints to.

    ``{directory's base name, cleaned}-{first 10 hex digits of sha256(directory URI)}``, e.g.
    ``file:///ck/det/run1`` → ``run1-…``: deterministic, so a resume in the same directory is
    the same run and a fresh directory a new one; readable, so the run says where it lives.
    Give the directory as an absolute URI (trailing ``/`` ignored).
    """
    directory = directory_uri.rstrip("/")
    digest = hashlib.sha256(directory.encode("utf-8")).hexdigest()[:_RUN_HASH_DIGITS]
    base = directory.rpartition("/")[2]
    slug = _SLUG_DROP_RE.sub("-", base)[:_RUN_SLUG_LENGTH].lstrip("_.-").rstrip("-")
    return f"{slug or 'run'}-{digest}"


def run_of(run: str | None, uri: str | None) -> str:
    """A checkpoint's run: ``run`` if given, else derived from ``uri``'s directory
    (:func:`run_for_directory`), else :data:`DEFAULT_RUN`."""
    if run:
        return validate_run_name(run)
    if uri:
        return run_for_directory(checkpoint_directory(uri))
    return DEFAULT_RUN


def validate_artifact_uri(uri: object, field: str) -> str:
    """Return ``uri`` (a checkpoint's or saved model's location, as the trainer wrote it) if it
    is non-empty Unicode text of at most :data:`MAX_URI_LENGTH` UTF-8 bytes, else raise."""
    if not isinstance(uri, str) or not uri or not is_valid_text(uri):
        raise InvalidCheckpoint(f"{field} must be a non-empty string of Unicode text without NUL")
    if len(uri.encode("utf-8")) > MAX_URI_LENGTH:
        raise InvalidCheckpoint(f"{field} is longer than {MAX_URI_LENGTH} bytes")
    return uri


def validate_saved_model_name(name: object, field: str) -> str:
    """Return ``name`` if it is non-empty Unicode text of at most
    :data:`MAX_SAVED_MODEL_NAME_LENGTH` characters, else raise."""
    if not isinstance(name, str) or not name or not is_valid_text(name):
        raise InvalidCheckpoint(f"{field} must be a non-empty string of Unicode text without NUL")
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


def validate_deletion_reason(reason: object) -> str:
    """Return ``reason`` (why a checkpoint's files are gone) if it is non-empty Unicode text of
    at most :data:`MAX_REASON_LENGTH` characters, else raise."""
    if not isinstance(reason, str) or not reason.strip() or not is_valid_text(reason):
        raise InvalidCheckpoint(
            "a deletion reason must be a non-empty string of Unicode text without NUL"
        )
    if len(reason) > MAX_REASON_LENGTH:
        raise InvalidCheckpoint(f"a deletion reason is limited to {MAX_REASON_LENGTH} characters")
    return reason


def parse_deleted_at(text: object) -> datetime.datetime:
    """When a checkpoint's files were deleted: an ISO 8601 timestamp with a UTC offset (``Z``
    accepted), as an aware UTC datetime; anything else raises :class:`InvalidCheckpoint`."""
    if not isinstance(text, str) or len(text) > 64:
        raise InvalidCheckpoint("deleted_at must be an ISO 8601 timestamp string")
    try:
        value = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidCheckpoint(f"deleted_at {text!r} is not an ISO 8601 timestamp") from None
    if value.tzinfo is None:
        raise InvalidCheckpoint(f"deleted_at {text!r} needs a UTC offset (e.g. 'Z')")
    try:
        return value.astimezone(datetime.UTC)
    except OverflowError:  # 0001-01-01T00:00+14:00 is before year 1 in UTC
        raise InvalidCheckpoint(f"deleted_at {text!r} is outside the years 1-9999 in UTC") from None


def validate_parent_kind(kind: object) -> str:
    """Return ``kind`` if it is one of :data:`PARENT_KINDS`, else raise."""
    if kind not in PARENT_KINDS:
        raise InvalidCheckpoint(f"parent_kind {kind!r} is not one of {', '.join(PARENT_KINDS)}")
    return str(kind)


@dataclass(frozen=True, slots=True)
class CheckpointRef:
    """``coco_detection@run1-3f2a9c1b7e/ckpt-1234``: a checkpoint of a model in a run.

    ``run=None`` (``coco_detection/ckpt-1234``) means "whichever run has it": the service
    answers when exactly one does, else raises
    :class:`~recordkeeper.core.errors.AmbiguousCheckpoint` listing the candidates.
    """

    model: str
    checkpoint: str
    run: str | None = None

    def __str__(self) -> str:
        if self.run is None:
            return f"{self.model}/{self.checkpoint}"
        return f"{self.model}@{self.run}/{self.checkpoint}"

    def without_run(self) -> CheckpointRef:
        """The same checkpoint name in any run (``model/checkpoint``)."""
        return CheckpointRef(self.model, self.checkpoint)


def parse_checkpoint_ref(text: str | CheckpointRef) -> CheckpointRef:
    """Parse ``model/checkpoint`` or ``model@run/checkpoint``, raising
    :class:`InvalidCheckpoint` with the reason."""
    if isinstance(text, CheckpointRef):
        return text
    if not isinstance(text, str) or text.count("/") != 1:
        raise InvalidCheckpoint(
            f"checkpoint reference {text!r} must look like 'model/checkpoint' or "
            "'model@run/checkpoint', e.g. 'coco_detection/ckpt-1234'"
        )
    head, _, name = text.strip().partition("/")
    model, at, run = head.partition("@")
    return CheckpointRef(
        validate_model_name(model),
        validate_checkpoint_name(name),
        validate_run_name(run) if at else None,
    )


def checkpoint_parent(
    own: CheckpointRef, parent: str | CheckpointRef | None, parent_kind: object
) -> tuple[CheckpointRef | None, str | None]:
    """The parent of checkpoint ``own`` and how it came from it — the one rule the client and the
    service apply to a registration.

    ``parent_kind`` defaults to ``"restored_from"`` when a parent is given; a kind without a
    parent, an unknown kind and a checkpoint that names itself are
    :class:`InvalidCheckpoint`.
    """
    parent_ref = parse_checkpoint_ref(parent) if parent is not None else None
    if parent_ref is None and parent_kind is not None:
        raise InvalidCheckpoint("parent_kind given without a parent")
    if parent_kind is not None:
        validate_parent_kind(parent_kind)
    if parent_ref is not None and parent_ref in (own, own.without_run()):
        raise InvalidCheckpoint(f"checkpoint {own} cannot be its own parent")
    return parent_ref, (str(parent_kind or "restored_from") if parent_ref else None)


def ambiguous_checkpoint_message(ref: CheckpointRef, candidates: Sequence[CheckpointRef]) -> str:
    """The detail of :class:`~recordkeeper.core.errors.AmbiguousCheckpoint`: which runs have
    ``ref`` and how to name each."""
    names = ", ".join(str(c) for c in candidates)
    return (
        f"{ref} is ambiguous: {len(candidates)} runs of model {ref.model} have a checkpoint "
        f"{ref.checkpoint!r}; name one as model@run/checkpoint: {names}"
    )


# -- lineage answers -------------------------------------------------------------------------
#
# The service builds these by the thousand per request straight from database rows (which the
# schema already guarantees), so they are named tuples constructed positionally, without
# validation: a frozen dataclass costs three times as much to construct.  ``to_json`` gives the
# shape documented in docs/rest-api.md ("Lineage"); ``from_json`` reads it back (the client).


def _strings(items: Iterable[str] | None) -> tuple[str, ...]:
    return tuple(items or ())


def _ref_text(ref: CheckpointRef | None) -> str | None:
    return None if ref is None else str(ref)


class Segment(NamedTuple):
    """A checkpoint whose own segment used a version (``depth`` 0 = the queried checkpoint)."""

    model: str
    checkpoint: str
    step: int | None
    depth: int
    splits: tuple[str, ...]
    run: str | None = None
    state: str = "present"

    @property
    def ref(self) -> CheckpointRef:
        return CheckpointRef(self.model, self.checkpoint, self.run)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "run": self.run,
            "checkpoint": self.checkpoint,
            "ref": str(self.ref),
            "state": self.state,
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
            body.get("run"),
            body.get("state") or "present",
        )


class LineageEntry(NamedTuple):
    """One version (in one role) that trained a checkpoint, and the segments that used it.

    ``state`` is the version's (``committed``, ``deprecated``); ``data_state`` whether its
    objects are still stored (``stored``, ``deleting``, ``deleted``: retention deleted them;
    ``data_deleted_at`` and ``data_deleted_reason`` say when and by what).  A version whose data
    was deleted stays in the lineage: what trained the checkpoint does not change.
    """

    version: str
    dataset: str
    number: int
    content_digest: str | None
    state: str
    role: str
    splits: tuple[str, ...]
    segments: tuple[Segment, ...]
    data_state: str = "stored"
    data_deleted_at: str | None = None
    data_deleted_reason: str | None = None

    @property
    def data_deleted(self) -> bool:
        """Whether the version's data was deleted (or is being deleted)."""
        return self.data_state != "stored"

    def data_status(self) -> str:
        """``stored``, or ``data deleted 2026-12-01 (retention)`` / ``data being deleted
        (retention)`` (:func:`recordkeeper.core.retention.data_status`)."""
        return data_status(self.data_state, self.data_deleted_at, self.data_deleted_reason)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "dataset": self.dataset,
            "number": self.number,
            "content_digest": self.content_digest,
            "state": self.state,
            "data_state": self.data_state,
            "data_deleted_at": self.data_deleted_at,
            "data_deleted_reason": self.data_deleted_reason,
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
            body.get("data_state") or "stored",  # a service from before retention: stored
            body.get("data_deleted_at"),
            body.get("data_deleted_reason"),
        )


#: The arrays of an upstream answer's compact form (``GET …/lineage?form=compact``), in entry
#: order: the :class:`LineageEntry` fields but ``splits`` and ``segments``, and ``uses``: per
#: entry a flat list ``[depth, split, depth, split, …]``, one pair per split a chain link used
#: the entry's version with (deepest first, then by split); the entry's ``splits`` are the
#: distinct splits of its pairs.
LINEAGE_COLUMNS = (
    "version",
    "dataset",
    "number",
    "content_digest",
    "state",
    "data_state",
    "data_deleted_at",
    "data_deleted_reason",
    "role",
    "uses",
)
#: The columns an answer of a service from before retention lacks, and what they read as.
_DATA_STATE_COLUMNS: dict[str, str | None] = {
    "data_state": "stored",
    "data_deleted_at": None,
    "data_deleted_reason": None,
}


def entries_from_columns(
    links: Sequence[Segment], columns: Mapping[str, Sequence[Any]]
) -> tuple[LineageEntry, ...]:
    """The entries of an upstream answer's compact form (:data:`LINEAGE_COLUMNS`).

    ``links`` are the answer's chain as segments without splits, ``links[d]`` the link at
    depth ``d``; the pairs of ``uses`` at depth ``d`` become that link with their splits.  A
    malformed form (arrays of different lengths, odd pairs, a depth outside the chain) raises
    :class:`ValueError`.
    """
    try:
        count = len(columns["version"])
        arrays = [
            columns[name]
            if name in columns or name not in _DATA_STATE_COLUMNS
            else [_DATA_STATE_COLUMNS[name]] * count
            for name in LINEAGE_COLUMNS
        ]
    except KeyError as exc:
        raise ValueError(f"compact lineage without the column {exc.args[0]!r}") from None
    if len({len(a) for a in arrays}) > 1:
        raise ValueError("compact lineage columns of different lengths")
    made: dict[tuple[int, tuple[str, ...]], Segment] = {}

    def segment(depth: int, splits: tuple[str, ...]) -> Segment:
        found = made.get((depth, splits))
        if found is None:
            if not 0 <= depth < len(links):
                raise ValueError(f"compact lineage use at depth {depth}: not in the chain")
            found = made[(depth, splits)] = links[depth]._replace(splits=splits)
        return found

    def segments(uses: Sequence[Any]) -> tuple[Segment, ...]:
        if len(uses) % 2:
            raise ValueError("compact lineage uses are not [depth, split] pairs")
        if len(uses) == 2:
            return (segment(int(uses[0]), (str(uses[1]),)),)
        by_depth: dict[int, list[str]] = {}
        for depth, split in zip(uses[::2], uses[1::2], strict=True):
            by_depth.setdefault(int(depth), []).append(str(split))
        return tuple(segment(d, tuple(splits)) for d, splits in by_depth.items())

    entries = []
    for version, dataset, number, digest, state, data, at, why, role, uses in zip(
        *arrays, strict=True
    ):
        used = segments(uses)
        splits = (
            used[0].splits if len(used) == 1 else tuple(sorted({s for u in used for s in u.splits}))
        )
        entries.append(
            LineageEntry(
                version, dataset, int(number), digest, state, role, splits, used, data, at, why
            )
        )
    return tuple(entries)


#: The packed form's (``form=packed``) column of what each entry's segments read: per entry a
#: flat list ``[split_records, records, split_records, records, …]``, one pair per segment of
#: its ``uses`` (the distinct depths, deepest first), ``records`` null when that segment did
#: not count (:func:`consumed_from_columns` expands it into the answer's ``consumed``).
CONSUMED_COLUMN = "consumed"

#: Entries a packed lineage answer may hold (runs never expand past its ``length``).
MAX_PACKED_LINEAGE_ENTRIES = 10_000_000


def consumed_from_columns(
    chain: Sequence[tuple[str, int | None]], columns: Mapping[str, Sequence[Any]]
) -> list[dict[str, Any]]:
    """The ``consumed`` list of an upstream answer (docs/rest-api.md) from its entry columns:
    ``version``, ``role``, ``uses`` and :data:`CONSUMED_COLUMN`; ``chain[d]`` is the reference
    and step of the chain link at depth ``d``.  One item per entry, in entry order; a segment's
    ``epochs`` is ``records / split_records``, an entry's the sum over its counted segments,
    deepest first; ``records`` stops at 2^63-1.  Raises ``ValueError`` on a malformed form."""
    out: list[dict[str, Any]] = []
    for version, role, uses, counts in zip(
        columns["version"], columns["role"], columns["uses"], columns[CONSUMED_COLUMN], strict=True
    ):
        segments: list[dict[str, Any]] = []
        total, epochs_total, counted, unknown = 0, 0.0, 0, 0
        i, n, k = 0, len(uses), 0
        if n % 2 or len(counts) % 2:
            raise ValueError("lineage uses or consumed counts are not pairs")
        while i < n:
            depth = uses[i]
            splits = []
            while i < n and uses[i] == depth:
                splits.append(uses[i + 1])
                i += 2
            if k + 1 >= len(counts) or not 0 <= depth < len(chain):
                raise ValueError("lineage consumed counts do not match the entry's segments")
            size, records = counts[k], counts[k + 1]
            k += 2
            epochs = records / size if records is not None and size else None
            label, step = chain[depth]
            segments.append(
                {
                    "checkpoint": label,
                    "step": step,
                    "splits": splits,
                    "split_records": size,
                    "records": records,
                    "epochs": epochs,
                }
            )
            if records is None:
                unknown += 1
            else:
                counted += 1
                # each count is at most 2^63-1; a chain's sum is answered as a 64-bit integer
                # too, so it stops there (a lower bound, like the epochs beside it)
                total = min(total + records, MAX_INT64)
                epochs_total += epochs or 0.0
        if k != len(counts):
            raise ValueError("lineage consumed counts do not match the entry's segments")
        out.append(
            {
                "version": version,
                "role": role,
                "records": total,
                "epochs": epochs_total,
                "counted_segments": counted,
                "unknown_segments": unknown,
                "segments": segments,
            }
        )
    return out


#: The columns of the packed form (``form=packed``): :data:`LINEAGE_COLUMNS` and
#: :data:`CONSUMED_COLUMN`.
PACKED_LINEAGE_COLUMNS = (*LINEAGE_COLUMNS, CONSUMED_COLUMN)


def pack_lineage_columns(columns: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """The packed form of an answer's entry columns (:data:`PACKED_LINEAGE_COLUMNS`): each a
    plain array, ``{"runs": [[value, repeat], …]}`` (a state, a role, a dataset repeated) or
    ``{"lines": "a\nb…"}`` (names, digests) — the encodings of the shard pages' packed form
    (:func:`recordkeeper.core.shard_columns.pack_values`)."""
    return {name: pack_values(columns[name]) for name in PACKED_LINEAGE_COLUMNS if name in columns}


def unpack_lineage_columns(packed: Mapping[str, Any], length: int) -> dict[str, list[Any]]:
    """The entry columns of ``length`` entries from the packed form (:data:`CONSUMED_COLUMN`
    only if sent); ``ValueError`` / ``TypeError`` on anything else (``KeyError`` for a missing
    column), before a run expands past ``length``."""
    if type(length) is not int or not 0 <= length <= MAX_PACKED_LINEAGE_ENTRIES:
        raise ValueError(f"a packed lineage of {length!r} entries")
    return {
        name: unpack_values(name, packed[name], length)
        for name in PACKED_LINEAGE_COLUMNS
        if name in packed or name != CONSUMED_COLUMN
    }


class Consumer(NamedTuple):
    """A checkpoint downstream of some data.

    ``direct`` is True when its own segment consumed the data (``roles``/``splits`` say how);
    otherwise it inherited the data from an ancestor (restored or initialised from it).
    ``parent`` is the checkpoint it was restored or initialised from, if any.  ``state`` is
    ``deleted`` once its files are gone (its lineage stays).
    """

    model: str
    checkpoint: str
    step: int | None
    uri: str | None
    direct: bool
    roles: tuple[str, ...]
    splits: tuple[str, ...]
    parent: CheckpointRef | None
    run: str | None = None
    state: str = "present"

    @property
    def ref(self) -> CheckpointRef:
        return CheckpointRef(self.model, self.checkpoint, self.run)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "run": self.run,
            "checkpoint": self.checkpoint,
            "ref": str(self.ref),
            "state": self.state,
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
            body.get("run"),
            body.get("state") or "present",
        )

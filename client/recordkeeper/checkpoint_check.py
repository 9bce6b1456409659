"""Find checkpoints whose files are gone, by looking at storage, and record them as deleted.

A tracked manager records the deletions it makes itself (``max_to_keep``); this finds the rest:
a directory removed by hand, a bucket lifecycle rule, a manager that was not tracked.  For every
``present`` checkpoint of a model (or of one run) with a URI, the TensorFlow checkpoint prefix's
index file (``<prefix>.index``) is looked up on its store; a missing one marks the checkpoint
``deleted`` (reason ``files_missing``) — its lineage stays.  Nothing is read but the listing.
A checkpoint that cannot be looked at — registered without a URI, or a storage error (no
filesystem installed for its scheme, access denied, endpoint unreachable) — is ``unchecked``,
with the reason in ``reasons``, and the others are still checked.

>>> report = client.check_checkpoints("coco_detection")
>>> report.missing        # the checkpoints marked deleted now (model@run/ckpt-N)
>>> report.reasons        # why each unchecked one was not looked at
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recordkeeper.checkpoint_lineage import CheckpointInfo, checkpoints, mark_checkpoint_deleted
from recordkeeper.core.errors import StorageError
from recordkeeper.core.lineage import DELETED_FILES_MISSING, CheckpointRef
from recordkeeper.storage import storage_errors, url_to_fs

if TYPE_CHECKING:
    from recordkeeper.registry import Registry

__all__ = ["NO_URI", "CheckpointCheck", "check_checkpoints", "checkpoint_files_exist"]

#: The file every TensorFlow checkpoint prefix has (``ckpt-7.index``).
INDEX_SUFFIX = ".index"
#: The reason of an unchecked checkpoint registered without a URI (nothing to look at).
NO_URI = "registered without a URI"


@dataclass(frozen=True)
class CheckpointCheck:
    """What :func:`check_checkpoints` found.

    ``present``: checkpoints whose files are there; ``missing``: checkpoints whose files are
    gone (marked deleted unless ``dry_run``); ``unchecked``: checkpoints that could not be looked
    at, each with its reason in ``reasons`` — :data:`NO_URI` for one registered without a URI,
    else the storage error (``StorageError`` detail: no filesystem for its scheme, access
    denied, endpoint unreachable…).  ``errors`` are the unchecked ones a storage error stopped.
    """

    model: str
    present: tuple[CheckpointRef, ...]
    missing: tuple[CheckpointRef, ...]
    unchecked: tuple[CheckpointRef, ...]
    dry_run: bool
    reasons: Mapping[CheckpointRef, str] = field(default_factory=dict)

    @property
    def errors(self) -> tuple[CheckpointRef, ...]:
        """The unchecked checkpoints a storage error stopped (not those without a URI)."""
        return tuple(r for r in self.unchecked if self.reasons.get(r, NO_URI) != NO_URI)

    @property
    def ok(self) -> bool:
        """True when no checkpoint's files were found missing and no storage error stopped a
        check (checkpoints without a URI do not count)."""
        return not self.missing and not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "present": [str(r) for r in self.present],
            "missing": [str(r) for r in self.missing],
            "unchecked": [str(r) for r in self.unchecked],
            "reasons": {str(r): self.reasons.get(r, NO_URI) for r in self.unchecked},
            "errors": [str(r) for r in self.errors],
            "dry_run": self.dry_run,
        }


def checkpoint_files_exist(uri: str, storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether the checkpoint prefix ``uri`` still has its index file on its store; a
    :class:`~recordkeeper.errors.StorageError` when the store cannot say."""
    fs, path = url_to_fs(uri + INDEX_SUFFIX, storage_options)
    with storage_errors(uri):
        fs.invalidate_cache()
        return bool(fs.exists(path))


def check_checkpoints(
    registry: Registry,
    model: str,
    *,
    run: str | None = None,
    dry_run: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> CheckpointCheck:
    """Look at storage for every present checkpoint of ``model`` (of one ``run``) and mark those
    whose files are gone as deleted (not with ``dry_run``).  ``storage_options`` default to the
    client's.

    A storage error for one checkpoint (no filesystem for its scheme, access denied, endpoint
    unreachable) puts it in ``unchecked`` with the error as its reason, and the check goes on.
    """
    options = storage_options if storage_options is not None else registry.storage_options
    listed: list[CheckpointInfo] = checkpoints(registry.http, model, run=run, state="present")
    present, missing, unchecked = [], [], []
    reasons: dict[CheckpointRef, str] = {}
    for info in listed:
        if not info.uri:
            unchecked.append(info.ref)
            reasons[info.ref] = NO_URI
            continue
        try:
            exists = checkpoint_files_exist(info.uri, options)
        except StorageError as exc:
            unchecked.append(info.ref)
            reasons[info.ref] = exc.detail
            continue
        if exists:
            present.append(info.ref)
        else:
            missing.append(info.ref)
            if not dry_run:
                mark_checkpoint_deleted(registry.http, info.ref, reason=DELETED_FILES_MISSING)
    return CheckpointCheck(
        model, tuple(present), tuple(missing), tuple(unchecked), dry_run, reasons
    )

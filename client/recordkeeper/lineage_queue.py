"""A local, durable queue of checkpoint registrations the service has not accepted yet.

Training must never stop or lose lineage because the registry is down.  A registration is tried
at once (the HTTP helper already retries connection errors and 5xx answers with backoff); if the
service stays unreachable it is appended to a JSON-lines file — written and ``fsync``-ed before
``save()`` returns — and sent later, in order, by the next registration that gets through, by
:meth:`RegistrationQueue.flush`, or by ``recordkeeper checkpoints flush``.

Nothing is lost: an entry leaves the file only after the service answered it.  Nothing is
duplicated: registration is idempotent on (model, run, checkpoint), so an entry sent twice (a
crash between the answer and the rewrite of the file) is answered ``200`` the second time.
Order is kept, so a parent is always registered before its children.

Entries are registrations (``action: register``, the default) or deletions a tracked manager
saw (``action: delete``: its ``max_to_keep`` removed a checkpoint), queued the same way and
sent after the registration of the checkpoint they delete.

An entry the service *refuses* (a 4xx other than "parent unknown") would block the queue
forever; it is moved to ``<queue>.rejected.jsonl`` with the error, and a warning is issued.
A parent the service does not know (restored from a checkpoint made before tracking started)
or cannot tell apart (``model/ckpt-N`` in several runs) is dropped from the entry and kept in its
metadata as ``unregistered_parent``.  With ``raise_refused=False`` (what a tracked manager
uses: saving never fails because of the registry) a refused registration is set aside the same
way instead of being raised.

The default file is ``<user data dir>/recordkeeper/pending-checkpoints.jsonl``; set
``RECORDKEEPER_CHECKPOINT_QUEUE`` (read when a queue is made) or pass ``path=`` to move it.
Several processes may share one file: every read-modify-write holds an ``fcntl`` lock.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Unpack

from recordkeeper.checkpoint_lineage import CheckpointFields, CheckpointInfo
from recordkeeper.core.errors import (
    AmbiguousCheckpoint,
    CheckpointNotFound,
    RecordkeeperError,
    ServerError,
    ServiceUnavailable,
)
from recordkeeper.core.lineage import CheckpointRef

__all__ = [
    "DELETE",
    "QUEUE_ENV",
    "REGISTER",
    "FlushResult",
    "Registrar",
    "RegistrationQueue",
    "RegistrationRejected",
    "default_queue_path",
]


class Registrar(Protocol):
    """What the queue needs from a client: its service URL and a registration call."""

    @property
    def url(self) -> str: ...

    def register_checkpoint(
        self, *, model: str, checkpoint: str, **fields: Unpack[CheckpointFields]
    ) -> CheckpointInfo: ...

    def mark_checkpoint_deleted(
        self, ref: str | CheckpointRef, *, reason: str = ..., deleted_at: str | None = None
    ) -> CheckpointInfo: ...


QUEUE_ENV = "RECORDKEEPER_CHECKPOINT_QUEUE"
REGISTER = "register"
DELETE = "delete"


class RegistrationRejected(UserWarning):
    """The service refused a queued registration; it was set aside in the rejected file."""


def default_queue_path() -> Path:
    """``RECORDKEEPER_CHECKPOINT_QUEUE`` or the per-user data directory's queue file."""
    configured = os.environ.get(QUEUE_ENV)
    if configured:
        return Path(configured).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("recordkeeper", appauthor=False)) / "pending-checkpoints.jsonl"


@dataclass(frozen=True)
class FlushResult:
    """What a flush did: registered entries, entries still pending, entries set aside."""

    registered: tuple[CheckpointInfo, ...]
    pending: int
    rejected: int


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, ServiceUnavailable | ServerError)


class RegistrationQueue:
    """Registrations for one service, durable in a JSON-lines file."""

    def __init__(self, client: Registrar, path: str | Path | None = None) -> None:
        self.client = client
        self.path = Path(path).expanduser() if path is not None else default_queue_path()

    @property
    def rejected_path(self) -> Path:
        return self.path.with_name(self.path.stem + ".rejected.jsonl")

    def __repr__(self) -> str:
        return f"RegistrationQueue({str(self.path)!r}, url={self.client.url!r})"

    # -- file handling -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _read_all(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        entries = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                entries.append(json.loads(line))
            except ValueError:
                # A torn last line from a crash mid-append: keep it aside, never drop silently.
                self._append(self.rejected_path, {"raw": line, "error": "unreadable line"})
        return entries

    @staticmethod
    def _append(path: Path, entry: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def _rewrite(self, entries: list[dict[str, Any]]) -> None:
        if not entries:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            for entry in entries:
                out.write(json.dumps(entry, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(self.path)

    def _mine(self, entry: dict[str, Any]) -> bool:
        return bool(entry.get("url") == self.client.url)

    # -- public API ----------------------------------------------------------------------------

    def pending(self) -> list[dict[str, Any]]:
        """Queued registration bodies for this client's service, oldest first."""
        with self._locked():
            return [e["body"] for e in self._read_all() if self._mine(e)]

    def submit(
        self, body: dict[str, Any], *, action: str = REGISTER, raise_refused: bool = True
    ) -> CheckpointInfo | None:
        """Send ``body`` now (a registration, or with ``action="delete"`` a deletion), or queue
        it if the service is unreachable.

        Earlier queued entries are sent first (their checkpoints may be this one's parents).
        Returns the checkpoint as the service answered, or None when it was queued (or set
        aside).  Errors that are the caller's (invalid data, a conflict) are raised and nothing
        is queued — unless ``raise_refused`` is False: then the entry is set aside in the
        rejected file with a :class:`RegistrationRejected` warning.
        """
        with self._locked():
            queued = [e for e in self._read_all() if self._mine(e)]
            if not queued:
                try:
                    return self._send(body, action)
                except RecordkeeperError as exc:
                    if _transient(exc):
                        self._append(self.path, self._entry(body, exc, action))
                        return None
                    if raise_refused:
                        raise
                    self._set_aside(self._entry(body, exc, action), exc)
                    return None
            self._append(self.path, self._entry(body, None, action))
            result = self._flush_locked()
        wanted = (body["model"], body.get("run"), body["checkpoint"])
        for info in result.registered:
            if (info.model, info.run, info.checkpoint) == wanted:
                return info
        return None

    def flush(self) -> FlushResult:
        """Send every queued registration for this service, in order, until one cannot be."""
        with self._locked():
            return self._flush_locked()

    # -- internals -----------------------------------------------------------------------------

    def _entry(
        self, body: dict[str, Any], exc: BaseException | None, action: str = REGISTER
    ) -> dict[str, Any]:
        entry = {
            "url": self.client.url,
            "queued_at": datetime.datetime.now(datetime.UTC).isoformat(),
            "last_error": str(exc) if exc is not None else None,
            "body": body,
        }
        if action != REGISTER:
            entry["action"] = action
        return entry

    def _set_aside(self, entry: dict[str, Any], exc: RecordkeeperError) -> None:
        self._append(self.rejected_path, {**entry, "error": exc.to_dict()})
        body = entry["body"]
        ref = CheckpointRef(body.get("model", "?"), body.get("checkpoint", "?"), body.get("run"))
        warnings.warn(
            f"the service refused the {entry.get('action', REGISTER)} of checkpoint {ref}: "
            f"{exc}; kept in {self.rejected_path}",
            RegistrationRejected,
            stacklevel=4,
        )

    def _send(self, body: dict[str, Any], action: str = REGISTER) -> CheckpointInfo | None:
        if action == DELETE:
            try:
                return self.client.mark_checkpoint_deleted(
                    CheckpointRef(body["model"], body["checkpoint"], body.get("run")),
                    reason=body.get("reason") or "max_to_keep",
                    deleted_at=body.get("deleted_at"),
                )
            except CheckpointNotFound:
                return None  # never registered (saved before tracking started): nothing to mark
        fields = {k: v for k, v in body.items() if k not in ("model", "checkpoint")}
        try:
            return self.client.register_checkpoint(
                model=body["model"], checkpoint=body["checkpoint"], **fields
            )
        except (CheckpointNotFound, AmbiguousCheckpoint):
            if not body.get("parent"):
                raise
            # The parent was never registered (e.g. trained before tracking started): keep the
            # link as metadata rather than losing the checkpoint.
            metadata = dict(body.get("metadata") or {})
            metadata["unregistered_parent"] = body["parent"]
            fields.update(parent=None, parent_kind=None, metadata=metadata)
            return self.client.register_checkpoint(
                model=body["model"], checkpoint=body["checkpoint"], **fields
            )

    def _flush_locked(self) -> FlushResult:
        entries = self._read_all()
        keep: list[dict[str, Any]] = []
        registered: list[CheckpointInfo] = []
        rejected = 0
        blocked = False
        for entry in entries:
            if blocked or not self._mine(entry):
                keep.append(entry)
                continue
            try:
                info = self._send(entry["body"], entry.get("action", REGISTER))
            except RecordkeeperError as exc:
                if _transient(exc):
                    entry["last_error"] = str(exc)
                    keep.append(entry)
                    blocked = True  # keep order: later entries may be children of this one
                    continue
                rejected += 1
                self._set_aside(entry, exc)
                continue
            if info is not None:
                registered.append(info)
        self._rewrite(keep)
        pending = sum(1 for e in keep if self._mine(e))
        return FlushResult(tuple(registered), pending, rejected)

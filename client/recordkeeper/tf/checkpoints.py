"""Checkpoint lineage for TensorFlow: a tracked ``CheckpointManager`` and a Keras callback.

>>> manager = rk.tf.track(tf.train.CheckpointManager(ckpt, "gs://b/run1", max_to_keep=5),
...                       client=client, model="coco_detection", data={"train": v})
>>> manager.restore_or_initialize()     # a restored checkpoint becomes the parent
>>> manager.save()                      # writes ckpt-N, then registers it with its data

Every ``save()`` that writes a checkpoint registers it: name (``ckpt-N``), step, prefix URI,
the data its segment consumed, and its parent — the checkpoint restored by
``restore_or_initialize()``/``restore()`` (or detected: a ``tf.train.Checkpoint`` restored from
``manager.latest_checkpoint`` by hand carries that checkpoint's ``save_counter``), then the
previous save of this manager.  A manager in the style of tensorflow/models'
``SavedModelCheckpointManager`` (duck-typed: a ``modules_to_export`` mapping) also has its
``ckpt-N_saved_modules/<name>`` exports recorded.

Registration never costs the user their checkpoint: the checkpoint is written first; a
registration the service cannot take now is queued durably and sent later
(:mod:`recordkeeper.lineage_queue`).  ``data`` defaults to the pinned data most recently loaded
with :func:`recordkeeper.load_pinned`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recordkeeper.core.errors import InvalidCheckpoint, ServiceUnavailable
from recordkeeper.core.lineage import (
    CheckpointRef,
    ParentKind,
    parse_checkpoint_ref,
    validate_model_name,
)
from recordkeeper.core.refs import parse_reference
from recordkeeper.lineage import CheckpointInfo, DataUse, checkpoint_body, normalize_data
from recordkeeper.lineage_queue import RegistrationQueue
from recordkeeper.pinned import current

if TYPE_CHECKING:
    from recordkeeper.client import Client

__all__ = ["TrackedCheckpointManager", "checkpoint_uri", "make_checkpoint_callback", "track"]

log = logging.getLogger(__name__)

SAVED_MODULES_SUFFIX = "saved_modules"
_NUMBER_RE = re.compile(r"-(\d+)$")


def checkpoint_uri(path: str) -> str:
    """A checkpoint prefix as a URI: local paths become ``file://``, URLs stay as they are."""
    if "://" in path:
        return path
    return Path(os.path.abspath(path)).as_uri()


def _checkpoint_number(path: str) -> int | None:
    match = _NUMBER_RE.search(os.path.basename(path))
    return int(match[1]) if match else None


def _resolve_data(client: Client, data: Any) -> list[DataUse]:
    """Data as exact version names, resolved once so a moving alias cannot change it later."""
    if data is None:
        pinned = current()
        if pinned is None:
            return []
        data = pinned
    if hasattr(data, "lineage_data"):
        return list(data.lineage_data())
    entries = normalize_data(data)
    exact = []
    for entry in entries:
        ref = parse_reference(entry.version)
        if ref.kind.value == "name":
            exact.append(entry)
            continue
        try:
            version = client.resolve(entry.version, shards=False)
        except ServiceUnavailable:
            if not ref.is_pinned:
                raise ServiceUnavailable(
                    f"cannot resolve {entry.version!r} to an exact version while the service is "
                    "unreachable; pass DatasetVersion objects or pinned names "
                    "(recordkeeper lock) to train while it is down",
                    url=client.url,
                ) from None
            exact.append(entry)  # coco@v3 / coco@sha256:… name one content already
            continue
        exact.append(DataUse(version.name, entry.role, entry.splits))
    return exact


class TrackedCheckpointManager:
    """A wrapped ``tf.train.CheckpointManager`` (or ``SavedModelCheckpointManager``): every save
    registers the checkpoint with ``data`` and its parent (made as ``rk.tf.track(...)``).

    ``data`` is a role → version mapping (``{"train": v, "eval": "coco@v3"}``), a list of
    entries, or :class:`~recordkeeper.pinned.PinnedData`; by default the pinned data last loaded
    with :func:`recordkeeper.load_pinned`.  ``parent`` names a checkpoint of *another* model this
    one starts from (``parent_kind="initialized_from"``, fine-tuning); a restore from this
    manager's own directory overrides it.  ``queue`` is where registrations wait while the
    service is unreachable.  ``step`` maps a checkpoint path to its step (default: the ``-N``
    suffix of the checkpoint name).

    Every attribute not defined here (``directory``, ``checkpoints``, ``latest_checkpoint``,
    ``checkpoint``, ``savedmodels``, ...) is the wrapped manager's.
    """

    def __init__(
        self,
        manager: Any,
        *,
        client: Client,
        model: str,
        data: Any = None,
        run: str | None = None,
        parent: str | CheckpointRef | None = None,
        parent_kind: ParentKind = "initialized_from",
        queue: RegistrationQueue | str | Path | None = None,
        step: Callable[[str], int | None] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self._manager = manager
        self._client = client
        self.model = validate_model_name(model)
        self.run = run
        self.data = _resolve_data(client, data)
        self.queue = (
            queue if isinstance(queue, RegistrationQueue) else RegistrationQueue(client, queue)
        )
        self._step = step
        self._metadata = dict(metadata or {})
        self._parent: CheckpointRef | None = parse_checkpoint_ref(parent) if parent else None
        self._parent_kind = parent_kind if parent else None
        self._restored_path: str | None = None
        self._saved_any = False
        self._latest_at_start: str | None = getattr(manager, "latest_checkpoint", None)
        self.registered: list[CheckpointInfo] = []
        self.queued: list[str] = []
        if not self.data:
            log.warning(
                "tracking %s without data: its checkpoints record no training data of their own "
                "(pass data= or load a pinned config first)",
                self.model,
            )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)

    def __repr__(self) -> str:
        return f"TrackedCheckpointManager({self._manager!r}, model={self.model!r})"

    @property
    def manager(self) -> Any:
        """The wrapped checkpoint manager."""
        return self._manager

    @property
    def parent(self) -> CheckpointRef | None:
        """What the next save will record as its parent."""
        return self._parent

    # -- restoring ---------------------------------------------------------------------------

    def _restored(self, path: str | None) -> None:
        if path:
            self._restored_path = path
            self._parent = CheckpointRef(self.model, os.path.basename(path))
            self._parent_kind = "restored_from"

    def restore_or_initialize(self) -> str | None:
        """The wrapped manager's ``restore_or_initialize``; a restored checkpoint is the parent."""
        path = self._manager.restore_or_initialize()
        self._restored(path)
        return path

    def restore(self, path: str | None = None) -> Any:
        """Restore ``path`` (default: the latest checkpoint) into the managed checkpoint."""
        target = path or self._manager.latest_checkpoint
        if target is None:
            return None
        status = self._manager.checkpoint.restore(target)
        self._restored(target)
        return status

    def _detect_manual_restore(self) -> None:
        """Before the first save: was the checkpoint restored from the latest one by hand?"""
        if self._saved_any or self._restored_path or self._latest_at_start is None:
            return
        import tensorflow as tf

        try:
            stored = int(
                tf.train.load_variable(
                    self._latest_at_start, "save_counter/.ATTRIBUTES/VARIABLE_VALUE"
                )
            )
            live = int(self._manager.checkpoint.save_counter.numpy())
        except Exception:  # not a tf.train.Checkpoint layout: nothing to detect
            return
        if stored and stored == live:
            self._restored(self._latest_at_start)

    # -- saving ------------------------------------------------------------------------------

    def save(
        self, *args: Any, metrics: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> str | None:
        """Save through the wrapped manager, then register what was written.

        Arguments are the wrapped manager's (``checkpoint_number``, ``check_interval``, ...);
        ``metrics`` (JSON values) are recorded with the checkpoint.
        """
        self._detect_manual_restore()
        path = self._manager.save(*args, **kwargs)
        if not path:
            return path
        self._register(str(path), metrics)
        return str(path)

    def _saved_models(self, path: str) -> list[dict[str, str]]:
        modules = getattr(self._manager, "modules_to_export", None)
        if not modules:
            return []
        import tensorflow as tf

        exports = []
        for name in modules:
            export = f"{path}_{SAVED_MODULES_SUFFIX}/{name}"
            if tf.io.gfile.isdir(export):
                exports.append({"name": str(name), "uri": checkpoint_uri(export)})
        return exports

    def _register(self, path: str, metrics: Mapping[str, Any] | None = None) -> None:
        name = os.path.basename(path)
        step = self._step(path) if self._step is not None else _checkpoint_number(path)
        try:
            body = checkpoint_body(
                model=self.model,
                checkpoint=name,
                step=step,
                uri=checkpoint_uri(path),
                data=self.data,
                parent=self._parent,
                parent_kind=self._parent_kind,
                saved_models=self._saved_models(path),
                run=self.run,
                metrics=metrics,
                metadata=self._metadata,
            )
        except InvalidCheckpoint:
            log.exception("checkpoint %s was saved but cannot be described for lineage", path)
            raise
        info = self.queue.submit(body)
        if info is None:
            self.queued.append(name)
            log.warning(
                "recordkeeper is unreachable: checkpoint %s saved, its registration queued in %s",
                path,
                self.queue.path,
            )
        else:
            self.registered.append(info)
        # The next save continues from this one.
        self._saved_any = True
        self._parent = CheckpointRef(self.model, name)
        self._parent_kind = "restored_from"

    def flush(self) -> int:
        """Send queued registrations now; returns how many are still pending."""
        return self.queue.flush().pending


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


#: ``rk.tf.track(manager, client=..., model=..., ...)``, the documented spelling: a
#: :class:`TrackedCheckpointManager` (one signature, one docstring).
track = TrackedCheckpointManager


def make_checkpoint_callback(
    directory: str,
    *,
    client: Client,
    model_name: str,
    data: Any = None,
    run: str | None = None,
    max_to_keep: int | None = 5,
    restore: bool = True,
    queue: RegistrationQueue | str | Path | None = None,
    parent: str | CheckpointRef | None = None,
) -> Any:
    """A Keras callback that checkpoints ``model.fit`` every epoch through a tracked manager.

    On ``on_train_begin`` it builds ``tf.train.Checkpoint(model=..., optimizer=...)`` and a
    ``CheckpointManager`` in ``directory`` and (with ``restore``) restores the latest
    checkpoint there — which becomes the parent of the next one.  Each ``on_epoch_end`` saves
    ``ckpt-N`` (``N`` = the checkpoint's save counter) and registers it with ``data``.
    The tracked manager is the callback's ``manager`` attribute.
    """
    import keras
    import tensorflow as tf

    class CheckpointCallback(keras.callbacks.Callback):
        """Saves and registers a checkpoint at the end of every epoch."""

        def __init__(self) -> None:
            super().__init__()
            self.manager: TrackedCheckpointManager | None = None
            self.restored: str | None = None

        def on_train_begin(self, logs: Mapping[str, Any] | None = None) -> None:
            if self.manager is not None:
                return
            checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.model.optimizer)
            base = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep)
            self.manager = track(
                base,
                client=client,
                model=model_name,
                data=data,
                run=run,
                queue=queue,
                parent=parent,
            )
            if restore:
                self.restored = self.manager.restore_or_initialize()

        def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
            assert self.manager is not None
            metrics = {k: float(v) for k, v in (logs or {}).items() if _is_number(v)}
            self.manager.save(metrics={"epoch": epoch + 1, **metrics})

    return CheckpointCallback()

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
``ckpt-N_saved_modules/<name>`` exports recorded, each with what its serving signatures parse
(for ``check_model``).

Each checkpoint belongs to a **run**: ``run=`` if given, else the one derived from the manager's
directory (:func:`recordkeeper.core.lineage.run_of`), so a rerun in a fresh directory never
collides with an earlier run of the same model name, and a resume in the same directory
continues its run.

Registration never costs the user their checkpoint: the checkpoint is written first; a
registration the service cannot take now is queued durably and sent later, one it refuses is
set aside with a warning (:mod:`recordkeeper.lineage_queue`) — ``save()`` never fails because
of the registry.

A crash cannot cut the lineage either.  Before the wrapped ``save()`` writes anything, the
manager records a *save intent* next to the checkpoints
(``<directory>/.recordkeeper-save-intent.json``: the data, parent and metrics the registration
will carry, the checkpoints kept before the save) and removes it once the registration and
deletions are sent or queued.  A process killed in between — say in the seconds a
``SavedModelCheckpointManager`` spends exporting after the checkpoint files are written —
leaves the intent behind; the next tracked manager made on that directory finishes it first
(:meth:`TrackedCheckpointManager.recover`): the checkpoint that save wrote is registered with
the data it trained on and its parent, and the checkpoints it deleted are recorded as deleted.
The resumed run then restores that checkpoint and continues the chain from it.

When the manager's ``max_to_keep`` deletes older checkpoints (and their ``_saved_modules``),
the deletions are recorded too.  ``data`` defaults to the pinned data most recently loaded with
:func:`recordkeeper.load_pinned`.

Every save ends with the manager's *save callbacks* (:meth:`TrackedCheckpointManager.
add_save_callback`): each receives a :class:`SavedCheckpoint` describing what was written,
registered and deleted.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import re
import sys
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from recordkeeper.checkpoint_lineage import (
    CheckpointInfo,
    DataUse,
    ModelCheck,
    checkpoint_body,
    normalize_data,
)
from recordkeeper.core.errors import (
    AmbiguousCheckpoint,
    InvalidCheckpoint,
    InvalidRequest,
    RecordkeeperError,
    ServiceUnavailable,
)
from recordkeeper.core.lineage import (
    DELETED_BY_MANAGER,
    CheckpointRef,
    ParentKind,
    checkpoint_directory,
    parse_checkpoint_ref,
    run_for_directory,
    validate_model_name,
    validate_run_name,
    validate_saved_model_name,
)
from recordkeeper.core.refs import parse_reference
from recordkeeper.core.save_intents import SaveIntent, dropped, written
from recordkeeper.lineage_queue import DELETE, RegistrationQueue
from recordkeeper.pinned import current
from recordkeeper.storage import to_uri
from recordkeeper.tf import intents
from recordkeeper.tf.saves import SaveCallback, SavedCheckpoint
from recordkeeper.tf.signatures import model_inputs

if TYPE_CHECKING:
    from recordkeeper.client import Client

__all__ = [
    "SavedCheckpoint",
    "TrackedCheckpointManager",
    "checkpoint_uri",
    "make_checkpoint_callback",
    "track",
]

log = logging.getLogger(__name__)

SAVED_MODULES_SUFFIX = "saved_modules"
_NUMBER_RE = re.compile(r"-(\d+)$")


def checkpoint_uri(path: str) -> str:
    """A checkpoint prefix (or export directory) as a URI: local paths become ``file://`` +
    the absolute path, URLs stay as they are.

    The path is written as it is, never percent-encoded: every URI recordkeeper stores is
    opened by its storage layer (fsspec), which takes a ``file://`` URI's path literally, as
    the service's storage prefixes and :func:`recordkeeper.storage.to_uri` do.  Encoding it
    (``pathlib``'s ``as_uri``, used before) turned ``data_version=coco_v3`` — or any name
    with ``=``, ``+``, ``,``, ``@``, ``:``, ``%`` or a non-ASCII letter — into another path,
    ``data_version%3Dcoco_v3``, where the export's ``recordkeeper.json`` was then written.
    """
    if "://" in path:
        return path
    return to_uri(path)


def legacy_checkpoint_uri(path: str) -> str:
    """``path`` as :func:`checkpoint_uri` wrote it before it stopped percent-encoding local
    paths: what runs are derived from (so a resumed job keeps its run) and what older
    registrations carry."""
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


def _files_exist(path: str) -> bool:
    """Whether the checkpoint prefix ``path`` still has its files (``<prefix>.index``); True
    when storage cannot say (nothing is marked deleted on a guess)."""
    import tensorflow as tf

    try:
        return bool(tf.io.gfile.exists(f"{path}.index"))
    except Exception:
        log.warning("could not look for %s.index", path, exc_info=True)
        return True


class TrackedCheckpointManager:
    """A wrapped ``tf.train.CheckpointManager`` (or ``SavedModelCheckpointManager``): every save
    registers the checkpoint with ``data`` and its parent (made as ``rk.tf.track(...)``).

    ``data`` is a role → version mapping (``{"train": v, "eval": "coco@v3"}``), a list of
    entries, or :class:`~recordkeeper.pinned.PinnedData`; by default the pinned data last loaded
    with :func:`recordkeeper.load_pinned`.  ``run`` names the run; by default it is derived from
    the manager's directory (the same directory, the same run).  ``parent`` names a checkpoint
    of *another* model this one starts from (``parent_kind="initialized_from"``, fine-tuning);
    a restore from this manager's own directory overrides it.  ``queue`` is where registrations
    wait while the service is unreachable.  ``step`` maps a checkpoint path to its step
    (default: the ``-N`` suffix of the checkpoint name).  ``tensorboard`` writes the data each
    checkpoint trained on as TensorBoard summaries (:mod:`recordkeeper.tf.summaries`): a log
    directory, True for ``<directory>/recordkeeper``, False for none.  ``describe_exports``
    writes each SavedModel export's lineage into its ``assets.extra/recordkeeper.json``
    (:mod:`recordkeeper.exports`), read offline by :func:`recordkeeper.tf.model_lineage`.
    ``export_names`` names the exports by the data they were trained on: a template with
    ``{version}`` (the version of the ``train`` role, or the one version given) and ``{module}``
    (the key in the wrapped manager's ``modules_to_export``), e.g. ``"data_version={version}"``
    exports to ``ckpt-1234_saved_modules/data_version=coco_20231015_v3`` — the wrapped manager's
    ``modules_to_export`` mapping is renamed in place when the manager is made.  With several
    modules the template needs ``{module}`` (``"{module}-data_version={version}"``).

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
        tensorboard: bool | str = True,
        describe_exports: bool = True,
        export_names: str | None = None,
        batch_size: int | Mapping[str, int] | None = None,
    ) -> None:
        self._manager = manager
        self._client = client
        self.model = validate_model_name(model)
        self._explicit_run = validate_run_name(run) if run is not None else None
        self.directory_uri = checkpoint_uri(str(manager.directory))
        #: The run every checkpoint of this manager is registered in.
        # derived from the percent-encoded form, as before: a resumed job stays in its run
        self.run = self._explicit_run or run_for_directory(
            legacy_checkpoint_uri(str(manager.directory))
        )
        self._save_callbacks: list[SaveCallback] = []
        self.data = _resolve_data(client, data)
        self.queue = (
            queue if isinstance(queue, RegistrationQueue) else RegistrationQueue(client, queue)
        )
        self._step = step
        #: Records per training step, by role (``batch_size``): a segment read (its step -
        #: its parent's step) * that many records of its version in that role.
        self._per_step = _per_role(batch_size)
        self._segment_step: int | None = 0  # the step the next save's segment started at
        self._added: dict[str, int] = {}  # add_records() since the last save, by role
        self._metadata = dict(metadata or {})
        self._parent: CheckpointRef | None = parse_checkpoint_ref(parent) if parent else None
        self._parent_kind = parent_kind if parent else None
        self._restored_path: str | None = None
        self._saved_any = False
        self._latest_at_start: str | None = getattr(manager, "latest_checkpoint", None)
        self.registered: list[CheckpointInfo] = []
        self.queued: list[str] = []
        self.deleted: list[CheckpointRef] = []
        self._known: dict[str, CheckpointRef] = {}  # checkpoint path → its reference
        if export_names is not None:
            self._name_exports(export_names)
        if not self.data:
            log.warning(
                "tracking %s without data: its checkpoints record no training data of their own "
                "(pass data= or load a pinned config first)",
                self.model,
            )
        #: Where the TensorBoard data summaries go (None: not written).
        self.tensorboard_dir: str | None = None
        if tensorboard:
            from recordkeeper.tf.summaries import DataSummaries, default_logdir

            logdir = (
                tensorboard
                if isinstance(tensorboard, str)
                else default_logdir(str(manager.directory))
            )
            self.tensorboard_dir = logdir
            self.add_save_callback(DataSummaries(logdir))
        if describe_exports:
            from recordkeeper.tf.exports import ExportLineageWriter

            self.add_save_callback(ExportLineageWriter(client))
        self.add_save_callback(_bridges_after_save(client))
        #: Checkpoints an interrupted save of an earlier process wrote, registered by
        #: :meth:`recover` when this manager was made.
        self.recovered: list[CheckpointRef] = []
        self.recover()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)

    def _name_exports(self, template: str) -> None:
        """Rename the wrapped manager's ``modules_to_export`` by ``template`` (see the class)."""
        modules = getattr(self._manager, "modules_to_export", None)
        if not modules or not isinstance(modules, MutableMapping):
            raise InvalidRequest(
                "export_names needs a SavedModelCheckpointManager-style manager with a "
                "modules_to_export mapping to name"
            )
        if len(modules) > 1 and "{module}" not in template:
            raise InvalidRequest(
                f"export_names {template!r} would give {len(modules)} modules one directory; "
                "put {module} in it"
            )
        train = [d for d in self.data if d.role == "train"] or list(self.data)
        versions = sorted({d.version for d in train})
        if "{version}" in template and len(versions) != 1:
            raise InvalidRequest(
                f"export_names {template!r} needs one training data version, this manager has "
                f"{', '.join(versions) or 'none'}"
            )
        renamed: dict[str, Any] = {}
        for name, module in modules.items():
            try:
                new = template.format(module=name, version=versions[0] if versions else "")
            except (KeyError, IndexError, ValueError) as exc:
                raise InvalidRequest(
                    f"export_names {template!r} is not a template of {{module}} and "
                    f"{{version}}: {exc!r}"
                ) from None
            if new in ("", ".", "..") or "/" in new or "\\" in new:
                raise InvalidRequest(
                    f"export_names {template!r} gives {new!r} for {name!r}: an export name is "
                    "one directory name"
                )
            renamed[validate_saved_model_name(new, "export name")] = module
        if len(renamed) != len(modules):
            raise InvalidRequest(f"export_names {template!r} gives two modules one name")
        modules.clear()
        modules.update(renamed)

    def __repr__(self) -> str:
        return (
            f"TrackedCheckpointManager({self._manager!r}, model={self.model!r}, run={self.run!r})"
        )

    def add_save_callback(self, callback: SaveCallback) -> None:
        """Call ``callback(SavedCheckpoint)`` at the end of every save that wrote a checkpoint
        (after its registration was sent or queued).  An exception in a callback is logged,
        never raised: a save does not fail because of what is hooked on it."""
        self._save_callbacks.append(callback)

    def ref_of(self, path: str) -> CheckpointRef:
        """The reference of the checkpoint at prefix ``path``: this manager's run for its own
        directory, else the run that directory derives."""
        directory = checkpoint_directory(checkpoint_uri(path))
        if directory.rstrip("/") == self.directory_uri.rstrip("/"):
            run = self.run
        else:
            run = run_for_directory(checkpoint_directory(legacy_checkpoint_uri(path)))
        return CheckpointRef(self.model, os.path.basename(path), run)

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
            self._segment_step = self._step_of(path)
            self._restored_path = path
            self._parent = self._known[path] = self._registered_ref(path)
            self._parent_kind = "restored_from"

    def _registered_ref(self, path: str) -> CheckpointRef:
        """The registered checkpoint at ``path``: the run :meth:`ref_of` expects if it has it
        there, else whichever run registered that name at that URI (a resume under a new
        ``run=`` name, a run named explicitly elsewhere).  Falls back to :meth:`ref_of` when
        the service cannot tell (unreachable, or not registered: the queue handles it)."""
        guess = self.ref_of(path)
        uris = {checkpoint_uri(path), legacy_checkpoint_uri(path)}
        try:
            if self._client.checkpoint(guess).uri in uris:
                return guess
        except RecordkeeperError:
            pass
        try:
            found = self._client.checkpoint(guess.without_run())
            candidates = [str(found.ref)] if found.uri in uris else []
        except AmbiguousCheckpoint as exc:
            candidates = list(exc.extra.get("candidates") or ())
        except RecordkeeperError:
            return guess
        for candidate in candidates:
            try:
                info = self._client.checkpoint(candidate)
            except RecordkeeperError:
                continue
            if info.uri in uris:
                return info.ref
        return guess

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

    def _step_of(self, path: str) -> int | None:
        return self._step(path) if self._step is not None else _checkpoint_number(path)

    def add_records(self, records: int, role: str = "train") -> None:
        """Count ``records`` read for ``role`` in the current segment (e.g. from a counting
        input pipeline); the next save registers the sum instead of steps * ``batch_size``."""
        if isinstance(records, bool) or not isinstance(records, int) or records < 0:
            raise InvalidCheckpoint(f"records must be a non-negative integer, got {records!r}")
        self._added[role] = self._added.get(role, 0) + records

    def _segment_data(self, step: int | None) -> list[DataUse]:
        """This manager's data with each role's records for the segment ending at ``step``:
        what :meth:`add_records` counted, else (step - the segment's first step) * the role's
        ``batch_size``.  A role held by several versions is not counted (the split between
        them is not known)."""
        counts: dict[str, int] = dict(self._added)
        start = self._segment_step
        for role, per in self._per_step.items():
            if role not in counts and step is not None and start is not None and step >= start:
                counts[role] = (step - start) * per
        by_role: dict[str, int] = {}
        for entry in self.data:
            by_role[entry.role] = by_role.get(entry.role, 0) + 1
        return [
            dataclasses.replace(d, records=counts[d.role])
            if d.role in counts and by_role[d.role] == 1 and d.records is None
            else d
            for d in self.data
        ]

    def save(
        self, *args: Any, metrics: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> str | None:
        """Save through the wrapped manager, then register what was written.

        Arguments are the wrapped manager's (``checkpoint_number``, ``check_interval``, ...);
        ``metrics`` (JSON values) are recorded with the checkpoint.
        """
        self._detect_manual_restore()
        before = self._kept()
        intended = self._write_intent(before, metrics)
        try:
            path = self._manager.save(*args, **kwargs)
        except Exception:
            # e.g. an export failing after the checkpoint was written: what that save wrote
            # and deleted is recorded, and the next save continues from what it wrote
            if intended and (ref := self.recover()) is not None:
                self._continue_from(self._path_of(ref.checkpoint), ref)
            raise
        if not path:
            if intended:
                intents.clear_intent(str(self._manager.directory))
            return path
        body, info = self._register(str(path), metrics)
        deleted = self._record_deletions(before, str(path))
        if intended:  # registration and deletions are sent or queued: nothing left to finish
            intents.clear_intent(str(self._manager.directory))
        self._after_save(str(path), body, info, deleted)
        return str(path)

    def _after_save(
        self,
        path: str,
        body: dict[str, Any],
        info: CheckpointInfo | None,
        deleted: tuple[CheckpointRef, ...],
    ) -> None:
        checked = self._check_model(info)
        event = SavedCheckpoint(path, self.ref_of(path), body, info, deleted, checked)
        for callback in self._save_callbacks:
            try:
                callback(event)
            except Exception:
                log.exception("a save callback failed for checkpoint %s", path)

    def _kept(self) -> list[str]:
        """The checkpoint paths the wrapped manager keeps now, oldest first."""
        return [str(p) for p in getattr(self._manager, "checkpoints", None) or ()]

    def _path_of(self, name: str) -> str:
        return os.path.join(str(self._manager.directory), name)

    def _write_intent(self, before: list[str], metrics: Mapping[str, Any] | None) -> bool:
        """Record what this save will register before the wrapped manager writes anything."""
        host, pid = intents.this_process()
        intent = SaveIntent(
            model=self.model,
            run=self.run,
            before=tuple(os.path.basename(p) for p in before),
            data=tuple(d.to_json() for d in self.data),
            parent=str(self._parent) if self._parent else None,
            parent_kind=self._parent_kind if self._parent else None,
            metrics=dict(metrics or {}),
            metadata=self._metadata,
            known={os.path.basename(p): str(self._known[p]) for p in before if p in self._known},
            started_at=datetime.datetime.now(datetime.UTC).isoformat(),
            host=host,
            pid=pid,
        )
        return intents.write_intent(str(self._manager.directory), intent)

    # -- finishing an interrupted save ---------------------------------------------------------

    def recover(self) -> CheckpointRef | None:
        """Finish a save an earlier process left unfinished in this directory (it was killed
        after writing the checkpoint, before registering it): register that checkpoint with the
        data and parent recorded before the save, record the checkpoints it deleted, and run
        the save callbacks for it.  Called when the manager is made; returns the checkpoint
        registered (or queued), None when there was nothing to finish.  Never raises."""
        directory = str(self._manager.directory)
        intent = intents.read_intent(directory)
        if intent is None:
            return None
        if intents.process_alive(intent.host, intent.pid):
            log.warning(
                "a save in %s by process %s (still running) is not finished; left to it",
                directory,
                intent.pid,
            )
            return None
        try:
            return self._finish(intent)
        except Exception:
            log.exception("could not finish the interrupted save recorded in %s", directory)
            return None

    def _finish(self, intent: SaveIntent) -> CheckpointRef | None:
        kept = [os.path.basename(p) for p in self._kept()]
        name = written(intent.before, kept)
        ref: CheckpointRef | None = None
        body: dict[str, Any] | None = None
        info: CheckpointInfo | None = None
        if name is not None:
            path = self._path_of(name)
            ref = CheckpointRef(intent.model, name, intent.run)
            step = self._step(path) if self._step is not None else _checkpoint_number(path)
            body = checkpoint_body(
                model=intent.model,
                checkpoint=name,
                step=step,
                uri=checkpoint_uri(path),
                data=list(intent.data),
                parent=intent.parent,
                parent_kind=cast("ParentKind | None", intent.parent_kind),
                saved_models=self._saved_models(path, complete_only=True),
                run=intent.run,
                metrics=intent.metrics,
                metadata=intent.metadata,
            )
            info = self._registration_of(ref, body["uri"])
            if info is None and not self._pending(ref):
                info = self.queue.submit(body, raise_refused=False)
            log.warning(
                "checkpoint %s was written by a save that did not finish (the process ended "
                "before registering it); registered now with the data and parent recorded "
                "before that save",
                ref,
            )
            self._known[path] = ref
            self.recovered.append(ref)
        gone = dropped(intent.before, kept, name, lambda n: _files_exist(self._path_of(n)))
        refs = []
        for old in gone:
            known = intent.known.get(old)
            old_ref = (
                parse_checkpoint_ref(known) if known else self._registered_ref(self._path_of(old))
            )
            self._submit_deletion(old_ref)
            refs.append(old_ref)
        self.deleted.extend(refs)
        intents.clear_intent(str(self._manager.directory))
        if name is not None and body is not None:
            self._after_save(self._path_of(name), body, info, tuple(refs))
        return ref

    def _registration_of(self, ref: CheckpointRef, uri: str) -> CheckpointInfo | None:
        """``ref`` as registered at ``uri``, None when the service does not have it (or cannot
        be asked now)."""
        try:
            info = self._client.checkpoint(ref)
        except RecordkeeperError:
            return None
        return info if info.uri == uri else None

    def _pending(self, ref: CheckpointRef) -> bool:
        """Whether a registration of ``ref`` waits in the local queue."""
        wanted = (ref.model, ref.run, ref.checkpoint)
        return any(
            (b.get("model"), b.get("run"), b.get("checkpoint")) == wanted
            and b.get("reason") is None
            for b in self.queue.pending()
        )

    def _check_model(self, info: CheckpointInfo | None) -> ModelCheck | None:
        """Ask whether the exports just registered accept the data they trained on; log a
        warning naming every error (what would otherwise surface as a serving failure)."""
        if info is None or not any(s.inputs is not None for s in info.saved_models):
            return None
        try:
            result = self._client.check_model(info.ref)
        except RecordkeeperError as exc:
            log.warning("could not check the exports of %s against its data: %s", info.ref, exc)
            return None
        for check in result.checks:
            for problem in check.problems:
                if problem.severity == "error":
                    log.warning(
                        "%s: export %r will not accept %s (%s): %s",
                        info.ref,
                        check.saved_model,
                        check.version,
                        problem.problem,
                        problem.detail,
                    )
        return result

    def _record_deletions(self, before: list[str], saved: str) -> tuple[CheckpointRef, ...]:
        """Checkpoints the wrapped manager dropped during this save whose files are gone
        (``max_to_keep``; ``keep_checkpoint_every_n_hours`` keeps files it drops from the
        list), each recorded as deleted through the queue."""
        gone = dropped(before, self._kept(), saved, _files_exist)
        refs = []
        for old in gone:
            # registered or restored by this manager, else looked up (a checkpoint an earlier
            # run under another name left in this directory)
            ref = self._known.get(old) or self._registered_ref(old)
            self._submit_deletion(ref)
            refs.append(ref)
        self.deleted.extend(refs)
        return tuple(refs)

    def _submit_deletion(self, ref: CheckpointRef) -> None:
        body = {
            "model": ref.model,
            "run": ref.run,
            "checkpoint": ref.checkpoint,
            "reason": DELETED_BY_MANAGER,
            "deleted_at": datetime.datetime.now(datetime.UTC).isoformat(),
        }
        self.queue.submit(body, action=DELETE, raise_refused=False)

    def _saved_models(self, path: str, *, complete_only: bool = False) -> list[dict[str, Any]]:
        """The exports of a ``SavedModelCheckpointManager``-style manager for ``path``, each with
        what its serving signatures parse (:func:`recordkeeper.tf.model_inputs`);
        ``complete_only`` leaves out an export without its ``saved_model.pb`` (one a crash
        interrupted)."""
        modules = getattr(self._manager, "modules_to_export", None)
        if not modules:
            return []
        import tensorflow as tf

        exports = []
        for name in modules:
            export = f"{path}_{SAVED_MODULES_SUFFIX}/{name}"
            if not tf.io.gfile.isdir(export):
                continue
            if complete_only and not tf.io.gfile.exists(f"{export}/saved_model.pb"):
                log.warning("leaving out the incomplete export %s", export)
                continue
            entry: dict[str, Any] = {"name": str(name), "uri": checkpoint_uri(export)}
            try:
                entry["inputs"] = [i.to_json() for i in model_inputs(export)]
            except Exception:  # an unreadable export must not cost the checkpoint
                log.warning("could not read the serving inputs of %s", export, exc_info=True)
            exports.append(entry)
        return exports

    def _register(
        self, path: str, metrics: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], CheckpointInfo | None]:
        ref = self.ref_of(path)
        step = self._step_of(path)
        try:
            body = checkpoint_body(
                model=self.model,
                checkpoint=ref.checkpoint,
                step=step,
                uri=checkpoint_uri(path),
                data=self._segment_data(step),
                parent=self._parent,
                parent_kind=self._parent_kind,
                saved_models=self._saved_models(path),
                run=ref.run,
                metrics=metrics,
                metadata={**_run_metadata(), **self._metadata},
            )
        except InvalidCheckpoint:
            log.exception("checkpoint %s was saved but cannot be described for lineage", path)
            raise
        self._added.clear()
        self._segment_step = step
        info = self.queue.submit(body, raise_refused=False)
        if info is None:
            self.queued.append(ref.checkpoint)
            log.warning(
                "checkpoint %s saved; its registration was not accepted now (queued in %s, or "
                "set aside in %s if the service refused it)",
                path,
                self.queue.path,
                self.queue.rejected_path,
            )
        else:
            self.registered.append(info)
        self._continue_from(path, ref)
        return body, info

    def _continue_from(self, path: str, ref: CheckpointRef) -> None:
        """The next save continues from the checkpoint at ``path``."""
        self._saved_any = True
        self._parent = self._known[path] = ref
        self._parent_kind = "restored_from"

    def flush(self) -> int:
        """Send queued registrations now; returns how many are still pending."""
        return self.queue.flush().pending


def _run_metadata() -> dict[str, str]:
    """The MLflow run active in this process as checkpoint metadata (the reverse link; empty
    when the training script did not import MLflow: this never imports it)."""
    if "mlflow" not in sys.modules:
        return {}
    try:
        from recordkeeper.integrations.mlflow import active_run_metadata
    except ImportError:
        return {}
    return active_run_metadata()


def _bridges_after_save(client: Client) -> SaveCallback:
    """The save callback of the optional bridges: MLflow dataset inputs while an MLflow run
    is active (:mod:`recordkeeper.integrations.mlflow`), OpenLineage training events when
    enabled (:mod:`recordkeeper.integrations.openlineage`).  Each is imported at the first save
    that needs it, so a script that uses neither never imports them."""

    def after_save(saved: SavedCheckpoint) -> None:
        if "mlflow" in sys.modules and (saved.body.get("metadata") or {}).get("mlflow_run_id"):
            from recordkeeper.integrations.mlflow import MlflowSaveHook

            try:
                MlflowSaveHook(client)(saved)
            except Exception:
                log.exception("could not log checkpoint %s's data to MLflow", saved.ref)
        from recordkeeper.integrations import openlineage_settings

        if openlineage_settings.enabled():
            from recordkeeper.integrations.openlineage import emit_training

            try:
                emit_training(client, saved)
            except Exception:
                log.exception("could not emit OpenLineage events for checkpoint %s", saved.ref)

    return after_save


def _per_role(batch_size: int | Mapping[str, int] | None) -> dict[str, int]:
    """``batch_size`` as records per step by role (an integer is the ``train`` role's)."""
    if batch_size is None:
        return {}
    items = {"train": batch_size} if isinstance(batch_size, int) else dict(batch_size)
    for role, per in items.items():
        if isinstance(per, bool) or not isinstance(per, int) or per < 1:
            raise InvalidRequest(f"batch_size for {role!r} must be a positive integer, got {per!r}")
    return items


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
    tensorboard: bool | str = True,
    batch_size: int | None = None,
) -> Any:
    """A Keras callback that checkpoints ``model.fit`` every epoch through a tracked manager.

    On ``on_train_begin`` it builds ``tf.train.Checkpoint(model=..., optimizer=...)`` and a
    ``CheckpointManager`` in ``directory`` and (with ``restore``) restores the latest
    checkpoint there — which becomes the parent of the next one.  Each ``on_epoch_end`` saves
    ``ckpt-N`` (``N`` = the checkpoint's save counter) and registers it with ``data``.
    The tracked manager is the callback's ``manager`` attribute; ``tensorboard`` is its
    (the data summaries' directory, or False).  With ``batch_size``, each checkpoint records
    the training records its epochs read: the batches ``fit`` ran * ``batch_size`` (a last,
    partial batch counted whole), so lineage says how many epochs of each version it saw.
    """
    import keras
    import tensorflow as tf

    class CheckpointCallback(keras.callbacks.Callback):
        """Saves and registers a checkpoint at the end of every epoch."""

        def __init__(self) -> None:
            super().__init__()
            self.manager: TrackedCheckpointManager | None = None
            self.restored: str | None = None
            self.batches = 0

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
                tensorboard=tensorboard,
            )
            if restore:
                self.restored = self.manager.restore_or_initialize()

        def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
            self.batches += 1

        def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
            assert self.manager is not None
            if batch_size is not None:
                self.manager.add_records(self.batches * batch_size)
            self.batches = 0
            metrics = {k: float(v) for k, v in (logs or {}).items() if _is_number(v)}
            self.manager.save(metrics={"epoch": epoch + 1, **metrics})

    return CheckpointCallback()

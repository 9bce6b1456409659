"""What a checkpoint manager's save wrote and dropped, and the intent recorded before it.

A tracked save (``recordkeeper.tf.track``) registers a checkpoint only after the wrapped
``save()`` returns — for tensorflow/models' ``SavedModelCheckpointManager`` after its SavedModel
exports, seconds after the checkpoint files were written.  A process killed in that window
(preemption) would leave ``ckpt-N`` on disk unregistered, and the next checkpoint, restored from
it, would have no registered parent.  So before saving, the manager writes a :class:`SaveIntent`
next to the checkpoints: everything the registration needs that is known before the save (the
model, run, data, parent, metrics) and the checkpoints the manager kept before it.  A manager made
later on that directory finishes an intent it finds: :func:`written` names the checkpoint the
interrupted save wrote (registered then with the intent's data and parent) and :func:`dropped`
the ones it deleted (recorded as deleted).

Pure rules (no I/O): the list of kept checkpoints and a way to ask whether a checkpoint's files
still exist are given by the caller.  Checkpoints are named by their base name (``ckpt-7``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recordkeeper.core.errors import InvalidCheckpoint

__all__ = ["INTENT_FORMAT", "SaveIntent", "dropped", "written"]

INTENT_FORMAT = "rk-save-intent-1"


def written(before: Sequence[str], kept: Sequence[str]) -> str | None:
    """The checkpoint a save wrote: the newest of ``kept`` (oldest first, as a
    ``CheckpointManager`` lists them) that was not kept ``before`` it; None when the save wrote
    nothing the manager keeps (it was interrupted before the checkpoint state was updated)."""
    earlier = set(before)
    new = [name for name in kept if name not in earlier]
    return new[-1] if new else None


def dropped(
    before: Iterable[str], kept: Iterable[str], saved: str | None, exists: Callable[[str], bool]
) -> list[str]:
    """Checkpoints kept ``before`` a save that it dropped and whose files are gone (``max_to_keep``;
    ``keep_checkpoint_every_n_hours`` keeps the files of those it drops from the list), in the
    order they were kept."""
    still = set(kept)
    return [name for name in before if name not in still and name != saved and not exists(name)]


@dataclass(frozen=True)
class SaveIntent:
    """A save about to happen, recorded before the wrapped manager writes anything.

    ``data``, ``parent``, ``parent_kind``, ``metrics`` and ``metadata`` are the registration's
    fields as they will be sent (``data`` as wire entries); ``before`` the checkpoints the
    manager kept before the save; ``known`` the references of those the manager knew
    (name → ``model@run/ckpt-N``); ``host`` and ``pid`` the process saving (an intent of a
    process still running on this host is not finished by another).
    """

    model: str
    run: str
    before: tuple[str, ...]
    data: tuple[Mapping[str, Any], ...] = ()
    parent: str | None = None
    parent_kind: str | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    known: Mapping[str, str] = field(default_factory=dict)
    started_at: str | None = None
    host: str | None = None
    pid: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": INTENT_FORMAT,
            "model": self.model,
            "run": self.run,
            "before": list(self.before),
            "data": [dict(d) for d in self.data],
            "parent": self.parent,
            "parent_kind": self.parent_kind,
            "metrics": dict(self.metrics),
            "metadata": dict(self.metadata),
            "known": dict(self.known),
            "started_at": self.started_at,
            "host": self.host,
            "pid": self.pid,
        }

    @classmethod
    def from_json(cls, body: Any) -> SaveIntent:
        """An intent as written by :meth:`to_json`; anything else is ``InvalidCheckpoint``."""
        if not isinstance(body, Mapping) or body.get("format") != INTENT_FORMAT:
            raise InvalidCheckpoint(f"not a save intent ({INTENT_FORMAT})")
        try:
            model, run = body["model"], body["run"]
            before = tuple(body.get("before") or ())
            data = tuple(dict(d) for d in body.get("data") or ())
            known = {str(k): str(v) for k, v in dict(body.get("known") or {}).items()}
            pid = body.get("pid")
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidCheckpoint(f"a malformed save intent: {exc}") from None
        if not isinstance(model, str) or not isinstance(run, str):
            raise InvalidCheckpoint("a save intent needs a model and a run")
        if not all(isinstance(name, str) for name in before):
            raise InvalidCheckpoint("a save intent's 'before' lists checkpoint names")
        return cls(
            model=model,
            run=run,
            before=before,
            data=data,
            parent=body.get("parent"),
            parent_kind=body.get("parent_kind"),
            metrics=dict(body.get("metrics") or {}),
            metadata=dict(body.get("metadata") or {}),
            known=known,
            started_at=body.get("started_at"),
            host=body.get("host"),
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        )

"""What one save of a tracked checkpoint manager did: the value its save callbacks receive."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from recordkeeper.checkpoint_lineage import CheckpointInfo, ModelCheck
from recordkeeper.core.lineage import CheckpointRef

__all__ = ["SaveCallback", "SavedCheckpoint"]


@dataclass(frozen=True)
class SavedCheckpoint:
    """What one ``save()`` did, as passed to the save callbacks.

    ``path`` is what the wrapped manager returned; ``ref`` the checkpoint (``model@run/ckpt-N``);
    ``body`` the registration as sent (or queued); ``info`` the service's answer, None when the
    registration was queued or set aside; ``deleted`` the checkpoints the manager's
    ``max_to_keep`` removed during this save; ``model_check`` whether its SavedModel exports
    accept the data it trained on (None without exports, or when it could not be asked).
    """

    path: str
    ref: CheckpointRef
    body: Mapping[str, Any]
    info: CheckpointInfo | None
    deleted: tuple[CheckpointRef, ...]
    model_check: ModelCheck | None = None


SaveCallback = Callable[[SavedCheckpoint], None]

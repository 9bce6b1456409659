"""``SavedModelCheckpointManager``: tensorflow/models' manager of checkpoints with SavedModel
exports (``official.core.savedmodel_checkpoint_manager``), for when that package cannot be
installed.

``tf-models-official`` pins its own TensorFlow (installing it replaces ``tensorflow-cpu``), and
``tf-models-no-deps`` still imports ``tf_keras``, which pulls in the full ``tensorflow`` wheel.
This class has the surface recordkeeper's tracked manager (:func:`recordkeeper.tf.track`) and the
guide rely on, with the same behaviour:

* ``save()`` returns the checkpoint prefix (or None when nothing was written), then exports each
  module of ``modules_to_export`` with ``tf.saved_model.save`` to
  ``<prefix>_saved_modules/<name>`` (signatures from the module's ``saved_model_signatures``);
* export directories of checkpoints the manager no longer keeps are deleted;
* ``modules_to_export``, ``savedmodels`` (oldest first) and ``latest_savedmodel`` properties.

Use tensorflow/models' own class where it installs; ``rk.tf.track`` wraps either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tensorflow as tf

__all__ = ["SAVED_MODULES_PATH_SUFFIX", "SavedModelCheckpointManager", "saved_modules_directory"]

SAVED_MODULES_PATH_SUFFIX = "saved_modules"


def saved_modules_directory(checkpoint_prefix: str) -> str:
    """Where the SavedModels of checkpoint ``checkpoint_prefix`` are exported."""
    return f"{checkpoint_prefix}_{SAVED_MODULES_PATH_SUFFIX}"


class SavedModelCheckpointManager(tf.train.CheckpointManager):
    """A ``tf.train.CheckpointManager`` that also exports SavedModels next to each checkpoint."""

    def __init__(
        self,
        checkpoint: tf.train.Checkpoint,
        directory: str,
        max_to_keep: int,
        modules_to_export: Mapping[str, tf.Module] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            checkpoint=checkpoint, directory=directory, max_to_keep=max_to_keep, **kwargs
        )
        self._modules_to_export = dict(modules_to_export or {})
        self._savedmodels = self.get_existing_savedmodels()

    def save(
        self,
        checkpoint_number: int | None = None,
        check_interval: bool = True,
        options: tf.train.CheckpointOptions | None = None,
    ) -> str | None:
        prefix = super().save(
            checkpoint_number=checkpoint_number, check_interval=check_interval, options=options
        )
        if not prefix:
            return None
        if not self._modules_to_export:
            return str(prefix)
        export_root = saved_modules_directory(prefix)
        for name, module in self._modules_to_export.items():
            tf.saved_model.save(
                module,
                f"{export_root}/{name}",
                signatures=getattr(module, "saved_model_signatures", None),
            )
        kept = [saved_modules_directory(c) for c in self.checkpoints]
        existing = self.get_existing_savedmodels()
        self._savedmodels = [d for d in kept if d in existing]
        for directory in existing:
            if directory not in self._savedmodels:
                tf.io.gfile.rmtree(directory)
        return str(prefix)

    def get_existing_savedmodels(self) -> list[str]:
        return list(tf.io.gfile.glob(saved_modules_directory(self._checkpoint_prefix + "-*")))

    @property
    def modules_to_export(self) -> Mapping[str, tf.Module]:
        return self._modules_to_export

    @property
    def savedmodels(self) -> list[str]:
        return self._savedmodels

    @property
    def latest_savedmodel(self) -> str | None:
        return self._savedmodels[-1] if self._savedmodels else None

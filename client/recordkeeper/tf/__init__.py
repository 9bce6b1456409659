"""TensorFlow integrations of recordkeeper (``import recordkeeper.tf``).

TensorFlow is imported lazily, inside the functions that need it, so importing this package
stays cheap.

* :func:`tf_dataset` — a ``tf.data.Dataset`` of a version's serialized records
  (``file://``, ``gs://`` and ``s3://``), also available as ``DatasetVersion.tf_dataset``.
* ``track`` — checkpoint lineage (``recordkeeper.tf.checkpoints``), when installed.
* :func:`model_inputs` — what a SavedModel's serving signatures parse
  (``recordkeeper.tf.signatures``), for ``check_model``.
* :func:`model_lineage` — what trained a SavedModel export, read from the export itself
  (offline); :func:`load_saved_model` — a registered export loaded by checkpoint reference
  (``recordkeeper.tf.exports``).
* ``DataSummaries`` — the TensorBoard summaries a tracked manager writes at each save
  (``recordkeeper.tf.summaries``).
"""

from __future__ import annotations

import importlib
from typing import Any

from recordkeeper.tf.data import tf_dataset, typed_errors

__all__ = ["tf_dataset", "typed_errors"]

# Names provided by sibling modules that may be added later (e.g. checkpoints.track).
_LAZY = {
    "track": "recordkeeper.tf.checkpoints",
    "make_checkpoint_callback": "recordkeeper.tf.checkpoints",
    "TrackedCheckpointManager": "recordkeeper.tf.checkpoints",
    "SavedCheckpoint": "recordkeeper.tf.checkpoints",
    "model_inputs": "recordkeeper.tf.signatures",
    "model_lineage": "recordkeeper.tf.exports",
    "load_saved_model": "recordkeeper.tf.exports",
    "ModelLineage": "recordkeeper.tf.exports",
    "DataSummaries": "recordkeeper.tf.summaries",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'recordkeeper.tf' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

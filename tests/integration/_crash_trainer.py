"""A training job killed with SIGKILL inside a tracked save (run as ``python -m``).

``python -m tests.integration._crash_trainer URL DIRECTORY QUEUE VERSION SAVES WHERE``: tracks a
``SavedModelCheckpointManager`` (``max_to_keep=2``, one serving export) in ``DIRECTORY`` with
``VERSION`` as training data and saves ``SAVES`` times; the last save kills the process:

* ``export``   — while exporting the SavedModel: the checkpoint files and the manager's state
  are written and ``max_to_keep`` has deleted the oldest checkpoint (the window in which a
  preemption hits a real ``SavedModelCheckpointManager``, seconds long);
* ``register`` — after the wrapped ``save()`` returned, as its registration is about to be sent;
* ``delete``   — after the registration, as the first deletion it made is about to be recorded.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import tensorflow as tf

import recordkeeper as rk
from tests.integration._savedmodel_manager import SavedModelCheckpointManager


def serving_module() -> Any:
    class Serving(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable(1.0)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def serve(self, x: Any) -> Any:
            return {"y": x * self.w}

    module = Serving()
    module.saved_model_signatures = {"serving_default": module.serve}
    return module


def tracked(url: str, directory: str, queue: str, data: str) -> Any:
    module = serving_module()
    manager = SavedModelCheckpointManager(
        tf.train.Checkpoint(module=module),
        directory,
        max_to_keep=2,
        modules_to_export={"serving": module},
    )
    return rk.tf.track(
        manager, client=rk.Client(url), model="crashy", data={"train": data}, queue=queue
    )


def die(*_args: Any, **_kwargs: Any) -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main(url: str, directory: str, queue: str, data: str, saves: str, where: str) -> None:
    manager = tracked(url, directory, queue, data)
    manager.restore_or_initialize()
    for _ in range(int(saves) - 1):
        manager.save()
    if where == "export":
        tf.saved_model.save = die
    elif where == "register":
        rk.Client.register_checkpoint = die  # type: ignore[method-assign]
    elif where == "delete":
        rk.Client.mark_checkpoint_deleted = die  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown place to die: {where}")
    manager.save()
    raise SystemExit("the save returned: the process was not killed")


if __name__ == "__main__":
    main(*sys.argv[1:])

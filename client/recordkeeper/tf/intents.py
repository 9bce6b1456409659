"""The save intent of a checkpoint directory: ``<directory>/.recordkeeper-save-intent.json``.

Written (whole, then renamed into place) before a tracked save and removed once its
registration and deletions are sent or queued; a tracked manager made on the directory finishes
one it finds (:mod:`recordkeeper.core.save_intents`).  It lives next to the checkpoints — the
storage a resumed job finds again, wherever it runs — and goes through ``tf.io.gfile``, the
filesystem the checkpoints themselves are written with (local paths, ``gs://``, ...).
Reading and writing never raise: a save does not fail because of its lineage record.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid

from recordkeeper.core.errors import InvalidCheckpoint
from recordkeeper.core.save_intents import SaveIntent

__all__ = [
    "clear_intent",
    "intent_path",
    "process_alive",
    "read_intent",
    "this_process",
    "write_intent",
]

log = logging.getLogger(__name__)

INTENT_NAME = ".recordkeeper-save-intent.json"


def intent_path(directory: str) -> str:
    """``<directory>/.recordkeeper-save-intent.json``."""
    return f"{str(directory).rstrip('/')}/{INTENT_NAME}"


def write_intent(directory: str, intent: SaveIntent) -> bool:
    """Write ``intent`` for ``directory``; False (logged) when it could not be written."""
    import tensorflow as tf

    target = intent_path(directory)
    tmp = f"{target}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        text = json.dumps(intent.to_json(), sort_keys=True)
    except (TypeError, ValueError):
        log.warning("the save intent for %s is not JSON (metrics?); not recorded", directory)
        return False
    try:
        tf.io.gfile.makedirs(os.path.dirname(target))
        with tf.io.gfile.GFile(tmp, "w") as out:
            out.write(text)
        tf.io.gfile.rename(tmp, target, overwrite=True)
    except Exception:
        log.warning(
            "could not write the save intent %s: a crash during this save would leave its "
            "checkpoint unregistered",
            target,
            exc_info=True,
        )
        return False
    return True


def read_intent(directory: str) -> SaveIntent | None:
    """The intent left in ``directory``, None when there is none (or it cannot be read)."""
    import tensorflow as tf

    target = intent_path(directory)
    try:
        if not tf.io.gfile.exists(target):
            return None
        with tf.io.gfile.GFile(target, "r") as source:
            return SaveIntent.from_json(json.loads(source.read()))
    except (InvalidCheckpoint, ValueError) as exc:
        log.warning("ignoring the unreadable save intent %s: %s", target, exc)
        return None
    except Exception:
        log.warning("could not read the save intent %s", target, exc_info=True)
        return None


def clear_intent(directory: str) -> None:
    """Remove the intent of ``directory`` (nothing when there is none)."""
    import tensorflow as tf

    target = intent_path(directory)
    try:
        if tf.io.gfile.exists(target):
            tf.io.gfile.remove(target)
    except Exception:
        log.warning("could not remove the save intent %s", target, exc_info=True)


def this_process() -> tuple[str, int]:
    """(host name, pid) of this process, as an intent records them."""
    return socket.gethostname(), os.getpid()


def process_alive(host: str | None, pid: int | None) -> bool:
    """Whether the process that wrote an intent is another one still running on this host
    (False when it ran elsewhere: a host cannot see another's processes)."""
    here, me = this_process()
    if host != here or pid is None or pid == me:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

"""Keeping Python's cyclic garbage collector off the objects a long operation did not make.

Publishing thousands of small shards allocates a few hundred thousand container objects; some
live until the registration is sent, so they reach the oldest generation and set off a full
collection, which walks *every* tracked object of the process: the client's modules, and in a
training script TensorFlow's or PyTorch's, ~250,000 objects when the service runs in the same
process (the bench).  That was ~20 % of a small-shard publish's CPU (docs/performance.md).

:func:`older_objects_frozen` moves the objects that exist when the operation starts into the
collector's permanent generation (``gc.freeze()``, a constant-time list splice) and back into
the oldest generation when the last such operation ends (``gc.unfreeze()``).  Collections
during the operation only look at what it made.  Nothing is freed later than it would be
otherwise, except that cyclic garbage among the older objects waits until the end of the
operation for its collection.  A process that froze objects itself (a forking server, the
service's workers: ``gc.get_freeze_count() > 0``) is left alone, and so is one whose collector
is disabled.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["older_objects_frozen"]

_lock = threading.Lock()
_active = 0  # operations inside older_objects_frozen that froze (or joined a freeze)


@contextlib.contextmanager
def older_objects_frozen() -> Iterator[None]:
    """Within the block, the collector ignores the objects that existed when the first of the
    concurrent blocks started (see the module docstring)."""
    global _active
    with _lock:
        joined = _active > 0 or (gc.isenabled() and gc.get_freeze_count() == 0)
        if joined:
            if not _active:
                gc.freeze()
            _active += 1
    if not joined:
        yield
        return
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if not _active:
                gc.unfreeze()

"""Keeping Python's cyclic garbage collector off the objects a long operation did not make.

Publishing thousands of small shards allocates a few hundred thousand container objects; some
live until the registration is sent, so they reach the oldest generation and set off a full
collection, which walks *every* tracked object of the process: the client's modules, and in a
training script TensorFlow's or PyTorch's, ~250,000 objects when the service runs in the same
process (the bench).  That was ~20 % of a small-shard publish's CPU (docs/performance.md).

:func:`older_objects_frozen` moves the objects that exist when the operation starts into the
collector's permanent generation (``gc.freeze()``, a constant-time list splice) and back into
the oldest generation when the last such operation ends (``gc.unfreeze()``).  Collections
during the operation only look at what it made, and the youngest generation is collected after
:data:`YOUNG_THRESHOLD` allocations instead of 700 (the threshold before is put back at the
end, unless something changed it meanwhile).  Only cyclic garbage is freed later than it
would be otherwise: among the older objects at the end of the operation, among its own after
20,000 allocations instead of 700 (objects that reference counting frees are freed at once as
always).  A process that froze objects itself (a forking server, the
service's workers: ``gc.get_freeze_count() > 0``) is left alone, and so is one whose collector
is disabled.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["YOUNG_THRESHOLD", "older_objects_frozen"]

_lock = threading.Lock()
_active = 0  # operations inside older_objects_frozen that froze (or joined a freeze)
_restore: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # (threshold set, the one before)

#: the youngest generation's threshold during such an operation (CPython's default: 700), as
#: in the service's workers: what a publish allocates is freed by reference counting or lives
#: until it ends, so collecting every 700 allocations only re-walks it (~110 young
#: collections a publish of 2,000 shards); cycles are still found, 20,000 allocations later
YOUNG_THRESHOLD = 20_000


@contextlib.contextmanager
def older_objects_frozen() -> Iterator[None]:
    """Within the block, the collector ignores the objects that existed when the first of the
    concurrent blocks started (see the module docstring)."""
    global _active
    global _restore
    with _lock:
        joined = _active > 0 or (gc.isenabled() and gc.get_freeze_count() == 0)
        if joined:
            if not _active:
                gc.freeze()
                before = gc.get_threshold()
                if before[0] and before[0] < YOUNG_THRESHOLD:
                    raised = (YOUNG_THRESHOLD, *before[1:])
                    gc.set_threshold(*raised)
                    _restore = (raised, before)
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
                if _restore is not None:
                    ours, earlier = _restore
                    _restore = None
                    if gc.get_threshold() == ours:  # unless changed meanwhile
                        gc.set_threshold(*earlier)

"""Running per-shard work in parallel: threads, or processes for big CPU-bound jobs.

Re-reading a shard (deep verification, publishing) is CPU-bound work per record.  With the C
fast paths (``recordkeeper._speedups``) it runs without the GIL, so threads use every core and
no process is started.  Without them it is Python work per record, threads share the GIL and do
not scale past one core: large jobs (at least 256 MiB over more than one shard, on a machine
with more than one core) then run in a process pool (``spawn`` start method: safe with the
event-loop threads fsspec backends keep), started on first use and kept for later jobs.
``RECORDKEEPER_PROCESSES=0`` forces threads, ``=1`` forces processes.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from recordkeeper import _native

__all__ = ["PROCESS_THRESHOLD", "parallel_map", "use_processes"]

PROCESS_THRESHOLD = 256 * 2**20
T = TypeVar("T")
R = TypeVar("R")


def use_processes(total_bytes: int, items: int) -> bool:
    """Whether a job of ``items`` shards and ``total_bytes`` should run in processes."""
    forced = os.environ.get("RECORDKEEPER_PROCESSES")
    if forced in ("0", "1"):
        return forced == "1" and items > 1
    if _native.speedups is not None:  # the C scan and hashlib release the GIL: threads scale
        return False
    return items > 1 and (os.cpu_count() or 1) > 1 and total_bytes >= PROCESS_THRESHOLD


def parallel_map(
    fn: Callable[..., R],
    items: Sequence[Any],
    *,
    workers: int,
    processes: bool,
    on_result: Callable[[int, R], None] | None = None,
) -> list[R]:
    """``[fn(*item) for item in items]`` in parallel, results in order.

    With ``processes`` ``fn`` and the items must be picklable (module-level function, plain
    values).  ``on_result(index, result)`` runs in the calling thread as each result arrives.
    """
    executor: Executor
    if processes:
        executor = _process_pool(min(workers, os.cpu_count() or 1))
    else:
        executor = ThreadPoolExecutor(max_workers=workers)
    results: list[Any] = [None] * len(items)
    with contextlib.ExitStack() as stack:
        if not processes:
            stack.enter_context(executor)
        # A thread that is free when an item failed must not start the next one: the caller
        # gets the error when every started item is done, not after all of them.
        run = fn if processes else _stop_after_failure(fn)
        futures = {executor.submit(run, *item): i for i, item in enumerate(items)}
        try:
            from concurrent.futures import as_completed

            for future in as_completed(futures):
                index = futures[future]
                if isinstance(future.exception(), _Skipped):
                    continue
                results[index] = future.result()
                if on_result is not None:
                    on_result(index, results[index])
        except BrokenProcessPool:
            _forget_pool()
            raise
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return results


class _Skipped(Exception):
    """An item not started because another one failed."""


def _stop_after_failure(fn: Callable[..., R]) -> Callable[..., R]:
    failed = threading.Event()

    def run(*item: Any) -> R:
        if failed.is_set():
            raise _Skipped
        try:
            return fn(*item)
        except BaseException:
            failed.set()
            raise

    return run


_pool: ProcessPoolExecutor | None = None
_pool_workers = 0
_pool_lock = threading.Lock()


def _process_pool(workers: int) -> ProcessPoolExecutor:
    """One process pool kept for the life of the program (spawning costs ~0.3 s a worker)."""
    global _pool, _pool_workers
    with _pool_lock:
        if _pool is None or _pool_workers != workers:
            if _pool is not None:
                _pool.shutdown(wait=False, cancel_futures=True)
            _pool = ProcessPoolExecutor(
                max_workers=workers, mp_context=multiprocessing.get_context("spawn")
            )
            _pool_workers = workers
        return _pool


def _forget_pool() -> None:
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None


atexit.register(_forget_pool)

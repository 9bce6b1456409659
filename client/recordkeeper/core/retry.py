"""When a storage request is tried again: the reasons worth a retry and the backoff schedule.

Every request to object storage goes through one policy (``recordkeeper.storage`` applies it
inside s3fs, whose own loop it replaces; gcsfs keeps its own, with the same shape).  A failure
is retried when its reason says the store, or the way to it, may answer next time:

* ``throttled`` — the store asked to slow down (``503 SlowDown``, any ``503``, ``429``);
* ``transport`` — the answer was damaged or cut on the way (a reset, a body shorter than its
  ``Content-Length``, a closed connection, a gateway's ``502``/``504``, a read timeout).

Never retried: ``missing``, ``denied``, ``unreachable`` (nothing answers: retrying only delays
the message) and ``error``.  Backoff is exponential with full jitter, capped per wait and
bounded in total: a store that keeps failing gives its error within :attr:`RetryPolicy.budget`
seconds of the first attempt.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RETRYABLE_REASONS", "STORAGE_RETRY", "RetryPolicy"]

#: the :class:`~recordkeeper.errors.StorageError` reasons a retry may cure
RETRYABLE_REASONS = frozenset({"throttled", "transport"})


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded in attempts and in time.

    The wait before retry ``n`` (0 for the first retry) is ``random * min(cap, base * 2**n)``
    with ``random`` uniform in [0, 1); no retry starts after ``budget`` seconds.
    """

    base: float = 0.1
    cap: float = 2.0
    budget: float = 10.0
    max_attempts: int = 20

    def wait(self, retry: int, elapsed: float, random: float) -> float | None:
        """Seconds to wait before retry number ``retry`` (``elapsed`` seconds after the first
        attempt started), or None when the policy gives up."""
        if retry + 1 >= self.max_attempts:
            return None
        delay = random * min(self.cap, self.base * 2.0 ** min(retry, 30))
        if elapsed + delay > self.budget:
            return None
        return delay

    def retries(self, reason: str) -> bool:
        """True when a failure for ``reason`` is worth another attempt."""
        return reason in RETRYABLE_REASONS


#: the policy of every storage request
STORAGE_RETRY = RetryPolicy()

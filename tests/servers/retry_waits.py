"""Shorter waits between a storage client's retries, for tests that make a store fail on purpose.

Both storage clients wait between attempts: recordkeeper's policy for every S3 request
(:data:`recordkeeper.core.retry.STORAGE_RETRY`: 0.1 s doubling up to 2 s, at most 10 s per
request) and gcsfs's own loop (6 tries, 1 s to 16 s apart, a decorator argument fixed in gcsfs).
A test whose store stays down spends those seconds asleep: ~10 s per S3 request, ~35 s per GCS
request.  :func:`scale_retry_waits` makes every wait ``factor`` times as long and nothing else:
the same failures are retried, gcsfs makes the same six attempts, the S3 policy the same
exponential, jittered schedule within a budget scaled alike, and the same error ends the loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

__all__ = ["ScaledAsyncio", "scale_gcsfs_waits", "scale_retry_waits", "scale_s3_waits"]


class ScaledAsyncio:
    """The ``asyncio`` module as gcsfs's retry loop sees it: :meth:`sleep` scaled, and each
    wait it asked for kept in ``asked``."""

    def __init__(self, factor: float) -> None:
        self.factor = factor
        self.asked: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def sleep(self, delay: float, result: Any = None) -> Any:
        self.asked.append(delay)
        return await asyncio.sleep(delay * self.factor, result)


def scale_s3_waits(monkeypatch: pytest.MonkeyPatch, factor: float) -> None:
    """The storage retry policy with its waits and budget ``factor`` times as long."""
    from recordkeeper import storage

    policy = storage.STORAGE_RETRY
    scaled = dataclasses.replace(
        policy,
        base=policy.base * factor,
        cap=policy.cap * factor,
        budget=policy.budget * factor,
    )
    monkeypatch.setattr(storage, "STORAGE_RETRY", scaled)


def scale_gcsfs_waits(monkeypatch: pytest.MonkeyPatch, factor: float) -> ScaledAsyncio:
    """gcsfs's waits between its (still six) attempts ``factor`` times as long."""
    import gcsfs.retry

    scaled = ScaledAsyncio(factor)
    monkeypatch.setattr(gcsfs.retry, "asyncio", scaled)
    return scaled


def scale_retry_waits(monkeypatch: pytest.MonkeyPatch, factor: float = 0.1) -> None:
    """Both: every wait between two attempts on S3 or GCS ``factor`` times as long."""
    scale_s3_waits(monkeypatch, factor)
    scale_gcsfs_waits(monkeypatch, factor)

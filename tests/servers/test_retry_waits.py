"""The shortened retry waits change the waits only: the same attempts, the same final error."""

from __future__ import annotations

import asyncio

import pytest

from tests.servers.retry_waits import scale_gcsfs_waits, scale_s3_waits


def test_gcsfs_still_makes_six_attempts_with_its_own_schedule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    retry = pytest.importorskip("gcsfs.retry")
    scaled = scale_gcsfs_waits(monkeypatch, 0.01)
    attempts = 0

    async def unavailable() -> None:
        nonlocal attempts
        attempts += 1
        raise retry.HttpError({"code": 503, "message": "Backend Error"})

    with pytest.raises(retry.HttpError):
        asyncio.run(retry.retry_request(retries=6)(unavailable)())
    assert attempts == 6
    # gcsfs asked for its own waits (1 s, 2 s ... 16 s, each plus up to 1 s of jitter)
    assert len(scaled.asked) == 5
    for n, asked in enumerate(scaled.asked):
        assert 2**n <= asked < 2**n + 1


def test_the_s3_policy_keeps_its_shape() -> None:
    from recordkeeper import storage
    from recordkeeper.core.retry import STORAGE_RETRY

    with pytest.MonkeyPatch.context() as monkeypatch:
        scale_s3_waits(monkeypatch, 0.1)
        scaled = storage.STORAGE_RETRY
        assert (scaled.base, scaled.cap, scaled.budget) == pytest.approx(
            (STORAGE_RETRY.base / 10, STORAGE_RETRY.cap / 10, STORAGE_RETRY.budget / 10)
        )
        assert scaled.max_attempts == STORAGE_RETRY.max_attempts
        for reason in ("throttled", "transport", "missing", "denied", "unreachable", "error"):
            assert scaled.retries(reason) == STORAGE_RETRY.retries(reason)
    assert storage.STORAGE_RETRY is STORAGE_RETRY

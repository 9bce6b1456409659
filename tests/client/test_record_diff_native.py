"""The record diff counted in C (``_speedups.record_diff_runs``) agrees with the pure-Python
reference of ``recordkeeper.core.record_diff.diff_records`` (property tests, issue 25 item 3)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recordkeeper import _native
from recordkeeper.core.record_diff import diff_records

W = 16
SPLITS = ["test", "train", "validation"]

if _native.speedups is None or not hasattr(_native.speedups, "record_diff_runs"):
    if os.environ.get("CI") == "true":
        raise RuntimeError("recordkeeper._speedups is not built")
    pytest.skip("recordkeeper._speedups is not built here", allow_module_level=True)

NATIVE = _native.speedups.record_diff_runs

# Few distinct identities (so copies, moves and overlaps are common), some sharing prefixes.
identity = st.sampled_from([bytes([i // 3]) * 8 + bytes([i]) * 8 for i in range(24)])
shard = st.tuples(st.sampled_from(SPLITS), st.lists(identity, max_size=30))
version = st.lists(shard, max_size=6)


def chunks(ids: list[bytes], chunk: int) -> Iterator[bytes]:
    body = b"".join(sorted(ids))
    step = chunk * W
    for i in range(0, len(body), step):
        yield body[i : i + step]


def streams(v: list[tuple[str, list[bytes]]], chunk: int) -> list[tuple[str, Iterator[bytes]]]:
    return [(split, chunks(ids, chunk)) for split, ids in v]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=version, b=version, chunk=st.integers(1, 7), sample=st.integers(0, 4))
def test_native_and_python_agree(
    a: list[tuple[str, list[bytes]]], b: list[tuple[str, list[bytes]]], chunk: int, sample: int
) -> None:
    python = diff_records(streams(a, chunk), streams(b, chunk), W, sample=sample)
    native = diff_records(streams(a, chunk), streams(b, chunk), W, sample=sample, native=NATIVE)
    assert native.to_dict() == python.to_dict()


def test_bad_runs_are_refused() -> None:
    with pytest.raises(ValueError, match="whole identities"):
        NATIVE([(0, b"x" * 17, 0)], 1, W, 1, None)
    with pytest.raises(ValueError, match="tag out of range"):
        NATIVE([(2, b"x" * 16, 0)], 1, W, 1, None)
    with pytest.raises(ValueError, match="start out of range"):
        NATIVE([(0, b"x" * 16, 2)], 1, W, 1, None)
    with pytest.raises(ValueError, match="bound is one identity"):
        NATIVE([(0, b"x" * 16, 0)], 1, W, 1, b"short")
    with pytest.raises(TypeError):
        NATIVE([(0, b"x" * 16)], 1, W, 1, None)


def test_a_bound_cuts_every_run() -> None:
    a, b, c = (bytes([i]) * W for i in (1, 2, 3))
    stats, _, new, gone, *_, ends = NATIVE([(0, a + b + c, 0), (1, b + c, 0)], 1, W, 5, c)
    assert ends == [2, 1]  # both stop before the bound
    assert stats[0][:5] == [2, 1, 0, 1, 1] and (new, gone) == (0, 1)

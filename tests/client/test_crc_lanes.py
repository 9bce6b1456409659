"""The C extension's CRC32C against the ``crc32c`` package: every implementation this CPU runs
(software tables; SSE4.2 on one chain; three lanes joined by tables for runs of 384 bytes and
more; three lanes of any length joined by PCLMULQDQ), at every length up to 5000 bytes, around
the lane and block sizes, from unaligned starts and with a running value; and record CRCs
checked through ``deframe`` for records of those lengths."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c

from recordkeeper import _native
from recordkeeper.tfrecord import masked_crc32c
from tests.client._records import frame

# lane sizes in _speedups.c: 3 x 128 and 3 x 2048 bytes (tables); 64 bytes and more in three
# lanes, blocks of 3 x 4096 bytes (PCLMULQDQ)
EDGES = [
    0,
    1,
    7,
    8,
    9,
    95,
    96,
    97,
    383,
    384,
    385,
    767,
    768,
    6143,
    6144,
    6145,
    6144 + 384,
    12_288,
    2 * 12_288 + 64,
    20_000,
    1 << 20,
]


@pytest.fixture
def speedups() -> Any:
    if _native.speedups is None:
        pytest.skip("recordkeeper._speedups is not built")
    return _native.speedups


SOFTWARE, HW, TABLE_LANES, CLMUL_LANES = 1, 2, 3, 4  # crc32c(impl=...) in _speedups.c


def implementations(speedups: Any) -> list[int]:
    """The implementations this CPU runs (asking for another is a clear error)."""
    found = []
    for impl in (SOFTWARE, HW, TABLE_LANES, CLMUL_LANES):
        try:
            speedups.crc32c(b"", 0, impl)
        except ValueError as exc:
            assert "not available here" in str(exc)
        else:
            found.append(impl)
    return found


def test_the_fastest_implementation_is_on_where_the_cpu_has_it(speedups: Any) -> None:
    cpuinfo = Path("/proc/cpuinfo")
    flags = set(cpuinfo.read_text().split()) if cpuinfo.exists() else set()
    if not {"sse4_2", "pclmulqdq"} <= flags:
        pytest.skip("no SSE4.2 and PCLMULQDQ here (or no /proc/cpuinfo to tell)")
    assert speedups.hardware_crc and speedups.clmul_crc
    assert CLMUL_LANES in implementations(speedups)
    with pytest.raises(ValueError, match="implementation 9 is not available"):
        speedups.crc32c(b"", 0, 9)


def test_every_implementation_at_every_length(speedups: Any) -> None:
    rng = random.Random(6)
    impls = implementations(speedups)
    for n in range(5001):
        skip = rng.randrange(8)
        data = rng.randbytes(n + skip)
        view = memoryview(data)[skip:]  # any alignment
        start = rng.getrandbits(32)
        want = crc32c(bytes(view), start)
        for impl in impls:
            assert speedups.crc32c(view, start, impl) == want, (n, impl)


def test_crc32c_matches_the_reference_at_every_lane_edge(speedups: Any) -> None:
    rng = random.Random(7)
    lengths = sorted({*EDGES, *(e + d for e in EDGES for d in (-1, 1) if e + d >= 0)})
    lengths += [rng.randrange(0, 30_000) for _ in range(300)]
    for n in lengths:
        data = rng.randbytes(n + 5)
        view = memoryview(data)[5:]  # unaligned start
        start = rng.getrandbits(32)
        assert speedups.crc32c(view) == crc32c(bytes(view)), n
        assert speedups.crc32c(view, start) == crc32c(bytes(view), start), n
        for impl in implementations(speedups):
            assert speedups.crc32c(view, start, impl) == crc32c(bytes(view), start), (n, impl)


def test_deframe_checks_records_of_every_length(speedups: Any) -> None:
    rng = random.Random(8)
    records = [
        rng.randbytes(n) for n in (*EDGES[:-1], *(rng.randrange(300, 2000) for _ in range(50)))
    ]
    frames = []
    for record in records:
        length = len(record).to_bytes(8, "little")
        frames += [
            length,
            masked_crc32c(length).to_bytes(4, "little"),
            record,
            masked_crc32c(record).to_bytes(4, "little"),
        ]
    buf = b"".join(frames)
    found, pos, count, error = speedups.deframe(buf, 0, True, True)
    assert (found, pos, count, error) == (records, len(buf), len(records), None)
    # one flipped bit in the 6145-byte record's data is found, at that frame
    at = sum(16 + len(r) for r in records[: EDGES.index(6145)])
    bad = bytearray(buf)
    bad[at + 12 + 5000] ^= 0x10
    _, pos, count, error = speedups.deframe(bytes(bad), 0, True, False)
    assert (pos, count, error[0], error[1]) == (at, EDGES.index(6145), 2, at)


def test_deframe_checks_records_of_every_length_up_to_3000(speedups: Any) -> None:
    rng = random.Random(10)
    records = [rng.randbytes(n) for n in range(3001)]
    buf = frame(records)
    assert speedups.deframe(buf, 0, True, True) == (records, len(buf), len(records), None)
    bad = bytearray(buf)
    at = sum(16 + len(r) for r in records[:2345])
    bad[at + 12 + 2000] ^= 0x01
    _, pos, count, error = speedups.deframe(bytes(bad), 0, True, False)
    assert (pos, count, error[:2]) == (at, 2345, (2, at))
    assert error[3] == masked_crc32c(bytes(bad[at + 12 : at + 12 + 2345]))


def test_frame_matches_the_python_framing(speedups: Any) -> None:
    rng = random.Random(9)
    records = [rng.randbytes(n) for n in (0, 1, 383, 384, 1000, 6145, 70_000)]
    assert speedups.frame(records) == frame(records)
    assert speedups.frame([]) == b""
    with pytest.raises(TypeError, match="record 1 is str"):
        speedups.frame([b"a", "b"])

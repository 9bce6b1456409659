"""A lying frame header on a source whose size the reader cannot learn (issue 21, item 6).

Before, such a frame had the rest of the stream gathered in memory (549 MiB peak for a
256 MiB file behind an object with only ``read``).  Now the size is found when the object can
tell (``seek``/``tell``), and otherwise a frame claiming more than can be held is CRC-checked as
it streams by (checking only) or refused (records wanted): memory stays bounded.

Each case runs in a subprocess that measures its own peak with ``tracemalloc`` (a memory bound,
no timing), over a real file of 96 MiB.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recordkeeper.tfrecord import masked_crc32c

from .test_tfrecord import framed

STREAM_MIB = 96

CHILD = r"""
import io, json, sys, tracemalloc
from recordkeeper.core.errors import CorruptShard
from recordkeeper.tfrecord import iter_records, scan_shard, source_size

path, kind, mode = sys.argv[1], sys.argv[2], sys.argv[3]


class ReadOnly:
    "A plain source: read() only, no size to be learnt."

    def __init__(self, fh):
        self.fh = fh

    def read(self, n=-1):
        return self.fh.read(n)


class Seekable(ReadOnly):
    "read/seek/tell/seekable, no file descriptor."

    def seek(self, *args):
        return self.fh.seek(*args)

    def tell(self):
        return self.fh.tell()

    def seekable(self):
        return True


with open(path, "rb") as fh:
    source = ReadOnly(fh) if kind == "readonly" else Seekable(fh)
    size = source_size(source)
    tracemalloc.start()
    outcome = "ok"
    try:
        if mode == "iter":
            for _ in iter_records(source):
                pass
        else:
            scan_shard(source, infer_schema=mode == "infer")
    except CorruptShard as exc:
        outcome = type(exc).__name__
    _, peak = tracemalloc.get_traced_memory()
    print(json.dumps({"outcome": outcome, "peak": peak, "size": size}))
"""


@pytest.fixture(scope="module")
def lying_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two good records, then a frame claiming 1 TiB, then 96 MiB of bytes."""
    path = tmp_path_factory.mktemp("unsized") / "lying.tfrecord"
    length = (1 << 40).to_bytes(8, "little")
    with path.open("wb") as fh:
        fh.write(framed([b"one", b"two"]))
        fh.write(length + masked_crc32c(length).to_bytes(4, "little"))
        block = os.urandom(1 << 20)
        for _ in range(STREAM_MIB):
            fh.write(block)
    return path


def _run(path: Path, kind: str, mode: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), kind, mode],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["verify", "infer", "iter"])
def test_a_source_without_a_size_never_buffers_a_lying_frame(lying_file: Path, mode: str) -> None:
    got = _run(lying_file, "readonly", mode)
    assert got["size"] is None
    # checking only: streamed and found truncated; records wanted: refused at its header
    assert got["outcome"] == "CorruptShard"
    assert got["peak"] < 40 << 20, got  # the stream is 96 MiB; a read chunk is 8 MiB


@pytest.mark.parametrize("mode", ["verify", "infer", "iter"])
def test_a_seekable_source_tells_its_size(lying_file: Path, mode: str) -> None:
    got = _run(lying_file, "seekable", mode)
    assert got["size"] == lying_file.stat().st_size
    assert got["outcome"] == "CorruptShard"  # the claim exceeds the known size: at once
    assert got["peak"] < 40 << 20, got


class _ReadOnly:
    def __init__(self, data: bytes) -> None:
        self._fh = io.BytesIO(data)

    def read(self, n: int = -1) -> bytes:
        return self._fh.read(n)


def test_an_honest_big_record_streams_through_the_check() -> None:
    from recordkeeper.core.errors import CorruptShard
    from recordkeeper.tfrecord import scan_shard

    big = os.urandom(1 << 20) * 70  # 70 MiB: over the bound, so CRC-checked as it streams
    data = framed([b"a", big, b"z"])
    known = scan_shard(io.BytesIO(data), infer_schema=False)
    streamed = scan_shard(_ReadOnly(data), infer_schema=False)
    assert streamed == known
    assert streamed.record_count == 3
    flipped = bytearray(data)
    flipped[len(framed([b"a"])) + 12 + (50 << 20)] ^= 1
    with pytest.raises(CorruptShard) as err:
        scan_shard(_ReadOnly(bytes(flipped)), infer_schema=False)
    assert err.value.extra["offset"] == len(framed([b"a"]))

"""scan_shard reading into one reused buffer (``hash_in_background=False``, uncompressed, C fast
paths): the same stats and the same errors as reading fresh chunks, whatever the buffer size."""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import fsspec
import pytest

import recordkeeper.tfrecord as tfrecord
from recordkeeper.core.errors import CorruptShard
from recordkeeper.progress import ProgressReader
from recordkeeper.tfrecord import ShardStats, scan_shard

from .test_tfrecord import framed, offsets


@pytest.fixture(autouse=True)
def _both_implementations(implementation: str) -> str:
    return implementation


class CallCounter(io.BytesIO):
    """An in-memory source that counts how it is read."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.reads = self.readintos = 0

    def read(self, size: int | None = -1) -> bytes:
        self.reads += 1
        return super().read(size)

    def readinto(self, buffer: Any) -> int:
        self.readintos += 1
        return super().readinto(buffer)


def records_around(size: int, seed: int = 0) -> list[bytes]:
    """Records shorter and longer than ``size``, so frames straddle every kind of boundary."""
    rng = random.Random(seed)
    lengths = [0, 1, size - 16, size - 12, size, size + 1, 3 * size + 5]
    lengths += [rng.randrange(0, 2 * size) for _ in range(60)]
    return [rng.randbytes(max(n, 0)) for n in lengths]


def outcome(data: bytes, **kwargs: Any) -> ShardStats | tuple[str, dict[str, Any]]:
    """What scan_shard makes of ``data``: its stats, or the error's detail and extra."""
    try:
        return scan_shard(io.BytesIO(data), infer_schema=False, **kwargs)
    except CorruptShard as exc:
        return exc.detail, exc.extra


def corruptions(records: list[bytes]) -> list[bytes]:
    data = framed(records)
    at = offsets(records)
    out = [data, data[:-1], data[: at[-1] + 5], data[: at[-1] + 13]]
    for i, delta in ((5, 12 + len(records[5]) // 2), (9, 1), (20, 9), (30, 12 + len(records[30]))):
        bad = bytearray(data)
        bad[at[i] + delta] ^= 0x04
        out.append(bytes(bad))
    out.append(data + (1 << 30).to_bytes(8, "little") + bytes(4) + bytes(100))  # huge claim
    return out


@pytest.mark.parametrize("buffer", [13, 100, 1000, 1 << 16])
def test_a_reused_buffer_gives_the_same_stats_and_errors(
    monkeypatch: pytest.MonkeyPatch, buffer: int
) -> None:
    monkeypatch.setattr(tfrecord, "_READ_INTO_SIZE", buffer)
    records = records_around(buffer)
    for data in corruptions(records):
        fresh = outcome(data)  # hashed in a helper thread: chunks read as new bytes
        reused = outcome(data, hash_in_background=False)
        assert reused == fresh
    stats = outcome(framed(records), hash_in_background=False)
    assert isinstance(stats, ShardStats) and stats.record_count == len(records)


def test_the_reused_buffer_is_read_with_readinto() -> None:
    data = framed(records_around(1000))
    source = CallCounter(data)
    stats = scan_shard(source, infer_schema=False, hash_in_background=False)
    assert stats == scan_shard(io.BytesIO(data), infer_schema=False)
    assert (source.reads, source.readintos) == (0, 2)  # the data, then the end
    background = CallCounter(data)
    scan_shard(background, infer_schema=False)  # a helper thread may still hash a chunk
    assert background.readintos == 0


def test_compressed_shards_are_read_as_before() -> None:
    source = CallCounter(b"")
    scan_shard(source, "gzip", infer_schema=False, hash_in_background=False)
    assert source.readintos == 0


def test_a_local_file_through_fsspec_and_progress(tmp_path: Path, implementation: str) -> None:
    records = records_around(5000)
    path = tmp_path / "shard.tfrecord"
    path.write_bytes(framed(records))
    seen: list[int] = []
    sink = io.BytesIO()
    with fsspec.open(path.as_uri(), "rb") as raw:
        reader = ProgressReader(raw, seen.append, sink)
        stats = scan_shard(reader, infer_schema=False, hash_in_background=False)
    assert stats == scan_shard(io.BytesIO(path.read_bytes()), infer_schema=False)
    assert reader.count == sum(seen) == path.stat().st_size
    assert sink.getvalue() == path.read_bytes()


def test_progress_reader_reads_into_without_the_raw_readinto() -> None:
    class ReadOnly:
        def __init__(self, data: bytes) -> None:
            self._data = io.BytesIO(data)

        def read(self, size: int = -1) -> bytes:
            return self._data.read(size)

        def close(self) -> None:
            pass

    reader = ProgressReader(ReadOnly(b"abcdef"))  # type: ignore[arg-type]
    buffer = bytearray(4)
    assert reader.readinto(buffer) == 4 and buffer == b"abcd"
    assert reader.readinto(buffer) == 2 and buffer[:2] == b"ef"
    assert reader.readinto(buffer) == 0 and reader.count == 6

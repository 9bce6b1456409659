"""The C chunk walk (``_speedups.riegeli_walk``) against the Python reader it stands in for.

``scan_riegeli`` reads with the C walk when the extension has it: every chunk on its path
(compression none or zstd, nothing wrong) is checked and decoded in C, anything else is read by
the Python reader.  These tests scan the same bytes both ways, on files written by the
``array-record`` wheel with several group sizes and compressions, on hand-built files and on
each kind of corruption, and require the same stats, or the same error with the same offsets.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import pytest
import zstandard

from recordkeeper import _native
from recordkeeper.core.errors import CorruptShard, UnsupportedFormat
from recordkeeper.core.riegeli import BLOCK_SIZE, ChunkType
from recordkeeper.record_ids import RecordIds
from recordkeeper.riegeli import reader as reader_module
from recordkeeper.riegeli import scan_riegeli
from tests.client._riegeli_files import (
    Chunk,
    build,
    compress,
    flip,
    padding,
    simple,
    simple_chunk_data,
    varint,
)
from tests.servers.plugin import skip_or_fail

speedups = _native.speedups
pytestmark = pytest.mark.skipif(
    speedups is None or not hasattr(speedups, "riegeli_walk"),
    reason="the C extension is not built",
)


def _scan(data: bytes, mode: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The scan's outcome: (stats, info, identities), or the error's type, fields, message."""
    with monkeypatch.context() as patch:
        if mode == "python":
            patch.setattr(reader_module, "_walker", lambda: None)
        else:
            patch.setattr(reader_module, "USE_LIBZSTD", mode != "c-without-libzstd")
        if mode == "c-small-output":  # walks that stop when their output is full
            patch.setattr(reader_module, "_framed_cap", lambda _: 5000)
        ids = RecordIds()
        try:
            scan = scan_riegeli(io.BytesIO(data), hash_in_background=False, record_ids=ids)
        except (CorruptShard, UnsupportedFormat) as exc:
            return type(exc).__name__, exc.extra, str(exc)
        return scan.stats, scan.info, bytes(ids.buffer)


def _agree(data: bytes, monkeypatch: pytest.MonkeyPatch) -> Any:
    python = _scan(data, "python", monkeypatch)
    assert _scan(data, "c", monkeypatch) == python
    assert _scan(data, "c-without-libzstd", monkeypatch) == python
    assert _scan(data, "c-small-output", monkeypatch) == python
    return python


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    try:
        from array_record.python.array_record_module import ArrayRecordWriter
    except ImportError:
        skip_or_fail("the array-record wheel is not installed (pip install array-record==0.8.6)")
    rng = random.Random(23)
    out = {}
    tmp = tmp_path_factory.mktemp("walk")
    for options in [
        "group_size:1",
        "group_size:3",
        "group_size:64",
        "",
        "uncompressed,group_size:1",
        "uncompressed,group_size:17",
        "zstd:1,group_size:200",
        "brotli,group_size:5",
        "pad_to_block_boundary:true,group_size:9",
    ]:
        path = tmp / f"{len(out)}.array_record"
        writer = ArrayRecordWriter(str(path), options)
        for _ in range(rng.randint(150, 400)):
            size = rng.choice([0, 1, 100, 127, 128, 1000, 3000, 20_000, 70_000])
            writer.write(rng.randbytes(size) if rng.random() < 0.5 else b"ab" * (size // 2))
        writer.close()
        out[options] = path.read_bytes()
    return out


def test_the_walk_is_used_and_agrees_on_wheel_files(
    wheel_files: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    for data in wheel_files.values():
        _, info, _ = _agree(data, monkeypatch)
        assert info.format == "array_record"
    # most chunks go through C (one call per buffer, few chunks read in Python)
    data = wheel_files["group_size:1"]
    walked = speedups.riegeli_walk(bytearray(data), 0, 0, True, 64 << 20)
    assert walked[5] > 100 and walked[3] > len(data) - BLOCK_SIZE


def test_the_walk_agrees_on_every_corruption_of_wheel_files(
    wheel_files: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(5)
    for data in wheel_files.values():
        offsets = [rng.randrange(len(data)) for _ in range(12)]
        offsets += [64 + rng.randrange(40), BLOCK_SIZE + rng.randrange(24), len(data) - 100]
        for offset in offsets:
            _agree(flip(data, offset, rng.randrange(8)), monkeypatch)
        for cut in (rng.randrange(64, len(data)), len(data) - BLOCK_SIZE, len(data) - 1):
            _agree(data[:cut], monkeypatch)


def test_the_walk_agrees_on_hand_built_files_and_damage(monkeypatch: pytest.MonkeyPatch) -> None:
    big = b"x" * 70_000
    files = [
        build([simple([b"a" * 1000], "zstd"), simple([big]), simple([b"z"])]).data,
        build([simple([b"a"]), padding(5000), simple([b"b"], "zstd"), simple([b"c"])]).data,
        build([simple([b"r"] * 300, "brotli"), simple([b"s"], "snappy"), simple([b"t"])]).data,
        build([simple([b"q"]), Chunk(ChunkType.METADATA, b"", 0, 0), simple([b"w"] * 3)]).data,
    ]
    bad_varint = bytes([0]) + bytes([3]) + b"\x85\x80\x80" + b"hello"
    unknown = b"x" + simple_chunk_data([b"hello"])[1:]
    cut_zstd = simple_chunk_data([b"0123456789" * 100], "zstd")[:-5]
    wrong_count = simple([b"a", b"b", b"c"])
    wrong_count.num_records = 2
    wrong_size = simple([b"abc", b"de"], "zstd")
    wrong_size.decoded_data_size = 6
    claiming = padding(10)
    claiming.num_records = 3
    values = zstandard.ZstdCompressor().compress(b"hello")
    sizes = compress(varint(5), "zstd")
    huge = b"z" + varint(len(sizes)) + sizes + varint(1 << 40) + values  # claims 1 TiB
    for chunk in [
        Chunk(ChunkType.SIMPLE, bad_varint, 1, 5),
        Chunk(ChunkType.SIMPLE, unknown, 1, 5),
        Chunk(ChunkType.SIMPLE, cut_zstd, 1, 1000),
        Chunk(ChunkType.SIMPLE, huge, 1, 5),
        Chunk(ChunkType.SIMPLE, huge, 1, 1 << 40),
        wrong_count,
        wrong_size,
        claiming,
        Chunk(ChunkType.TRANSPOSED, b"\x00" * 10, 2, 4),
    ]:
        files.append(build([simple([b"ok"] * 5), simple([b"y"], "zstd"), chunk]).data)
    rng = random.Random(9)
    for data in files:
        _agree(data, monkeypatch)
        for offset in [rng.randrange(len(data)) for _ in range(8)] + [30, 70, BLOCK_SIZE + 3]:
            if offset < len(data):
                _agree(flip(data, offset, rng.randrange(8)), monkeypatch)
        for cut in (rng.randrange(1, len(data)), 63, 64 + 20):
            _agree(data[:cut], monkeypatch)


def test_the_index_framing_is_the_wheels_footer_entries() -> None:
    from recordkeeper.riegeli.array_record import ChunkIndexEntry, entry_bytes

    triples = [(64, 5, 1), (1 << 40, 300, 65536), (0, 0, 0), (2**63, 2**64 - 1, 127)]
    packed = b"".join(v.to_bytes(8, "little") for t in triples for v in t)
    expected = speedups.frame([entry_bytes(ChunkIndexEntry(*t)) for t in triples])
    assert speedups.riegeli_index_framing(packed) == bytes(expected)


def test_a_walk_from_inside_a_buffer_reads_nothing_outside_it(tmp_path: Path) -> None:
    built = build([simple([b"a" * 100] * 10), simple([b"b"]), simple([b"c"]), simple([b"d"])])
    data = built.data
    base = built.chunk_offsets[1]
    framed, index, resume, stop, records, chunks, kinds = speedups.riegeli_walk(
        bytearray(data[base:]), base, base, True, 1 << 20
    )
    assert (records, chunks, kinds) == (1, 1, 1)  # 'b'; 'c' and 'd' held back
    assert framed == bytes(speedups.frame([b"b"]))
    assert index == b"".join(v.to_bytes(8, "little") for v in (base, 1, 1))
    assert resume == built.chunk_offsets[2] and stop == len(data)
    with pytest.raises(ValueError):
        speedups.riegeli_walk(bytearray(data), 64, 0, True, 100)


def test_reading_the_first_records_decodes_only_the_first_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A publish's sample reads the first few records: iterating decodes chunk by chunk."""
    from recordkeeper.riegeli import iter_records

    decoded: list[int] = []
    original = reader_module.decode_simple_chunk

    def counting(*args: Any) -> list[bytes]:
        decoded.append(1)
        return original(*args)

    monkeypatch.setattr(reader_module, "decode_simple_chunk", counting)
    data = build([simple([bytes([i])]) for i in range(200)]).data
    records = iter_records(io.BytesIO(data))
    assert [next(records) for _ in range(5)] == [bytes([i]) for i in range(5)]
    assert len(decoded) <= 8

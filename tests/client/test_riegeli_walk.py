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
import subprocess
import sys
from pathlib import Path
from typing import Any

import cramjam
import pytest
import zstandard

from recordkeeper import _native
from recordkeeper.core.errors import CorruptShard, UnsupportedFormat
from recordkeeper.core.riegeli import BLOCK_SIZE, ChunkType
from recordkeeper.record_ids import RecordIds
from recordkeeper.riegeli import reader as reader_module
from recordkeeper.riegeli import scan_riegeli
from recordkeeper.riegeli.highwayhash import highwayhash64_python
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
            patch.setattr(reader_module, "_framed_cap", lambda: 5000)
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


def test_a_walk_whose_output_fills_is_followed_by_another_not_by_python(
    wheel_files: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A walk's output is bounded (a small one is reused by malloc, a large one was mapped
    afresh each walk); when it fills, the next walk starts at the chunks it held back, and a
    chunk whose records need more room than that is walked with room for it: the Python
    reader decodes only the last two chunks (the ArrayRecord footer and postscript)."""
    decoded: list[int] = []
    next_chunk = reader_module.RiegeliReader._next_chunk

    def counted(self: reader_module.RiegeliReader, begin: int) -> Any:
        chunk, end = next_chunk(self, begin)
        if chunk is not None:  # a simple chunk, decoded (not padding)
            decoded.append(begin)
        return chunk, end

    for options in ("group_size:1", "group_size:64", "zstd:1,group_size:200"):
        data = wheel_files[options]
        python = _scan(data, "python", monkeypatch)
        with monkeypatch.context() as patch:
            patch.setattr(reader_module, "_WALK_OUTPUT", 64 << 10)  # many walks per file
            patch.setattr(reader_module.RiegeliReader, "_next_chunk", counted)
            decoded.clear()
            assert _scan(data, "c", monkeypatch) == python
        assert python[1].record_count > 100
        assert len(decoded) == 2, (options, decoded)


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


# --------------------------------------------------------------------------- hostile claims
# The hashes of a Riegeli file are keyed with a published key: whoever writes a file can make
# any header or size claim look right.  Claims far beyond what the file holds are errors with
# their reason (CorruptShard), the same on both paths; before, each of these raised
# OverflowError or MemoryError (or aborted the process, or accepted a wrong record).


def _values_claiming(size: int, stream: bytes, compression: str = "zstd") -> bytes:
    """Simple chunk data for one 5-byte record whose values buffer has size prefix ``size``."""
    code = {"zstd": 0x7A, "brotli": 0x62}[compression]
    sizes = compress(varint(5), compression)
    return bytes([code]) + varint(len(sizes)) + sizes + varint(size) + stream


def _zstd_frame_declaring(size: int, data: bytes) -> bytes:
    """A zstd frame for ``data`` whose header declares ``size`` bytes (8-byte content size)."""
    frame = zstandard.ZstdCompressor().compress(data)
    assert frame[4] == 0x20  # single segment, 1-byte content size: the blocks follow at 6
    return frame[:4] + bytes([0xE0]) + size.to_bytes(8, "little") + frame[6:]


def _reason(outcome: Any) -> str:
    assert outcome[0] == "CorruptShard", outcome
    return str(outcome[1]["reason"])


def _hostile_values(case: str) -> tuple[bytes, int]:
    """(simple chunk data for one 5-byte record, the chunk header's decoded_data_size)."""
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(b"hello")
    with_size = zstandard.ZstdCompressor().compress(b"hello")
    brotli = bytes(cramjam.brotli.compress(b"hello"))
    if case == "zstd prefix 2^63":  # OverflowError: max_output_size is a ssize_t
        return _values_claiming(1 << 63, no_size), 5
    if case == "zstd prefix and header 2^63":
        return _values_claiming(1 << 63, with_size), 1 << 63
    if case == "zstd frame header 1 TiB":  # zstandard allocates it whatever the prefix says
        return _values_claiming(5, _zstd_frame_declaring(1 << 40, b"hello")), 5
    if case == "zstd 64 GiB from 14 bytes":  # prefix and chunk header agree, no frame size
        return _values_claiming(1 << 36, no_size), 1 << 36
    if case == "brotli 1 TiB":  # cramjam aborted the process allocating it
        return _values_claiming(1 << 40, brotli, "brotli"), 1 << 40
    if case == "brotli 3 bytes more":  # cramjam padded the record with zeros: a wrong record
        return _values_claiming(8, brotli, "brotli"), 8
    assert case == "zstd sizes prefix 2^63"  # more than 10 bytes per announced record
    sizes = varint(1 << 63) + zstandard.ZstdCompressor(write_content_size=False).compress(b"\x05")
    return b"z" + varint(len(sizes)) + sizes + compress(b"hello", "zstd"), 5


@pytest.mark.parametrize(
    "case",
    [
        "zstd prefix 2^63",
        "zstd prefix and header 2^63",
        "zstd frame header 1 TiB",
        "zstd 64 GiB from 14 bytes",
        "brotli 1 TiB",
        "brotli 3 bytes more",
        "zstd sizes prefix 2^63",
    ],
)
def test_sizes_beyond_what_the_chunk_header_or_stream_allows_are_corrupt(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, decoded = _hostile_values(case)
    chunk = Chunk(ChunkType.SIMPLE, data, 1, decoded)
    file = build([simple([b"ok"]), chunk, simple([b"after"])]).data
    assert _reason(_agree(file, monkeypatch)) == "bad_compression"


@pytest.mark.parametrize("compression", ["brotli", "snappy"])
def test_a_stream_that_decompresses_to_far_more_than_it_says_stops_at_the_claim(
    compression: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1.6 KB of brotli can stand for 256 MiB: a chunk whose stream says 5 bytes but holds
    that was decompressed whole (twice the 256 MiB at its peak) before the length check
    refused it.  Now the stream is decompressed into the 5 bytes announced (+1) and stops
    there: the scan's peak memory grows by far less than the stream would fill."""
    bomb = bytes(256 * 2**20)
    stream = (
        bytes(cramjam.brotli.compress(bomb, level=5))
        if compression == "brotli"
        else bytes(cramjam.snappy.compress_raw(bomb))
    )
    del bomb
    code = {"brotli": 0x62, "snappy": 0x73}[compression]
    sizes = compress(varint(5), compression)
    data = bytes([code]) + varint(len(sizes)) + sizes + varint(5) + stream
    file = build([simple([b"ok"]), Chunk(ChunkType.SIMPLE, data, 1, 5)]).data
    path = tmp_path / "bomb.riegeli"
    path.write_bytes(file)
    probe = (
        "import resource, sys\n"
        "from recordkeeper.core.errors import CorruptShard\n"
        "from recordkeeper.riegeli import scan_riegeli\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n"
        "    with open(sys.argv[1], 'rb') as fh:\n"
        "        scan_riegeli(fh, hash_in_background=False)\n"
        "except CorruptShard as exc:\n"
        "    print(exc.extra['reason'])\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    reason, grown_mib = done.stdout.split()
    assert reason == "bad_compression"
    assert int(grown_mib) < 64, f"the scan grew by {grown_mib} MiB"
    assert _reason(_agree(file, monkeypatch)) == "bad_compression"


def _claiming(data: bytes, begin: int, data_size: int) -> bytes:
    """``data`` with the header of the chunk at ``begin`` claiming ``data_size`` (hash fixed)."""
    assert 24 <= begin % BLOCK_SIZE <= BLOCK_SIZE - 40
    rest = bytearray(data[begin + 8 : begin + 40])
    rest[0:8] = data_size.to_bytes(8, "little")
    stored = highwayhash64_python(bytes(rest)).to_bytes(8, "little")
    return data[:begin] + stored + bytes(rest) + data[begin + 40 :]


@pytest.mark.parametrize("claim", [1 << 40, 1 << 63, (1 << 64) - 1])
def test_a_chunk_claiming_more_than_the_file_is_truncated(
    claim: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A header claiming 1 TiB or more of data: the reader read it in one read(n), which
    allocates n bytes first (MemoryError from a file, OverflowError past 2^63)."""
    built = build([simple([b"ok"]), simple([b"x" * 100]), simple([b"after"])])
    data = _claiming(built.data, built.chunk_offsets[1], claim)
    assert _reason(_agree(data, monkeypatch)) == "truncated"
    path = tmp_path / "claiming.riegeli"
    path.write_bytes(data)
    with path.open("rb") as fh, pytest.raises(CorruptShard, match="the file ends at"):
        scan_riegeli(fh, hash_in_background=False)


def test_the_walk_takes_offsets_it_can_add_to() -> None:
    """Offsets are ints in [0, 2^62]: "K" took any int modulo 2^64 (2^64 was 0), and near 2^64
    the chunk end of a header claiming 1 MiB wrapped around: the walk read past the buffer."""
    assert speedups is not None
    built = build([simple([b"x" * 100])])
    chunk = built.data[built.chunk_offsets[0] :][:200]
    base = (1 << 64) - (1 << 20) + 100
    for offset in (base, 1 << 63, (1 << 62) + 1):
        with pytest.raises(ValueError, match="out of range"):
            speedups.riegeli_walk(
                bytearray(_claiming(b"\0" * 100 + chunk, 100, 1 << 20)[100:]),
                offset,
                offset,
                True,
                1 << 20,
            )
    for offset in (1 << 64, -1):
        with pytest.raises(OverflowError):
            speedups.riegeli_walk(bytearray(chunk), offset, offset, True, 1 << 20)
    last = (1 << 62) - BLOCK_SIZE + built.chunk_offsets[0]  # the chunk ending near 2^62
    walked = speedups.riegeli_walk(bytearray(chunk), last, last, True, 1 << 20)
    assert walked[2:4] == (last, last + len(chunk))  # read (and held back) like any other

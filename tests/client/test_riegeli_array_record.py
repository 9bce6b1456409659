"""ArrayRecord files written by the ``array-record`` wheel, read with recordkeeper.riegeli.

ArrayRecord files are Riegeli files (simple chunks of ``group_size`` records, a footer chunk
indexing them, a postscript in the last block), so the wheel's writer is an independent producer
of real Riegeli files in every compression it offers; its reader is the reference for records.
Without the wheel these tests skip loudly (and fail under CI, like a missing server).
"""

from __future__ import annotations

import hashlib
import io
import os
import random
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from recordkeeper.core.errors import CorruptShard, UnsupportedFormat
from recordkeeper.core.riegeli import BLOCK_SIZE
from recordkeeper.file_kinds import describe_file
from recordkeeper.riegeli import RiegeliReader, iter_records, scan_riegeli
from recordkeeper.riegeli.array_record import MAGIC
from recordkeeper.tfrecord import TFRecordWriter
from tests.client._riegeli_files import build, flip, padding, simple, varint
from tests.servers.plugin import skip_or_fail


@pytest.fixture(scope="module")
def array_record() -> ModuleType:
    try:
        from array_record.python import array_record_module
    except ImportError:
        skip_or_fail(
            "the array-record wheel is not installed (pip install array-record==0.8.6): "
            "it writes the real ArrayRecord/Riegeli files these tests read"
        )
    return array_record_module


def _records(count: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        size = rng.choice([0, 1, 5, 100, 127, 128, 1000, 5000])
        out.append(rng.randbytes(size) if i % 3 else bytes([i % 251]) * size)
    return out


def _write(module: ModuleType, path: Path, options: str, records: list[bytes]) -> Path:
    writer = module.ArrayRecordWriter(str(path), options)
    for record in records:
        writer.write(record)
    writer.close()
    return path


def _read_reference(module: ModuleType, path: Path) -> list[bytes]:
    reader = module.ArrayRecordReader(str(path))
    try:
        return list(reader.read_all())
    finally:
        reader.close()


OPTIONS = [
    "",  # the defaults: zstd:3, group_size 65536 (one chunk over many blocks)
    "group_size:1",
    "group_size:7",
    "uncompressed,group_size:50",
    "zstd:1,group_size:100",
    "brotli:6,group_size:64",
    "snappy,group_size:33",
    "pad_to_block_boundary:true,group_size:40",
    "uncompressed,pad_to_block_boundary:true,group_size:500",
]


@pytest.mark.parametrize("options", OPTIONS)
def test_records_match_array_records_reader(
    array_record: ModuleType, tmp_path: Path, options: str, implementation: str
) -> None:
    records = _records(400)
    path = _write(array_record, tmp_path / "data.array_record", options, records)
    want = _read_reference(array_record, path)
    assert want == records
    with path.open("rb") as f:
        reader = RiegeliReader(f)
        got = list(reader)
    assert got == records
    info = reader.info
    assert info.format == "array_record"
    assert info.record_count == 400
    assert info.array_record is not None
    assert info.array_record.num_records == 400
    assert info.array_record.num_chunks == info.chunk_count
    expected = options.split(",")[0].split(":")[0] if options else "zstd"
    expected = {"uncompressed": "none", "group_size": "zstd", "pad_to_block_boundary": "zstd"}.get(
        expected, expected
    )
    assert info.compressions == {expected}


def test_a_big_file_with_records_larger_than_a_block(
    array_record: ModuleType, tmp_path: Path
) -> None:
    records = [os.urandom(200_000), *_records(3000), os.urandom(70_000)]
    for options in ("uncompressed,group_size:100", "zstd:3", "brotli:1,group_size:1000"):
        path = _write(array_record, tmp_path / "big.array_record", options, records)
        assert path.stat().st_size > 4 * BLOCK_SIZE
        with path.open("rb") as f:
            assert list(iter_records(f)) == _read_reference(array_record, path) == records


def test_records_sha256_equals_the_tfrecord_files(array_record: ModuleType, tmp_path: Path) -> None:
    """Same records, same records_sha256, whatever the format and its options."""
    records = _records(500, seed=3)
    with TFRecordWriter(tmp_path / "same.tfrecord", infer_schema=False) as writer:
        for record in records:
            writer.write(record)
    for i, options in enumerate(("group_size:9", "snappy,group_size:50", "uncompressed")):
        path = _write(array_record, tmp_path / f"same{i}.array_record", options, records)
        with path.open("rb") as f:
            scan = scan_riegeli(f, infer_schema=False)
        assert scan.stats.records_sha256 == writer.stats.records_sha256
        assert scan.stats.record_count == 500
        assert scan.stats.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert scan.stats.size == path.stat().st_size


def test_transposed_chunks_are_named(array_record: ModuleType, tmp_path: Path) -> None:
    path = _write(
        array_record, tmp_path / "t.array_record", "transpose:true,group_size:4", _records(20)
    )
    with path.open("rb") as f, pytest.raises(UnsupportedFormat, match="transposed chunks") as info:
        list(iter_records(f))
    assert info.value.extra["offset"] == 64
    with path.open("rb") as f:
        kind = describe_file(f)
    assert (kind.kind, kind.description) == (
        "array_record",
        "an ArrayRecord file with transposed chunks",
    )


def test_detection_names_array_record_files(array_record: ModuleType, tmp_path: Path) -> None:
    path = _write(array_record, tmp_path / "d.array_record", "brotli", _records(10))
    with path.open("rb") as f:
        kind = describe_file(f)
    assert kind.kind == "array_record"
    assert kind.description == "an ArrayRecord file (brotli simple chunks)"


# -- corruption of real files --------------------------------------------------------------


def _corrupt(data: bytes) -> tuple[CorruptShard, int]:
    count = 0
    with pytest.raises(CorruptShard) as info:
        for _ in iter_records(io.BytesIO(data)):
            count += 1
    return info.value, count


@pytest.fixture()
def big_file(array_record: ModuleType, tmp_path: Path) -> bytes:
    """An uncompressed ArrayRecord file of ~200 KiB: chunks of 10 records over 4 blocks."""
    records = [bytes([i % 256]) * 1000 for i in range(200)]
    return _write(
        array_record, tmp_path / "c.array_record", "uncompressed,group_size:10", records
    ).read_bytes()


def test_real_file_flipped_block_header(big_file: bytes) -> None:
    error, count = _corrupt(flip(big_file, 2 * BLOCK_SIZE + 17))
    assert (error.extra["reason"], error.extra["offset"]) == ("block_header", 2 * BLOCK_SIZE)
    assert count > 100  # the chunks before it were read


def test_real_file_flipped_chunk_header(big_file: bytes) -> None:
    error, count = _corrupt(flip(big_file, 64 + 16))  # the first data chunk's data_hash field
    assert (error.extra["reason"], error.extra["offset"]) == ("chunk_header", 64)
    assert count == 0


def test_real_file_flipped_chunk_data(big_file: bytes) -> None:
    error, _ = _corrupt(flip(big_file, 64 + 40 + 500))
    assert (error.extra["reason"], error.extra["offset"]) == ("chunk_data", 104)
    assert error.extra["chunk_offset"] == 64


def test_real_file_truncated(big_file: bytes) -> None:
    error, count = _corrupt(big_file[: BLOCK_SIZE + 1000])
    assert error.extra["reason"] == "truncated"
    assert 64 < error.extra["offset"] <= BLOCK_SIZE + 1000
    assert count > 0


def test_real_file_cut_at_the_footer_refuses_nothing_silently(big_file: bytes) -> None:
    """Cut just before the postscript's block: a Riegeli file whose footer records would be
    data.  Without the postscript it is no ArrayRecord file: the footer's records are yielded
    as records, which is what a Riegeli reader does; the count tells."""
    cut = big_file[: len(big_file) - BLOCK_SIZE]
    reader = RiegeliReader(io.BytesIO(cut))
    records = list(reader)
    assert reader.info.format == "riegeli"
    assert len(records) > 200


def test_real_file_garbage_in_padding(array_record: ModuleType, tmp_path: Path) -> None:
    path = _write(
        array_record,
        tmp_path / "p.array_record",
        "pad_to_block_boundary:true,group_size:5",
        _records(20),
    )
    data = path.read_bytes()
    # the first data chunk is followed by a padding chunk up to the block boundary
    error, count = _corrupt(data[:40_000] + b"garbage!" + data[40_008:])
    assert error.extra["reason"] == "chunk_data"
    assert "padding chunk" in error.detail
    assert count == 5


# -- the footer index checked against the chunks ----------------------------------------------


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


Entries = list[tuple[int, int, int]]


def _hand_built_array_record(entries_of: Callable[[Entries], Entries] | None = None) -> bytes:
    """Two data chunks, a footer (metadata + one entry per chunk), padding, the postscript."""
    data_chunks = [simple([b"r1", b"r2"], "zstd"), simple([b"r3"], "snappy")]
    offsets = build(data_chunks).chunk_offsets
    entries = [(offsets[0], 4, 2), (offsets[1], 2, 1)]
    if entries_of is not None:
        entries = entries_of(entries)
    metadata = _field(
        1, _field(1, 1) + _field(2, len(entries)) + _field(3, sum(e[2] for e in entries))
    )
    footer = simple(
        [metadata, *(_field(1, o) + _field(2, s) + _field(3, n) for o, s, n in entries)]
    )
    prefix = build([*data_chunks, footer])
    footer_offset = prefix.chunk_offsets[-1]
    pad_to_block = padding(BLOCK_SIZE - len(prefix.data) - 40)
    postscript = simple([_field(1, footer_offset) + _field(2, MAGIC)] * 3)
    with_postscript = build([*data_chunks, footer, pad_to_block, postscript])
    assert with_postscript.chunk_offsets[-1] == BLOCK_SIZE
    end_pad = padding(2 * BLOCK_SIZE - len(with_postscript.data) - 40)
    return build([*data_chunks, footer, pad_to_block, postscript, end_pad]).data


def test_a_hand_built_array_record_file_reads_like_the_real_ones() -> None:
    data = _hand_built_array_record()
    reader = RiegeliReader(io.BytesIO(data))
    assert list(reader) == [b"r1", b"r2", b"r3"]
    assert reader.info.format == "array_record"
    assert len(data) == 2 * BLOCK_SIZE


@pytest.mark.parametrize(
    "damage",
    [
        lambda entries: entries[:1],  # a chunk missing from the index
        lambda entries: [entries[0], (entries[1][0] + 1, *entries[1][1:])],  # a wrong offset
        lambda entries: [entries[0], (entries[1][0], 2, 5)],  # a wrong record count
    ],
)
def test_an_index_that_does_not_describe_the_chunks(damage: Callable[[Entries], Entries]) -> None:
    data = _hand_built_array_record(damage)
    with pytest.raises(CorruptShard, match="ArrayRecord footer") as info:
        list(iter_records(io.BytesIO(data)))
    assert info.value.extra["reason"] == "bad_index"

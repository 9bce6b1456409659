"""TFRecord framing, reading, verification and shard stats (recordkeeper.tfrecord)."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import random
import zlib
from pathlib import Path
from types import ModuleType

import crc32c
import fsspec
import pytest

import recordkeeper.tfrecord as tfrecord
from recordkeeper.core.errors import CorruptShard, InvalidInput, SchemaConflict
from recordkeeper.core.schema import Schema
from recordkeeper.schema_inference import infer_schema
from recordkeeper.tfrecord import (
    ShardStats,
    TFRecordWriter,
    compression_from_suffix,
    detect_compression,
    iter_records,
    masked_crc32c,
    normalize_compression,
    scan_shard,
)

COMPRESSIONS = ["none", "gzip", "zlib"]
TF_OPTIONS = {"none": "", "gzip": "GZIP", "zlib": "ZLIB"}


@pytest.fixture(autouse=True)
def _both_implementations(implementation: str) -> str:
    """Every test here runs on the C fast paths and on the pure-Python code."""
    return implementation


def some_records(n: int = 300, seed: int = 0) -> list[bytes]:
    """Records of awkward sizes: empty, around the one/two-byte varint limits, > 1 MiB."""
    rng = random.Random(seed)
    sizes = [0, 1, 127, 128, 129, 16383, 16384, 70_000, (1 << 20) + 3]
    sizes += [rng.randint(0, 3000) for _ in range(n - len(sizes))]
    return [rng.randbytes(size) for size in sizes]


def write(records: list[bytes], compression: str = "none") -> tuple[bytes, ShardStats]:
    buf = io.BytesIO()
    with TFRecordWriter(buf, compression) as writer:
        for record in records:
            writer.write(record)
    return buf.getvalue(), writer.stats


def framed(records: list[bytes]) -> bytes:
    """Reference framing, written out from the format's definition."""
    out = bytearray()
    for record in records:
        length = len(record).to_bytes(8, "little")
        out += length + masked_crc32c(length).to_bytes(4, "little")
        out += record + masked_crc32c(record).to_bytes(4, "little")
    return bytes(out)


def offsets(records: list[bytes]) -> list[int]:
    out, pos = [], 0
    for record in records:
        out.append(pos)
        pos += 16 + len(record)
    return out


def read_all(data: bytes, compression: str = "none", **kwargs: object) -> list[bytes]:
    return list(iter_records(io.BytesIO(data), compression, **kwargs))


# --------------------------------------------------------------------------- compatibility with TF


@pytest.mark.tf
def test_uncompressed_output_is_byte_identical_to_tensorflow(
    tensorflow: ModuleType, tmp_path: Path
) -> None:
    records = some_records()
    path = tmp_path / "tf.tfrecord"
    with tensorflow.io.TFRecordWriter(str(path)) as tf_writer:
        for record in records:
            tf_writer.write(record)
    ours, _ = write(records)
    assert ours == path.read_bytes()
    assert ours == framed(records)


@pytest.mark.tf
@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_tensorflow_reads_our_compressed_shards(
    tensorflow: ModuleType, tmp_path: Path, compression: str
) -> None:
    records = some_records()
    path = tmp_path / "ours.tfrecord"
    path.write_bytes(write(records, compression)[0])
    dataset = tensorflow.data.TFRecordDataset(str(path), compression_type=TF_OPTIONS[compression])
    assert [t.numpy() for t in dataset] == records


@pytest.mark.tf
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_we_read_and_describe_tensorflow_shards(
    tensorflow: ModuleType, tmp_path: Path, compression: str
) -> None:
    records = some_records()
    path = tmp_path / "tf.tfrecord"
    with tensorflow.io.TFRecordWriter(str(path), options=TF_OPTIONS[compression]) as tf_writer:
        for record in records:
            tf_writer.write(record)
    stored = path.read_bytes()

    with path.open("rb") as fh:
        assert list(iter_records(fh, compression)) == records
    assert detect_compression(stored[:64]) == compression
    with path.open("rb") as fh:
        stats = scan_shard(fh, TF_OPTIONS[compression])
    assert stats.sha256 == hashlib.sha256(stored).hexdigest()
    assert stats.crc32c == f"{crc32c.crc32c(stored):08x}"
    assert stats.records_sha256 == hashlib.sha256(framed(records)).hexdigest()
    assert (stats.record_count, stats.size, stats.compression) == (
        len(records),
        len(stored),
        compression,
    )
    assert stats.schema is not None and stats.schema.record_type == "opaque"


@pytest.mark.tf
def test_writer_accepts_example_messages_and_buffers(tensorflow: ModuleType) -> None:
    example = tensorflow.train.Example()
    example.features.feature["x"].int64_list.value.append(7)
    serialized = example.SerializeToString()
    data, stats = write([example, bytearray(serialized), memoryview(serialized)])  # type: ignore[list-item]
    assert read_all(data) == [serialized] * 3
    assert stats.schema is not None and stats.schema.feature("x").kind == "int64"


# --------------------------------------------------------------------------- stats


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_writer_stats_describe_the_stored_bytes(compression: str) -> None:
    records = some_records()
    stored, stats = write(records, compression)
    assert stats.sha256 == hashlib.sha256(stored).hexdigest()
    assert stats.crc32c == f"{crc32c.crc32c(stored):08x}"
    assert stats.size == len(stored)
    assert stats.record_count == len(records)
    assert stats.compression == compression
    assert stats.records_sha256 == hashlib.sha256(framed(records)).hexdigest()
    assert read_all(stored, compression) == records
    if compression == "gzip":
        assert gzip.decompress(stored) == framed(records)
    elif compression == "zlib":
        assert zlib.decompress(stored) == framed(records)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_scan_gives_the_stats_the_writer_gave(compression: str) -> None:
    records = [b"\n\x0c\n\n\n\x01a\x12\x05\x1a\x03\n\x01" + bytes([i % 100]) for i in range(5000)]
    stored, stats = write(records, compression)
    assert scan_shard(io.BytesIO(stored), compression) == stats
    assert stats.schema == infer_schema(records)
    assert stats.schema is not None and stats.schema.record_type == "example"
    without = scan_shard(io.BytesIO(stored), compression, infer_schema=False)
    assert without.schema is None and without.records_sha256 == stats.records_sha256


def test_records_sha256_does_not_depend_on_compression() -> None:
    records = some_records(50)
    results = [write(records, c)[1] for c in COMPRESSIONS]
    assert len({s.records_sha256 for s in results}) == 1
    assert len({s.sha256 for s in results}) == 3


def test_empty_shard() -> None:
    stored, stats = write([])
    assert stored == b""
    assert stats.sha256 == hashlib.sha256(b"").hexdigest()
    assert (stats.record_count, stats.size, stats.crc32c) == (0, 0, "00000000")
    assert stats.schema == Schema()
    gz, gz_stats = write([], "gzip")
    assert gzip.decompress(gz) == b""
    assert scan_shard(io.BytesIO(gz), "gzip") == gz_stats


def test_writer_on_an_fsspec_file_leaves_it_open() -> None:
    records = some_records(20)
    with fsspec.open("memory://rk-test/shard.tfrecord.gz", "wb") as fh:
        writer = TFRecordWriter(fh, "gzip")
        for record in records:
            writer.write(record)
        stats = writer.close()
        assert not fh.closed
    with fsspec.open("memory://rk-test/shard.tfrecord.gz", "rb") as fh:
        assert list(iter_records(fh, "gzip")) == records
    with fsspec.open("memory://rk-test/shard.tfrecord.gz", "rb") as fh:
        assert scan_shard(fh, "gzip") == stats


def test_writer_owns_a_path_and_stats_need_close(tmp_path: Path) -> None:
    path = tmp_path / "x.tfrecord"
    writer = TFRecordWriter(path)
    writer.write(b"abc")
    assert writer.record_count == 1
    with pytest.raises(RuntimeError):
        _ = writer.stats
    stats = writer.close()
    assert writer.close() is stats
    assert path.read_bytes() == framed([b"abc"])


def test_writer_closes_its_file_when_the_block_fails(tmp_path: Path) -> None:
    path = tmp_path / "x.tfrecord"
    with pytest.raises(ZeroDivisionError), TFRecordWriter(path) as writer:
        writer.write(b"abc")
        1 / 0  # noqa: B018
    assert writer._file.closed
    with pytest.raises(RuntimeError):
        _ = writer.stats


def test_writer_finishes_the_file_before_reporting_a_schema_conflict(tmp_path: Path) -> None:
    as_int = b"\n\x0b\n\t\n\x01a\x12\x04\x1a\x02\n\x00"  # {"a": int64_list {}}
    as_float = b"\n\x0f\n\r\n\x01a\x12\x08\x12\x06\n\x04\x00\x00\x80?"  # {"a": [1.0]}
    path = tmp_path / "x.tfrecord"
    writer = TFRecordWriter(path)
    writer.write(as_int)
    writer.write(as_float)
    with pytest.raises(SchemaConflict) as err:
        writer.close()
    assert err.value.extra["kinds"] == ["float", "int64"]
    assert path.read_bytes() == framed([as_int, as_float])


class KeepingSink:
    """A sink that keeps the very objects it is given (as some file objects do)."""

    def __init__(self) -> None:
        self.kept: list[object] = []

    def write(self, data: bytes) -> int:
        self.kept.append(data)
        return len(data)

    def flush(self) -> None:
        pass

    def value(self) -> bytes:
        return b"".join(bytes(piece) for piece in self.kept)  # type: ignore[call-overload]


class CopyingSink(KeepingSink):
    """A sink that copies what it is given, and says so: the writer reuses its buffers."""

    copies_writes = True

    def write(self, data: bytes) -> int:
        self.kept.append(bytes(data))
        return len(data)


@pytest.mark.parametrize("sink", [KeepingSink, CopyingSink, io.BytesIO])
def test_the_writer_reuses_buffers_only_when_the_sink_copies(sink: type) -> None:
    """~20 MiB in ~4 KiB records: many framing buffers, each filled again once the worker has
    stored it, except for a sink that may keep what it was given."""
    rng = random.Random(7)
    records = [rng.randbytes(rng.randint(3000, 5000)) for _ in range(5000)]
    out = sink()
    with TFRecordWriter(out) as writer:
        for i in range(0, len(records), 700):
            writer.write_many(records[i : i + 700])
    data = out.getvalue() if isinstance(out, io.BytesIO) else out.value()
    assert data == framed(records)
    assert writer.stats.crc32c == f"{crc32c.crc32c(data):08x}"
    assert writer.stats.sha256 == hashlib.sha256(data).hexdigest()


def test_the_writer_infers_the_schema_of_alike_and_different_records() -> None:
    """Records sharing a layout (values differ, packed int64 varints of other lengths) and
    others: the writer's schema is infer_schema()'s."""

    def example(values: bytes, name: bytes = b"n") -> bytes:
        feature = b"\x1a" + bytes([len(values) + 2]) + b"\x0a" + bytes([len(values)]) + values
        entry = b"\x0a" + bytes([len(name)]) + name + b"\x12" + bytes([len(feature)]) + feature
        body = b"\x0a" + bytes([len(entry)]) + entry
        return b"\x0a" + bytes([len(body)]) + body

    # b"\x01\x01" holds two values, b"\x81\x01" and b"\xff\x7f" one, b"\x01\x81" none (malformed):
    # same lengths, same bytes but for the varints' high bits
    one, two, bad = example(b"\x81\x01"), example(b"\x01\x01"), example(b"\x01\x81")
    cases = [
        ({"n": (1, 2)}, [one, *[two] * 500, example(b"\xff\x7f")]),
        ({"n": (2, 2)}, [two, example(b"\x05\x06"), example(b"\x7f\x7f")]),
        ({"n": (1, 3), "m": (2, 2)}, [example(b"\x01\x01", b"m"), one, example(b"\x01\x02\x03")]),
    ]
    for counts, records in cases:
        _, stats = write(records)
        assert stats.schema == infer_schema(records)
        assert {f.name: (f.min_count, f.max_count) for f in stats.schema.features} == counts
    for records in ([two, bad], [one, *[two] * 10, bad, two]):
        _, stats = write(records)
        assert stats.schema is not None and stats.schema.record_type == "opaque"


def test_local_files_are_written_in_pieces_of_at_most_256_kib(
    tmp_path: Path, implementation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """write_fd: every byte, in write() calls small enough to keep page-cache folios small
    (the sizes are observable on the pure-Python path)."""
    sizes: list[int] = []
    real_write = os.write

    def write(fd: int, data: memoryview) -> int:
        sizes.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    data = random.Random(5).randbytes(5 * tfrecord._FILE_WRITE + 123)
    path = tmp_path / "x.bin"
    with open(path, "wb", buffering=0) as f:
        tfrecord.write_fd(f.fileno(), bytearray(data))
        tfrecord.write_fd(f.fileno(), memoryview(data)[7:100])
    assert path.read_bytes() == data + data[7:100]
    if implementation == "python":
        assert sizes and max(sizes) <= tfrecord._FILE_WRITE and sum(sizes) == len(data) + 93
    read_only = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(OSError):
            tfrecord.write_fd(read_only, b"x")
    finally:
        os.close(read_only)


def test_writer_rejects_what_is_not_a_record() -> None:
    with pytest.raises(InvalidInput):
        TFRecordWriter(io.BytesIO()).write("text")


# --------------------------------------------------------------------------- corruption


def test_a_flipped_data_byte_reports_its_record() -> None:
    records = some_records(40)
    data = bytearray(framed(records))
    bad = 25
    data[offsets(records)[bad] + 12 + len(records[bad]) // 2] ^= 0x01
    got: list[bytes] = []
    with pytest.raises(CorruptShard) as err:
        got.extend(iter_records(io.BytesIO(bytes(data))))
    assert err.value.extra["offset"] == offsets(records)[bad]
    assert "CRC of its" in err.value.detail
    assert got == records[:bad]  # every good record before it was yielded
    for infer in (True, False):  # records copied for inference, or only checked
        with pytest.raises(CorruptShard) as err:
            scan_shard(io.BytesIO(bytes(data)), infer_schema=infer)
        assert err.value.extra["offset"] == offsets(records)[bad]
        assert f"its {len(records[bad])} data bytes" in err.value.detail


@pytest.mark.parametrize("where", ["length", "length_crc", "data_crc"])
def test_a_flipped_framing_byte_reports_its_record(where: str) -> None:
    records = some_records(40)
    data = bytearray(framed(records))
    bad = 17
    start = offsets(records)[bad]
    position = {
        "length": start + 1,
        "length_crc": start + 9,
        "data_crc": start + 12 + len(records[bad]) + 2,
    }[where]
    data[position] ^= 0x80
    with pytest.raises(CorruptShard) as err:
        read_all(bytes(data))
    assert err.value.extra["offset"] == start


def test_verify_crc_false_skips_the_data_check() -> None:
    records = [b"hello", b"world"]
    data = bytearray(framed(records))
    data[12] ^= 0x20  # "hello" -> "Hello"
    assert read_all(bytes(data), verify_crc=False) == [b"Hello", b"world"]


@pytest.mark.parametrize("cut", [1, 5, 12, 13, 20, 23])
def test_truncation_reports_the_last_record(cut: int) -> None:
    records = [b"a" * 8, b"b" * 8]  # frames of 24 bytes: the second starts at 24
    data = framed(records)[: 24 + cut]
    got: list[bytes] = []
    with pytest.raises(CorruptShard) as err:
        got.extend(iter_records(io.BytesIO(data)))
    assert got == records[:1]
    assert err.value.extra["offset"] == 24
    assert "truncated" in err.value.detail


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_truncated_or_corrupt_compressed_stream(compression: str) -> None:
    records = some_records(30)
    stored, _ = write(records, compression)
    with pytest.raises(CorruptShard) as err:
        read_all(stored[: len(stored) // 2], compression)
    assert err.value.extra["offset"] in offsets(records)
    with pytest.raises(CorruptShard):
        scan_shard(io.BytesIO(stored[:-3]), compression)
    broken = bytearray(stored)
    broken[len(stored) // 2] ^= 0xFF
    with pytest.raises(CorruptShard):
        read_all(bytes(broken), compression)


def test_uncompressed_data_read_as_gzip_is_corrupt() -> None:
    with pytest.raises(CorruptShard):
        read_all(framed([b"abc"]), "gzip")


def test_gzip_with_several_members_reads_through() -> None:
    first, second = [b"one", b"two"], [b"three"]
    data = gzip.compress(framed(first)) + gzip.compress(framed(second))
    assert read_all(data, "gzip") == first + second


@pytest.mark.parametrize("chunk", [1, 5, 13, 17, 1000])
def test_records_split_across_reads(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(tfrecord, "_READ_SIZE", chunk)
    records = some_records(30)[:8] + [b"x" * 40 for _ in range(20)]
    data = framed(records)
    assert read_all(data) == records
    assert scan_shard(io.BytesIO(data), infer_schema=False).record_count == len(records)
    corrupt = bytearray(data)
    corrupt[offsets(records)[20] + 14] ^= 0x01
    with pytest.raises(CorruptShard) as err:
        read_all(bytes(corrupt))
    assert err.value.extra["offset"] == offsets(records)[20]
    with pytest.raises(CorruptShard) as err:
        scan_shard(io.BytesIO(bytes(corrupt)), infer_schema=False)
    assert err.value.extra["offset"] == offsets(records)[20]
    with pytest.raises(CorruptShard) as err:
        read_all(data[:-1])
    assert err.value.extra["offset"] == offsets(records)[-1]


# --------------------------------------------------------------------------- compression names


def test_detect_compression() -> None:
    assert detect_compression(framed([b"x" * 100])[:64]) == "none"
    assert detect_compression(gzip.compress(framed([b"x"]))[:64]) == "gzip"
    assert detect_compression(zlib.compress(framed([b"x"]))[:64]) == "zlib"
    assert detect_compression(b"") == "none"
    assert detect_compression(b"plain text, not a shard") is None
    # The first record's length (0x9c78) starts with the bytes of a zlib header: the valid
    # TFRecord header wins.
    looks_like_zlib = framed([b"\0" * 0x9C78])[:64]
    assert looks_like_zlib[:2] == b"\x78\x9c"
    assert detect_compression(looks_like_zlib) == "none"


def test_compression_names() -> None:
    assert compression_from_suffix("gs://b/train-00000-of-00001.tfrecord.gz") == "gzip"
    assert compression_from_suffix("/x/a.tfrecord.ZLIB") == "zlib"
    assert compression_from_suffix(Path("a.zz")) == "zlib"
    assert compression_from_suffix("a.tfrecord") is None
    assert [normalize_compression(c) for c in (None, "", "NONE", "GZIP", "zlib", "gz")] == [
        "none",
        "none",
        "none",
        "gzip",
        "zlib",
        "gzip",
    ]
    with pytest.raises(InvalidInput):
        normalize_compression("snappy")
    with pytest.raises(InvalidInput):
        iter_records(io.BytesIO(), "snappy")  # at once, not on the first next()


def test_switching_implementations_midway_keeps_the_order(implementation: str) -> None:
    """The C path frames into buffers, the Python path into a list: a writer that sees both
    (tests switch _native.speedups) stores every byte in order."""
    from recordkeeper import _native

    records = some_records(60, seed=3)
    out = io.BytesIO()
    saved = _native.speedups
    writer = TFRecordWriter(out)
    for i, record in enumerate(records):
        if i % 9 == 0:  # the other implementation every nine records
            _native.speedups = None if _native.speedups is not None else saved
        writer.write_many([record] * 3)
    _native.speedups = saved
    stats = writer.close()
    expected = framed([r for r in records for _ in range(3)])
    assert out.getvalue() == expected
    assert stats.crc32c == f"{crc32c.crc32c(expected):08x}"

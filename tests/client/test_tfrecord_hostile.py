"""Hostile shards (issue 14): the three findings of the fuzz run, as regression tests.

1. C and Python read an over-long varint the same way (the Python reader is the specification).
2. A frame claiming more bytes than the stream can still hold is corruption, found at once:
   the rest of the stream is neither read nor buffered.
3. A decompression error keeps the records decoded before it and names the compressed offset.
"""

from __future__ import annotations

import gzip
import io
import os
import tracemalloc
import zlib
from pathlib import Path
from types import ModuleType

import pytest

import recordkeeper.tfrecord as tfrecord
from recordkeeper import _native
from recordkeeper.core.errors import CorruptShard
from recordkeeper.schema_inference import SchemaInferencer, infer_schema
from recordkeeper.tfrecord import iter_records, masked_crc32c, scan_shard

from .test_tfrecord import framed

EMPTY_EXAMPLE = b""
# Example{features: <length prefix 2**64 + 0>}: ten varint bytes whose value does not fit 64 bits.
OVERLONG_LENGTH = bytes.fromhex("0a80808080808080808002")


@pytest.fixture(autouse=True)
def _both_implementations(implementation: str) -> str:
    return implementation


class CountingReader(io.BytesIO):
    """An in-memory source (its size known) that counts the bytes handed out by ``read``."""

    bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.bytes_read += len(data)
        return data


def header(length: int, *, valid_crc: bool = True) -> bytes:
    raw = length.to_bytes(8, "little")
    crc = masked_crc32c(raw) if valid_crc else masked_crc32c(raw) ^ 1
    return raw + crc.to_bytes(4, "little")


# --------------------------------------------------------------------------- 1. varints


def test_an_overlong_length_prefix_makes_the_record_opaque_on_both_paths() -> None:
    # Python keeps the varint's exact value (2**64) and calls the record malformed, as protobuf
    # does; C used to drop the bits above 64, read a length of 0 and call it an empty Example.
    assert infer_schema([EMPTY_EXAMPLE, OVERLONG_LENGTH]).record_type == "opaque"
    assert infer_schema([OVERLONG_LENGTH, EMPTY_EXAMPLE]).record_type == "opaque"
    stats = scan_shard(io.BytesIO(framed([EMPTY_EXAMPLE, OVERLONG_LENGTH])))
    assert stats.schema is not None and stats.schema.record_type == "opaque"


def test_an_overlong_length_prefix_does_not_poison_the_process_cache() -> None:
    warm = SchemaInferencer()
    warm.add_many([EMPTY_EXAMPLE] * 3)  # the empty Example's structure key is now cached
    assert warm.result().record_type == "example"
    cold = SchemaInferencer()
    cold.add_many([OVERLONG_LENGTH])
    assert cold.result().record_type == "opaque"


def test_the_c_structure_keys_refuse_varints_beyond_64_bits() -> None:
    speedups = _native.speedups
    if speedups is None:
        pytest.skip("the pure-Python path has no structure keys")
    nine = b"\x80" * 9
    _, slow = speedups.structure_keys([b"\x0a" + nine + b"\x02", b"\x0a" + nine + b"\x01"])
    assert slow == [0, 1]  # both are longer than any record: Python decides (malformed)
    # An unpacked int64 value of 2**64 + 1 (ignored by the schema): Python accepts it.
    value = b"\x08\x81" + b"\x80" * 8 + b"\x02"
    feature = b"\x1a" + bytes([len(value)]) + value
    entry = b"\x0a\x01a\x12" + bytes([len(feature)]) + feature
    record = b"\x0a" + bytes([len(entry) + 2]) + b"\x0a" + bytes([len(entry)]) + entry
    schema = infer_schema([record])
    assert schema.record_type == "example" and schema.feature("a").kind == "int64"


# --------------------------------------------------------------------------- 2. claimed lengths


@pytest.mark.parametrize("claim", [1 << 40, 1 << 24])
def test_a_claim_beyond_the_stream_is_found_without_reading_it(
    monkeypatch: pytest.MonkeyPatch, claim: int
) -> None:
    monkeypatch.setattr(tfrecord, "_READ_SIZE", 1 << 16)
    good = framed([b"first", b"second"])
    data = good + header(claim) + b"\0" * (4 << 20)  # 4 MiB follow, fewer than claimed
    source = CountingReader(data)
    got: list[bytes] = []
    with pytest.raises(CorruptShard) as err:
        got.extend(iter_records(source))
    assert got == [b"first", b"second"]
    assert err.value.extra["offset"] == len(good)
    assert f"claims {claim} data bytes" in err.value.detail
    assert source.bytes_read <= 1 << 16  # one read, not the 4 MiB after the header


def test_a_flipped_length_byte_without_crc_checks_is_found_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tfrecord, "_READ_SIZE", 1 << 16)
    records = [b"x" * 1000 for _ in range(3000)]
    data = bytearray(framed(records))
    data[1016 * 5 + 4] ^= 0x10  # the sixth record's length gains 2**36
    source = CountingReader(bytes(data))
    with pytest.raises(CorruptShard) as err:
        list(iter_records(source, verify_crc=False))
    assert err.value.extra["offset"] == 1016 * 5
    assert source.bytes_read <= 1 << 16


@pytest.mark.parametrize("infer", [True, False])
def test_scan_shard_refuses_a_huge_claim_at_once(
    monkeypatch: pytest.MonkeyPatch, infer: bool
) -> None:
    monkeypatch.setattr(tfrecord, "_READ_SIZE", 1 << 16)
    source = CountingReader(header(1 << 40) + b"\0" * (2 << 20))
    with pytest.raises(CorruptShard) as err:
        scan_shard(source, infer_schema=infer)
    assert err.value.extra["offset"] == 0
    assert source.bytes_read <= 1 << 16


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_a_compressed_stream_cannot_hold_more_than_deflate_can_expand(
    monkeypatch: pytest.MonkeyPatch, compression: str
) -> None:
    monkeypatch.setattr(tfrecord, "_READ_SIZE", 1 << 16)
    payload = header(1 << 40) + os.urandom(1 << 20)  # incompressible: ~1 MiB stored
    stored = gzip.compress(payload) if compression == "gzip" else zlib.compress(payload)
    source = CountingReader(stored)
    with pytest.raises(CorruptShard) as err:
        list(iter_records(source, compression))
    assert err.value.extra["offset"] == 0
    assert source.bytes_read <= 1 << 16


def test_an_unseekable_source_still_reports_the_truncation() -> None:
    class Pipe:
        def __init__(self, data: bytes) -> None:
            self._raw = io.BytesIO(data)

        def read(self, size: int = -1) -> bytes:
            return self._raw.read(size)

    with pytest.raises(CorruptShard) as err:
        list(iter_records(Pipe(framed([b"a"]) + header(1 << 40) + b"\0" * 100)))
    assert err.value.extra["offset"] == 17
    assert "truncated" in err.value.detail


def test_an_explicit_size_bounds_a_source_that_cannot_seek() -> None:
    class Pipe:
        def __init__(self, data: bytes) -> None:
            self._raw = io.BytesIO(data)

        def read(self, size: int = -1) -> bytes:
            return self._raw.read(size)

    data = header(1 << 30) + b"\0" * 100
    with pytest.raises(CorruptShard) as err:
        list(iter_records(Pipe(data), size=len(data)))
    assert "claims 1073741824 data bytes" in err.value.detail


# --------------------------------------------------------------------------- 3. decompression


GOOD = [f"record {i}".encode() * 3 for i in range(1000)]


@pytest.mark.parametrize(
    ("compression", "compress"), [("gzip", gzip.compress), ("zlib", zlib.compress)]
)
def test_garbage_after_the_stream_keeps_the_records_before_it(
    compression: str, compress: object
) -> None:
    assert callable(compress)
    good = compress(framed(GOOD))
    got: list[bytes] = []
    with pytest.raises(CorruptShard) as err:
        got.extend(iter_records(io.BytesIO(good + b"\0" * 8), compression))
    assert got == GOOD
    assert err.value.extra["offset"] == len(framed(GOOD))
    assert err.value.extra["compressed_offset"] == len(good)
    assert f"compressed offset {len(good)}" in err.value.detail
    assert f"uncompressed offset {len(framed(GOOD))}" in err.value.detail


def test_a_corrupt_block_keeps_what_was_decoded_before_it() -> None:
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    first = compressor.compress(framed(GOOD[:500])) + compressor.flush(zlib.Z_FULL_FLUSH)
    rest = compressor.compress(framed(GOOD[500:])) + compressor.flush()
    broken = first + b"\xff" * 16 + rest  # block type 3 does not exist
    got: list[bytes] = []
    with pytest.raises(CorruptShard) as err:
        got.extend(iter_records(io.BytesIO(broken), "gzip"))
    assert got == GOOD[:500]
    assert err.value.extra["offset"] == len(framed(GOOD[:500]))
    assert err.value.extra["compressed_offset"] == len(first)
    stats_error = pytest.raises(CorruptShard)
    with stats_error as scanned:
        scan_shard(io.BytesIO(broken), "gzip")
    assert scanned.value.extra == err.value.extra


def test_a_truncated_compressed_stream_names_both_offsets() -> None:
    stored = gzip.compress(framed(GOOD))
    with pytest.raises(CorruptShard) as err:
        list(iter_records(io.BytesIO(stored[:-4]), "gzip"))  # the trailer's size field is cut
    assert err.value.extra["compressed_offset"] == len(stored) - 4
    assert err.value.extra["offset"] == len(framed(GOOD))


@pytest.mark.tf
def test_tensorflow_agrees_on_garbage_after_a_gzip_stream(
    tensorflow: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "trailing.tfrecord.gz"
    path.write_bytes(gzip.compress(framed(GOOD)) + b"\0" * 8)
    got: list[bytes] = []
    with pytest.raises(tensorflow.errors.OpError):
        for tensor in tensorflow.data.TFRecordDataset(str(path), compression_type="GZIP"):
            got.append(tensor.numpy())
    assert got == GOOD
    ours: list[bytes] = []
    with path.open("rb") as fh, pytest.raises(CorruptShard):
        ours.extend(iter_records(fh, "gzip"))
    assert ours == got


def test_sources_that_cannot_tell_their_size_read_as_before() -> None:
    records = [b"one", b"two"]
    gz = gzip.GzipFile(fileobj=io.BytesIO(gzip.compress(framed(records))))  # would inflate
    assert tfrecord.source_size(gz) is None
    assert list(iter_records(gz)) == records
    partly_read = io.BytesIO(b"skip" + framed(records))
    partly_read.read(4)
    assert tfrecord.source_size(partly_read) == len(framed(records))
    assert partly_read.tell() == 4  # back where it was
    assert list(iter_records(partly_read)) == records


def test_local_and_fsspec_files_tell_their_size(tmp_path: Path) -> None:
    import fsspec

    path = tmp_path / "x.tfrecord"
    path.write_bytes(framed([b"abc"]))
    with path.open("rb") as fh:
        assert tfrecord.source_size(fh) == 19
    with fsspec.open(f"file://{path}", "rb") as fh:
        assert tfrecord.source_size(fh) == 19
    with fsspec.open("memory://rk-size/x.tfrecord", "wb") as out:
        out.write(framed([b"abc"]))
    with fsspec.open("memory://rk-size/x.tfrecord", "rb") as fh:
        fh.read(3)
        assert tfrecord.source_size(fh) == 16


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_a_stream_that_inflates_a_thousandfold_is_never_held_whole(compression: str) -> None:
    record = b"\0" * 1024
    frame = framed([record])
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31 if compression == "gzip" else 15)
    count = (128 << 20) // len(frame)  # 128 MiB of records from about 130 KiB stored
    stored = b"".join(compressor.compress(frame) for _ in range(count)) + compressor.flush()
    assert len(stored) < 1 << 20
    tracemalloc.start()
    try:
        seen = sum(1 for got in iter_records(io.BytesIO(stored), compression) if got == record)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == count
    assert peak < 48 << 20  # pieces of 8 MiB, not the 128 MiB at once

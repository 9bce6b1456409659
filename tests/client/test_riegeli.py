"""Reading Riegeli/records files from the file format: hashes, layout, chunks, corruption.

Files here are built by hand (tests/client/_riegeli_files.py) so that every compression, chunk
type and kind of damage can be made; tests/client/test_riegeli_array_record.py reads files
written by the ``array-record`` wheel (an independent producer).
"""

from __future__ import annotations

import hashlib
import io
import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recordkeeper import _native
from recordkeeper.core.errors import CorruptShard, UnsupportedFormat
from recordkeeper.core.riegeli import (
    BLOCK_SIZE,
    FILE_SIGNATURE,
    ChunkHeader,
    ChunkType,
    chunk_end,
    logical_end,
    possible_chunk_boundary,
)
from recordkeeper.riegeli import (
    RiegeliReader,
    canonical_framing,
    highwayhash64,
    iter_records,
    scan_riegeli,
)
from recordkeeper.riegeli.highwayhash import highwayhash64_python
from recordkeeper.tfrecord import TFRecordWriter
from tests.client._riegeli_files import (
    Chunk,
    build,
    chunk_header_bytes,
    flip,
    padding,
    simple,
    simple_chunk_data,
    varint,
)

# google/highwayhash, highwayhash/highwayhash_test.cc: HighwayHash-64 of the bytes 0, 1, ...,
# size-1 with the key below, for sizes 0..64 (frozen golden values).
TEST_KEY = (0x0706050403020100, 0x0F0E0D0C0B0A0908, 0x1716151413121110, 0x1F1E1D1C1B1A1918)
EXPECTED_64 = [
    0x907A56DE22C26E53, 0x7EAB43AAC7CDDD78, 0xB8D0569AB0B53D62, 0x5C6BEFAB8A463D80,
    0xF205A46893007EDA, 0x2B8A1668E4A94541, 0xBD4CCC325BEFCA6F, 0x4D02AE1738F59482,
    0xE1205108E55F3171, 0x32D2644EC77A1584, 0xF6E10ACDB103A90B, 0xC3BBF4615B415C15,
    0x243CC2040063FA9C, 0xA89A58CE65E641FF, 0x24B031A348455A23, 0x40793F86A449F33B,
    0xCFAB3489F97EB832, 0x19FE67D2C8C5C0E2, 0x04DD90A69C565CC2, 0x75D9518E2371C504,
    0x38AD9B1141D3DD16, 0x0264432CCD8A70E0, 0xA9DB5A6288683390, 0xD7B05492003F028C,
    0x205F615AEA59E51E, 0xEEE0C89621052884, 0x1BFC1A93A7284F4F, 0x512175B5B70DA91D,
    0xF71F8976A0A2C639, 0xAE093FEF1F84E3E7, 0x22CA92B01161860F, 0x9FC7007CCF035A68,
    0xA0C964D9ECD580FC, 0x2C90F73CA03181FC, 0x185CF84E5691EB9E, 0x4FC1F5EF2752AA9B,
    0xF5B7391A5E0A33EB, 0xB9B84B83B4E96C9C, 0x5E42FE712A5CD9B4, 0xA150F2F90C3F97DC,
    0x7FA522D75E2D637D, 0x181AD0CC0DFFD32B, 0x3889ED981E854028, 0xFB4297E8C586EE2D,
    0x6D064A45BB28059C, 0x90563609B3EC860C, 0x7AA4FCE94097C666, 0x1326BAC06B911E08,
    0xB926168D2B154F34, 0x9919848945B1948D, 0xA2A98FC534825EBE, 0xE9809095213EF0B6,
    0x582E5483707BC0E9, 0x086E9414A88A6AF5, 0xEE86B98D20F6743D, 0xF89B7FF609B1C0A7,
    0x4C7D9CC19E22C3E8, 0x9A97005024562A6F, 0x5DD41CF423E6EBEF, 0xDF13609C0468E227,
    0x6E0DA4F64188155A, 0xB755BA4B50D7D4A1, 0x887A3484647479BD, 0xAB8EEBE9BF2139A0,
    0x75542C5D4CD2A6FF,
]  # fmt: skip


# -- HighwayHash ----------------------------------------------------------------------------


@pytest.mark.parametrize("size", range(65))
def test_highwayhash64_matches_the_published_test_vectors(size: int, implementation: str) -> None:
    assert highwayhash64(bytes(range(size)), TEST_KEY) == EXPECTED_64[size]


def test_the_riegeli_signature_hashes_check_out() -> None:
    """The format doc's fixed first 64 bytes: block header hash, chunk header and data hash."""
    (block_hash,) = struct.unpack_from("<Q", FILE_SIGNATURE, 0)
    (chunk_hash,) = struct.unpack_from("<Q", FILE_SIGNATURE, 24)
    (data_hash,) = struct.unpack_from("<Q", FILE_SIGNATURE, 40)
    assert highwayhash64_python(FILE_SIGNATURE[8:24]) == block_hash
    assert highwayhash64_python(FILE_SIGNATURE[32:64]) == chunk_hash
    assert highwayhash64_python(b"") == data_hash


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_c_and_python_highwayhash_agree(data: bytes) -> None:
    if _native.speedups is None:
        pytest.skip("recordkeeper._speedups is not built")
    assert _native.speedups.highwayhash64(data, struct.pack("<4Q", *TEST_KEY)) == (
        highwayhash64_python(data, TEST_KEY)
    )


_SCALAR, _AVX2 = 1, 2  # highwayhash64's impl argument


def _avx2() -> bool:
    try:
        _native.speedups.highwayhash64(b"", bytes(32), _AVX2)  # type: ignore[union-attr]
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("impl", [_SCALAR, _AVX2])
def test_each_c_highwayhash_matches_the_published_test_vectors(impl: int) -> None:
    if _native.speedups is None:
        pytest.skip("recordkeeper._speedups is not built")
    if impl == _AVX2 and not _avx2():
        pytest.skip("no AVX2 on this CPU")
    key = struct.pack("<4Q", *TEST_KEY)
    for size in range(65):
        assert _native.speedups.highwayhash64(bytes(range(size)), key, impl) == EXPECTED_64[size]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.binary(min_size=32, max_size=32))
def test_the_avx2_and_scalar_highwayhash_agree(data: bytes, key: bytes) -> None:
    """The AVX2 loop (whole packets of long data) against the portable scalar code; the
    automatic choice is one of them."""
    if _native.speedups is None or not _avx2():
        pytest.skip("recordkeeper._speedups is not built, or no AVX2 on this CPU")
    hh = _native.speedups.highwayhash64
    scalar = hh(data, key, _SCALAR)
    assert hh(data, key, _AVX2) == scalar
    assert hh(data, key) == scalar
    assert hh(data * 64, key, _AVX2) == hh(data * 64, key, _SCALAR)  # and longer


def test_an_unknown_highwayhash_implementation_is_refused() -> None:
    if _native.speedups is None:
        pytest.skip("recordkeeper._speedups is not built")
    with pytest.raises(ValueError, match="implementation 7"):
        _native.speedups.highwayhash64(b"", bytes(32), 7)


def test_c_highwayhash_takes_any_buffer_and_refuses_a_bad_key() -> None:
    if _native.speedups is None:
        pytest.skip("recordkeeper._speedups is not built")
    data = os.urandom(100_000)  # large enough to run without the GIL
    assert highwayhash64(memoryview(data)) == highwayhash64(bytearray(data))
    assert highwayhash64(data) == highwayhash64_python(data)
    with pytest.raises(ValueError, match="32 bytes"):
        _native.speedups.highwayhash64(b"", b"short")


# -- layout -----------------------------------------------------------------------------------


def test_chunk_ends_follow_the_format_doc() -> None:
    # the doc: RoundUpToPossibleChunkBoundary maps 0 -> 0, 1..25 -> 25, 26 -> 26, 64K -> 64K,
    # 64K+1..64K+25 -> 64K+25
    assert [possible_chunk_boundary(p) for p in (0, 1, 25, 26, 65536, 65537, 65561)] == [
        0, 25, 25, 26, 65536, 65561, 65561,
    ]  # fmt: skip
    assert logical_end(64, 65472) == 65536  # fills the first block exactly
    assert logical_end(64, 65473) == 65536 + 24 + 1  # one byte after the next block header
    assert logical_end(65536, 40) == 65536 + 24 + 40  # a chunk at a boundary: header first
    header = ChunkHeader(0, 0, 0, ChunkType.SIMPLE, 100, 0)
    assert chunk_end(64, header) == 164  # padded to span num_records bytes


# -- reading ----------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["none", "brotli", "zstd", "snappy"])
def test_simple_chunks_in_every_compression(compression: str, implementation: str) -> None:
    records = [b"", b"a", b"\x00" * 300, os.urandom(200), b"x" * 130]  # sizes over 127 too
    built = build([simple(records, compression), simple([b"tail"], compression)])
    reader = RiegeliReader(io.BytesIO(built.data))
    assert list(reader) == [*records, b"tail"]
    assert reader.info.format == "riegeli"
    assert reader.info.compressions == {compression}
    assert (reader.info.record_count, reader.info.chunk_count) == (6, 2)


def test_chunks_spanning_blocks_and_records_larger_than_a_block(implementation: str) -> None:
    big = os.urandom(3 * BLOCK_SIZE + 123)
    records = [big, *(os.urandom(i % 700) for i in range(500)), big[::-1]]
    chunks = [simple(records[:200], "zstd"), simple(records[200:], "none"), padding(70_000)]
    built = build(chunks)
    assert len(built.data) > 5 * BLOCK_SIZE
    assert list(iter_records(io.BytesIO(built.data))) == records


def test_padding_signature_and_metadata_chunks_hold_no_records() -> None:
    built = build(
        [
            Chunk(ChunkType.METADATA, b"\x00opaque", 0, 7),
            padding(10),
            simple([b"one"]),
            Chunk(ChunkType.SIGNATURE, b""),
            simple([b"two"], "brotli"),
        ]
    )
    assert list(iter_records(io.BytesIO(built.data))) == [b"one", b"two"]


def test_an_empty_file_has_no_records_and_a_bare_signature_neither() -> None:
    assert list(iter_records(io.BytesIO(b""))) == []
    assert list(iter_records(io.BytesIO(FILE_SIGNATURE))) == []


def test_a_chunk_may_end_exactly_at_a_block_boundary() -> None:
    # data sized so that the first chunk ends at 65536: the next begins with a block header
    size = 65536 - 64 - 40
    first = Chunk(ChunkType.PADDING, bytes(size))
    built = build([first, simple([b"after"])])
    assert built.chunk_offsets[1] == 65536
    assert list(iter_records(io.BytesIO(built.data))) == [b"after"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.binary(max_size=3000), min_size=1, max_size=40),
            st.sampled_from(["none", "brotli", "zstd", "snappy"]),
        ),
        max_size=6,
    )
)
def test_any_records_in_any_chunks_read_back(chunks: list[tuple[list[bytes], str]]) -> None:
    built = build([simple(records, compression) for records, compression in chunks])
    assert list(iter_records(io.BytesIO(built.data))) == [r for rs, _ in chunks for r in rs]


def test_records_sha256_is_the_tfrecord_one_for_the_same_records(
    tmp_path: Path, implementation: str
) -> None:
    records = [os.urandom(i * 37 % 900) for i in range(300)]
    path = tmp_path / "same.tfrecord"
    with TFRecordWriter(path, infer_schema=False) as writer:
        for record in records:
            writer.write(record)
    built = build([simple(records[:100], "zstd"), simple(records[100:], "brotli")])
    scan = scan_riegeli(io.BytesIO(built.data), infer_schema=False)
    assert scan.stats.records_sha256 == writer.stats.records_sha256
    assert scan.stats.record_count == 300
    assert scan.stats.size == len(built.data)
    assert scan.stats.sha256 == hashlib.sha256(built.data).hexdigest()
    assert canonical_framing(records) == path.read_bytes()


def test_scan_infers_the_schema_of_example_records() -> None:
    tf = pytest.importorskip("tensorflow")
    example = tf.train.Example(
        features=tf.train.Features(
            feature={"label": tf.train.Feature(int64_list=tf.train.Int64List(value=[3]))}
        )
    ).SerializeToString()
    scan = scan_riegeli(io.BytesIO(build([simple([example] * 5, "zstd")]).data))
    assert scan.stats.schema is not None
    assert "label" in str(scan.stats.schema.to_dict())


# -- corruption: the first bad offset and what was wrong ------------------------------------


def _error(data: bytes) -> tuple[CorruptShard, list[bytes]]:
    got: list[bytes] = []
    with pytest.raises(CorruptShard) as info:
        for record in iter_records(io.BytesIO(data)):
            got.append(record)
    return info.value, got


def _big_file() -> tuple[bytes, list[int]]:
    """Three chunks, the second spanning the block boundary at 65536."""
    built = build([simple([b"a" * 1000], "zstd"), simple([os.urandom(80_000)]), simple([b"z"])])
    return built.data, built.chunk_offsets


def test_a_flipped_bit_in_a_block_header() -> None:
    data, offsets = _big_file()
    error, got = _error(flip(data, 65536 + 9))
    assert error.extra["reason"] == "block_header"
    assert error.extra["offset"] == 65536
    assert error.extra["chunk_offset"] == offsets[1]
    assert got == [b"a" * 1000]  # the chunk before is read


def test_a_block_header_with_a_good_hash_pointing_elsewhere() -> None:
    data, _offsets = _big_file()
    fields = struct.pack("<QQ", 5, 7)
    forged = struct.pack("<Q", highwayhash64_python(fields)) + fields
    error, _ = _error(data[:65536] + forged + data[65536 + 24 :])
    assert (error.extra["reason"], error.extra["offset"]) == ("block_header", 65536)
    assert "points at a chunk" in error.detail


def test_a_flipped_bit_in_a_chunk_header() -> None:
    data, offsets = _big_file()
    error, got = _error(flip(data, offsets[1] + 30))  # its num_records field
    assert (error.extra["reason"], error.extra["offset"]) == ("chunk_header", offsets[1])
    assert got == [b"a" * 1000]


def test_a_flipped_bit_in_chunk_data() -> None:
    built = build([simple([b"first"]), simple([b"x" * 500], "brotli")])
    data_offset = built.data_offset(1)
    error, got = _error(flip(built.data, data_offset + 20))
    assert (error.extra["reason"], error.extra["offset"]) == ("chunk_data", data_offset)
    assert error.extra["chunk_offset"] == built.chunk_offsets[1]
    assert got == [b"first"]


@pytest.mark.parametrize("cut", [10, 63, 64 + 20, 64 + 40 + 3, -1])
def test_a_truncated_file(cut: int) -> None:
    built = build([simple([b"r" * 300]), simple([b"s" * 300])])
    cut = len(built.data) + cut if cut < 0 else cut
    error, _ = _error(built.data[:cut])
    assert error.extra["reason"] == "truncated"
    begin = max(o for o in [0, *built.chunk_offsets] if o <= cut) if cut >= 64 else 0
    assert error.extra["offset"] == begin
    assert "ends" in error.detail


def test_a_bad_varint_with_good_hashes() -> None:
    data = bytes([0]) + varint(3) + b"\x85\x80\x80" + b"hello"  # a size whose varint never ends
    built = build([simple([b"ok"]), Chunk(ChunkType.SIMPLE, data, 1, 5)])
    error, got = _error(built.data)
    assert (error.extra["reason"], error.extra["offset"]) == ("bad_varint", built.data_offset(1))
    assert got == [b"ok"]


def test_an_unknown_compression_type_with_good_hashes() -> None:
    data = b"x" + simple_chunk_data([b"hello"])[1:]
    built = build([Chunk(ChunkType.SIMPLE, data, 1, 5)])
    error, _ = _error(built.data)
    assert (error.extra["reason"], error.extra["offset"]) == (
        "bad_compression",
        built.data_offset(0),
    )
    assert "0x78" in error.detail


@pytest.mark.parametrize("compression", ["zstd", "brotli", "snappy"])
def test_a_corrupt_compressed_stream_with_good_hashes(compression: str) -> None:
    good = simple_chunk_data([os.urandom(50) * 20], compression)
    bad = good[:-5]  # the values stream cut short; the data hash is computed over what is left
    built = build([Chunk(ChunkType.SIMPLE, bad, 1, 1000)])
    error, _ = _error(built.data)
    assert error.extra["reason"] in ("bad_compression", "decoded_size")
    assert error.extra["offset"] == built.data_offset(0)


@pytest.mark.parametrize("announced", [2, 4])
def test_a_wrong_record_count_with_good_hashes(announced: int) -> None:
    chunk = simple([b"a", b"b", b"c"])
    chunk.num_records = announced
    built = build([chunk])
    error, _ = _error(built.data)
    assert (error.extra["reason"], error.extra["offset"]) == ("record_count", built.data_offset(0))


def test_a_wrong_decoded_size_with_good_hashes() -> None:
    chunk = simple([b"abc", b"de"])
    chunk.decoded_data_size = 6
    error, _ = _error(build([chunk]).data)
    assert error.extra["reason"] == "decoded_size"


def test_garbage_in_a_padding_chunk() -> None:
    built = build([simple([b"a"]), padding(5000), simple([b"b"])])
    data_offset = built.data_offset(1)
    error, got = _error(flip(built.data, data_offset + 4000, 3))
    assert (error.extra["reason"], error.extra["offset"]) == ("chunk_data", data_offset)
    assert "padding chunk" in error.detail
    assert got == [b"a"]


def test_a_padding_chunk_claiming_records() -> None:
    chunk = padding(10)
    chunk.num_records = 3
    error, _ = _error(build([chunk]).data)
    assert error.extra["reason"] == "chunk_header"
    assert "claims 3 records" in error.detail


def test_a_damaged_signature() -> None:
    error, _ = _error(flip(build([simple([b"a"])]).data, 30))
    assert (error.extra["reason"], error.extra["offset"]) == ("signature", 30)


def test_transposed_chunks_are_refused_by_name() -> None:
    built = build([simple([b"a"]), Chunk(ChunkType.TRANSPOSED, b"\x00columns", 2, 8)])
    got = []
    with pytest.raises(UnsupportedFormat, match="a Riegeli file with transposed chunks") as info:
        got.extend(iter_records(io.BytesIO(built.data)))
    assert info.value.extra["offset"] == built.chunk_offsets[1]
    assert info.value.extra["feature"] == "transposed_chunks"
    assert info.value.code == "unsupported_format"


def test_a_file_that_is_not_riegeli_says_what_it_looks_like() -> None:
    with pytest.raises(UnsupportedFormat, match="a Parquet file"):
        list(iter_records(io.BytesIO(b"PAR1" + bytes(100) + b"PAR1")))
    framed = canonical_framing([b"record"])
    with pytest.raises(UnsupportedFormat, match="a TFRecord file") as info:
        list(iter_records(io.BytesIO(framed)))
    assert info.value.extra["format"] == "tfrecord"


def test_a_chunk_header_at_a_bad_hash_reports_the_header_after_a_block_header() -> None:
    """A chunk that begins at a block boundary: its header starts after the block header."""
    first = Chunk(ChunkType.PADDING, bytes(65536 - 64 - 40))
    built = build([first, simple([b"after"])])
    assert built.chunk_offsets[1] == 65536
    error, _ = _error(flip(built.data, 65536 + 24 + 12))
    assert error.extra["reason"] == "chunk_header"
    assert error.extra["offset"] == 65536 + 24
    assert error.extra["chunk_offset"] == 65536


def test_the_header_bytes_of_hand_built_chunks_parse_back() -> None:
    chunk = simple([b"abc"], "zstd")
    header = ChunkHeader.parse(chunk_header_bytes(chunk))
    assert (header.chunk_type, header.num_records, header.decoded_data_size) == (0x72, 1, 3)
    assert header.data_size == len(chunk.data)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=30), st.integers(-2, 2), st.integers(-2, 2))
def test_c_record_splitting_matches_python(
    records: list[bytes], count_delta: int, size_delta: int
) -> None:
    """_speedups.riegeli_records: the records, or None whenever the buffers do not fit."""
    if _native.speedups is None:
        pytest.skip("recordkeeper._speedups is not built")
    sizes = b"".join(varint(len(r)) for r in records)
    values = b"".join(records)
    split = _native.speedups.riegeli_records
    assert split(sizes, values, len(records)) == records
    count = len(records) + count_delta
    cut = (
        values[: max(len(values) + size_delta, 0)] if size_delta < 0 else values + b"x" * size_delta
    )
    if count != len(records) or cut != values:
        assert split(sizes, cut, count) is None
    assert split(sizes + b"\x80", values, len(records)) is None  # a varint cut off at the end
    assert split(b"\xff" * 11, b"", 1) is None  # longer than 64 bits

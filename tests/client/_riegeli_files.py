"""Hand-built Riegeli/records files for tests: any chunk, compression or corruption.

A tiny writer following the published format (block headers every 64 KiB, chunk headers,
HighwayHash-64 of headers and data, padding to the chunk's end), so that tests can make what
no installed writer makes: Brotli and Snappy simple chunks outside ArrayRecord, chunks whose
hashes are right but whose contents are wrong (a bad varint, a wrong record count, an unknown
compression type), and transposed-looking chunks.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import cramjam
import zstandard

from recordkeeper.core.riegeli import (
    BLOCK_HEADER_SIZE,
    BLOCK_SIZE,
    FILE_SIGNATURE,
    ChunkHeader,
    ChunkType,
    chunk_end,
)
from recordkeeper.riegeli.highwayhash import highwayhash64_python

COMPRESSION_BYTES = {"none": 0, "brotli": 0x62, "zstd": 0x7A, "snappy": 0x73}


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compress(data: bytes, compression: str) -> bytes:
    """A buffer as a simple chunk stores it: as is, or its size as a varint and the stream."""
    if compression == "none":
        return data
    if compression == "zstd":
        stream = zstandard.ZstdCompressor(level=3).compress(data)
    elif compression == "brotli":
        stream = bytes(cramjam.brotli.compress(data))
    elif compression == "snappy":
        stream = bytes(cramjam.snappy.compress_raw(data))
    else:
        raise ValueError(compression)
    return varint(len(data)) + stream


def simple_chunk_data(records: Sequence[bytes], compression: str = "none") -> bytes:
    sizes = compress(b"".join(varint(len(r)) for r in records), compression)
    values = compress(b"".join(records), compression)
    return bytes([COMPRESSION_BYTES[compression]]) + varint(len(sizes)) + sizes + values


@dataclass
class Chunk:
    """A chunk to write; ``header_hash``/``data_hash`` override the computed hashes."""

    chunk_type: int
    data: bytes
    num_records: int = 0
    decoded_data_size: int = 0
    header_hash: int | None = None
    data_hash: int | None = None


def simple(records: Sequence[bytes], compression: str = "none") -> Chunk:
    return Chunk(
        ChunkType.SIMPLE,
        simple_chunk_data(records, compression),
        len(records),
        sum(map(len, records)),
    )


def padding(size: int) -> Chunk:
    return Chunk(ChunkType.PADDING, bytes(size))


def chunk_header_bytes(chunk: Chunk) -> bytes:
    data_hash = highwayhash64_python(chunk.data) if chunk.data_hash is None else chunk.data_hash
    rest = struct.pack(
        "<QQQQ",
        len(chunk.data),
        data_hash,
        chunk.chunk_type | (chunk.num_records << 8),
        chunk.decoded_data_size,
    )
    header_hash = highwayhash64_python(rest) if chunk.header_hash is None else chunk.header_hash
    return struct.pack("<Q", header_hash) + rest


@dataclass
class Built:
    """A built file and where each chunk begins (physical offsets)."""

    data: bytes
    chunk_offsets: list[int]

    def data_offset(self, index: int) -> int:
        """Physical offset of chunk ``index``'s data (after its header and block headers)."""
        pos = self.chunk_offsets[index]
        remaining = 40
        while remaining:
            if pos % BLOCK_SIZE == 0:
                pos += BLOCK_HEADER_SIZE
            take = min(remaining, BLOCK_SIZE - pos % BLOCK_SIZE)
            pos += take
            remaining -= take
        return pos + BLOCK_HEADER_SIZE if pos % BLOCK_SIZE == 0 else pos


def build(chunks: Sequence[Chunk]) -> Built:
    """A Riegeli file: the signature, then ``chunks``, block headers where they belong."""
    out = bytearray(FILE_SIGNATURE)
    offsets = []
    for chunk in chunks:
        begin = len(out)
        offsets.append(begin)
        payload = chunk_header_bytes(chunk) + chunk.data
        header = ChunkHeader.parse(payload[:40])
        end = chunk_end(begin, header)
        payload += bytes(end - begin)  # padding: more than enough, cut below
        pos = begin
        taken = 0
        while pos < end:
            if pos % BLOCK_SIZE == 0:
                fields = struct.pack("<QQ", pos - begin, end - pos)
                out += struct.pack("<Q", highwayhash64_python(fields)) + fields
                pos += BLOCK_HEADER_SIZE
                continue
            take = min(BLOCK_SIZE - pos % BLOCK_SIZE, end - pos)
            out += payload[taken : taken + take]
            taken += take
            pos += take
        assert len(out) == end
    return Built(bytes(out), offsets)


def flip(data: bytes, offset: int, bit: int = 0) -> bytes:
    """``data`` with one bit flipped."""
    changed = bytearray(data)
    changed[offset] ^= 1 << bit
    return bytes(changed)

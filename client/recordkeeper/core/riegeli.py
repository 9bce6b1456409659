"""The physical layout of a Riegeli/records file: blocks, block headers, chunk headers.

From the published format (github.com/google/riegeli, ``doc/riegeli_records_file_format.md``):
the file is a sequence of chunks, interrupted at every multiple of 64 KiB by a 24-byte block
header (``header_hash | previous_chunk | next_chunk``, all uint64 little-endian) that locates
the chunk it interrupts.  A chunk is a 40-byte header (``header_hash | data_size | data_hash |
chunk_type (1 byte) | num_records (7 bytes) | decoded_data_size``), ``data_size`` bytes of data
and padding; both hashes are HighwayHash-64 with Riegeli's key.  Block headers may interrupt a
chunk anywhere, its header included.  Offsets here are physical file offsets.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

__all__ = [
    "BLOCK_HEADER_SIZE",
    "BLOCK_SIZE",
    "CHUNK_HEADER_SIZE",
    "FILE_SIGNATURE",
    "USABLE_BLOCK_SIZE",
    "BlockHeader",
    "ChunkHeader",
    "ChunkType",
    "chunk_end",
    "logical_end",
    "possible_chunk_boundary",
]

BLOCK_SIZE = 1 << 16
BLOCK_HEADER_SIZE = 24
USABLE_BLOCK_SIZE = BLOCK_SIZE - BLOCK_HEADER_SIZE
CHUNK_HEADER_SIZE = 40
MAX_NUM_RECORDS = (1 << 56) - 1

_BLOCK_HEADER = struct.Struct("<3Q")
# header_hash, data_size, data_hash, chunk_type | num_records << 8, decoded_data_size
_CHUNK_HEADER = struct.Struct("<5Q")

#: The first 64 bytes of every Riegeli/records file: a block header, then the header of the
#: file signature chunk (type ``'s'``, no data, no records).
FILE_SIGNATURE = bytes.fromhex(
    "83af70d10d884a3f0000000000000000"
    "400000000000000091bac23c9287e1a9"
    "0000000000000000e19f13c0e9b1c372"
    "73000000000000000000000000000000"
)


class ChunkType:
    """The chunk types of the format (one byte each, frozen in the format)."""

    SIGNATURE = 0x73  # 's': must start the file; elsewhere ignored
    METADATA = 0x6D  # 'm': a RecordsMetadata proto, transposed-encoded; no records
    PADDING = 0x70  # 'p': only occupies space
    SIMPLE = 0x72  # 'r': record sizes and values, each possibly compressed
    TRANSPOSED = 0x74  # 't': records split by proto field into columns

    NAMES: ClassVar[dict[int, str]] = {
        SIGNATURE: "file signature",
        METADATA: "file metadata",
        PADDING: "padding",
        SIMPLE: "simple",
        TRANSPOSED: "transposed",
    }

    @classmethod
    def name(cls, value: int) -> str:
        """A readable name for a chunk type byte, known or not."""
        known = cls.NAMES.get(value)
        if known is not None:
            return known
        shown = chr(value) if 0x21 <= value < 0x7F else f"\\x{value:02x}"
        return f"unknown ({shown!r})"


@dataclass(frozen=True)
class BlockHeader:
    """A block header: its stored hash and the distances to the chunk it interrupts."""

    stored_hash: int
    previous_chunk: int
    next_chunk: int

    @classmethod
    def parse(cls, raw: bytes | memoryview) -> BlockHeader:
        return cls(*_BLOCK_HEADER.unpack(raw))

    @staticmethod
    def hashed_part(raw: bytes | memoryview) -> bytes | memoryview:
        """The bytes ``header_hash`` covers (``previous_chunk`` and ``next_chunk``)."""
        return raw[8:24]


@dataclass(frozen=True)
class ChunkHeader:
    """A chunk header's fields, as stored."""

    stored_hash: int
    data_size: int
    data_hash: int
    chunk_type: int
    num_records: int
    decoded_data_size: int

    @classmethod
    def parse(cls, raw: bytes | memoryview) -> ChunkHeader:
        header_hash, data_size, data_hash, type_and_count, decoded = _CHUNK_HEADER.unpack_from(raw)
        return cls(
            header_hash, data_size, data_hash, type_and_count & 0xFF, type_and_count >> 8, decoded
        )

    @staticmethod
    def hashed_part(raw: bytes | memoryview) -> bytes | memoryview:
        """The bytes ``header_hash`` covers (``data_size`` to ``decoded_data_size``)."""
        return raw[8:40]


def logical_end(pos: int, size: int) -> int:
    """The physical offset just after ``size`` bytes that start at ``pos``, block headers between.

    Bytes starting exactly at a block boundary start after its header.
    """
    overhead_blocks = (size + (pos + USABLE_BLOCK_SIZE - 1) % BLOCK_SIZE) // USABLE_BLOCK_SIZE
    return pos + size + overhead_blocks * BLOCK_HEADER_SIZE


def possible_chunk_boundary(pos: int) -> int:
    """The first offset at or after ``pos`` where a chunk may begin (not inside a block header,
    nor right after one)."""
    remaining = (-pos) % BLOCK_SIZE
    return pos + max(remaining - (USABLE_BLOCK_SIZE - 1), 0)


def chunk_end(begin: int, header: ChunkHeader) -> int:
    """Where the chunk that begins at ``begin`` ends (and the next one begins): after its header,
    data and intervening block headers, padded so that the chunk spans at least ``num_records``
    bytes and does not end inside or right after a block header."""
    return max(
        logical_end(begin, CHUNK_HEADER_SIZE + header.data_size),
        possible_chunk_boundary(begin + header.num_records),
    )

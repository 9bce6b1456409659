"""ArrayRecord's index: the footer chunk and the postscript at the end of the file.

An ArrayRecord file (github.com/google/array_record, ``cpp/layout.proto``) is a Riegeli file:
user records in simple (or transposed) chunks of ``group_size`` records, then, padded to a
block boundary, a *footer* simple chunk whose records are a ``RiegeliFooterMetadata`` proto and
one ``ArrayRecordFooter`` per data chunk (its offset, decoded size and record count), and last,
in the file's final 64 KiB block, a *postscript*: an uncompressed simple chunk of three copies
of ``RiegeliPostscript`` (the footer's offset and a magic number).  The footer and postscript
records are not user records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from recordkeeper.riegeli.chunks import ChunkDataError, read_varint

__all__ = [
    "MAGIC",
    "ChunkIndexEntry",
    "FooterMetadata",
    "entry_bytes",
    "parse_footer",
    "parse_metadata",
    "parse_postscript",
]

#: ``RiegeliPostscript.magic`` of every ArrayRecord file.
MAGIC = 0x71930E704FDAE05E


def _fields(message: bytes) -> dict[int, int | bytes]:
    """The last value of each field of a protobuf message (varint and length-delimited only)."""
    out: dict[int, int | bytes] = {}
    pos = 0
    while pos < len(message):
        key, pos = read_varint(message, pos, "protobuf field key")
        number, wire = key >> 3, key & 7
        if wire == 0:
            out[number], pos = read_varint(message, pos, "protobuf varint")
        elif wire == 2:
            size, pos = read_varint(message, pos, "protobuf length")
            if pos + size > len(message):
                raise ChunkDataError("bad_index", "a protobuf field runs past its message")
            out[number] = message[pos : pos + size]
            pos += size
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ChunkDataError("bad_index", f"protobuf wire type {wire} is not expected here")
    if pos != len(message):
        raise ChunkDataError("bad_index", "a protobuf field runs past its message")
    return out


def _uint(fields: dict[int, int | bytes], number: int) -> int:
    value = fields.get(number, 0)
    if not isinstance(value, int):
        raise ChunkDataError("bad_index", f"protobuf field {number} is not a varint")
    return value


def parse_postscript(records: list[bytes]) -> int | None:
    """The footer offset, if ``records`` are an ArrayRecord postscript (three equal copies of a
    ``RiegeliPostscript`` with the magic number); else None."""
    if len(records) != 3 or records[0] != records[1] or records[1] != records[2]:
        return None
    try:
        fields = _fields(records[0])
    except ChunkDataError:
        return None
    if fields.get(2) != MAGIC:
        return None
    return _uint(fields, 1)


@dataclass(frozen=True)
class FooterMetadata:
    """``RiegeliFooterMetadata.array_record_metadata``."""

    version: int
    num_chunks: int
    num_records: int
    writer_options: str


class ChunkIndexEntry(NamedTuple):
    """One ``ArrayRecordFooter``: where a data chunk begins and what it holds (a tuple: one
    is made per chunk read, and a frozen dataclass costs several times more to make)."""

    chunk_offset: int
    decoded_data_size: int
    num_records: int


def _varint_slow(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_BYTES = tuple(bytes((b,)) for b in range(256))


def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:  # record counts: one byte
        return _BYTES[value]
    if 0 <= value < 1 << 14:  # chunk sizes of small chunks: two bytes
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if 0 <= value < 1 << 21:  # chunk offsets: three or four bytes
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    if 0 <= value < 1 << 28:
        return bytes(
            (
                (value & 0x7F) | 0x80,
                ((value >> 7) & 0x7F) | 0x80,
                ((value >> 14) & 0x7F) | 0x80,
                value >> 21,
            )
        )
    return _varint_slow(value)


def entry_bytes(entry: ChunkIndexEntry) -> bytes:
    """``entry`` serialized as array_record's writer serializes it (fields 1, 2, 3 in order)."""
    return (
        b"\x08"
        + _varint(entry.chunk_offset)
        + b"\x10"
        + _varint(entry.decoded_data_size)
        + b"\x18"
        + _varint(entry.num_records)
    )


def parse_metadata(record: bytes) -> FooterMetadata:
    """The footer's first record."""
    outer = _fields(record)
    inner = outer.get(1)
    if not isinstance(inner, bytes):
        raise ChunkDataError("bad_index", "the ArrayRecord footer has no array_record_metadata")
    meta = _fields(inner)
    options = meta.get(4, b"")
    return FooterMetadata(
        version=_uint(meta, 1),
        num_chunks=_uint(meta, 2),
        num_records=_uint(meta, 3),
        writer_options=options.decode("utf-8", "replace") if isinstance(options, bytes) else "",
    )


def parse_footer(
    records: list[bytes], expected: list[ChunkIndexEntry] | None = None
) -> tuple[FooterMetadata, list[ChunkIndexEntry]]:
    """The footer chunk's metadata and index entries.

    When the entries are byte for byte those of ``expected`` (as :func:`entry_bytes` writes
    them), ``expected`` is returned without parsing each one.
    """
    if not records:
        raise ChunkDataError("bad_index", "the ArrayRecord footer chunk has no records")
    metadata = parse_metadata(records[0])
    if (
        expected is not None
        and len(expected) == len(records) - 1
        and all(map(bytes.__eq__, map(entry_bytes, expected), records[1:]))
    ):
        return metadata, expected
    entries = []
    for record in records[1:]:
        fields = _fields(record)
        entries.append(ChunkIndexEntry(_uint(fields, 1), _uint(fields, 2), _uint(fields, 3)))
    return metadata, entries

"""What a file looks like, from its first (and last) bytes: the rules, without any I/O.

:func:`sniff` names a file's format so that an error can say "a Parquet file" instead of "not
a TFRecord file".  It recognises the record formats recordkeeper reads (TFRecord, Riegeli,
ArrayRecord), compressed streams and the data formats people confuse with them.  The checks
are byte patterns (magic numbers, the Riegeli file signature, a TFRecord header whose length
CRC matches): a match is a strong hint, never a proof that the whole file is valid.

The TFRecord check needs the masked CRC32C of TFRecord framing, which the standard library
cannot compute quickly; the caller passes it in (``recordkeeper.tfrecord.masked_crc32c``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from recordkeeper.core.riegeli import (
    BLOCK_SIZE,
    CHUNK_HEADER_SIZE,
    FILE_SIGNATURE,
    ChunkHeader,
    ChunkType,
    chunk_end,
    logical_end,
)

__all__ = ["HEAD_SIZE", "TAIL_SIZE", "FileKind", "sniff"]

#: How many first bytes :func:`sniff` looks at (more are ignored).
HEAD_SIZE = 1 << 16
#: How many last bytes it uses to recognise an ArrayRecord file (its final block).
TAIL_SIZE = BLOCK_SIZE

# ArrayRecord's postscript record: field 2 (varint) = magic 0x71930e704fdae05e.
_ARRAY_RECORD_MAGIC = 0x71930E704FDAE05E
_COMPRESSION = {0: "uncompressed", 0x62: "brotli", 0x7A: "zstd", 0x73: "snappy"}
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


@dataclass(frozen=True)
class FileKind:
    """A file's format as far as its bytes tell.

    ``kind`` is a stable short name (``"tfrecord"``, ``"riegeli"``, ``"array_record"``,
    ``"gzip"``, ``"zlib"``, ``"parquet"``, ``"arrow"``, ``"hdf5"``, ``"npz"``, ``"npy"``,
    ``"zip"``, ``"json"``, ``"jsonl"``, ``"csv"``, ``"text"``, ``"empty"``, ``"unknown"``, ...);
    ``description`` says it in words for messages ("a Parquet file"); ``detail`` adds what
    else was seen, for Riegeli the kind of chunks ("transposed chunks", "zstd").
    """

    kind: str
    description: str
    detail: str = ""


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_POSTSCRIPT_MAGIC = b"\x10" + _varint(_ARRAY_RECORD_MAGIC)


def _riegeli_chunks(head: bytes) -> str:
    """What the first record-bearing chunk in ``head`` is: ``"transposed chunks"``, a
    compression name, or ``""`` when the head does not reach one."""
    begin = 64  # after the signature chunk
    for _ in range(64):
        header_end = logical_end(begin, CHUNK_HEADER_SIZE)
        if header_end > len(head) or begin // BLOCK_SIZE != (header_end - 1) // BLOCK_SIZE:
            return ""  # not in the head, or interrupted by a block header: stop guessing
        raw = head[begin:header_end] if begin % BLOCK_SIZE else head[begin + 24 : header_end]
        header = ChunkHeader.parse(raw)
        if header.chunk_type == ChunkType.TRANSPOSED and header.num_records:
            return "transposed chunks"
        if header.chunk_type == ChunkType.SIMPLE and header.num_records:
            data = header_end if header_end % BLOCK_SIZE else header_end + 24
            return _COMPRESSION.get(head[data], "") if data < len(head) else ""
        if header.chunk_type not in ChunkType.NAMES:
            return ""
        begin = chunk_end(begin, header)
    return ""


def _is_array_record(tail: bytes, size: int | None) -> bool:
    """An ArrayRecord postscript in the file's last block (whose start ``tail`` must be)."""
    if size is not None and size % BLOCK_SIZE:
        return False
    return _POSTSCRIPT_MAGIC in tail[: 64 + 256]


def _riegeli(head: bytes, tail: bytes, size: int | None) -> FileKind:
    chunks = _riegeli_chunks(head)
    array_record = bool(tail) and _is_array_record(tail, size)
    kind, name = (
        ("array_record", "an ArrayRecord file") if array_record else ("riegeli", "a Riegeli file")
    )
    if chunks == "transposed chunks":
        return FileKind(kind, f"{name} with transposed chunks", chunks)
    if chunks:
        return FileKind(kind, f"{name} ({chunks} simple chunks)", chunks)
    return FileKind(kind, name)


def _tfrecord(head: bytes, masked_crc32c: Callable[[bytes], int] | None) -> bool:
    if masked_crc32c is None or len(head) < 12:
        return False
    (stored,) = _U32.unpack_from(head, 8)
    return masked_crc32c(head[:8]) == int(stored)


def _text_kind(head: bytes) -> FileKind | None:
    cut = head[: HEAD_SIZE - 4]  # a multi-byte character may be cut at the end
    try:
        text = cut.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(cut) - 4:
            return None
        text = cut[: exc.start].decode("utf-8")
    if any(c in text for c in "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f\x10"):
        return None
    stripped = text.lstrip("\ufeff \t\r\n")
    lines = [line for line in text.splitlines()[:20] if line.strip()]
    if stripped[:1] in "{[" and stripped:
        if len(lines) > 1 and all(line.lstrip()[:1] == "{" for line in lines[:-1]):
            return FileKind("jsonl", "a JSON Lines text file")
        return FileKind("json", "a JSON text file")
    complete = lines[:-1] if len(lines) > 2 else lines
    for sep, name in ((",", "CSV"), ("\t", "TSV")):
        counts = {line.count(sep) for line in complete}
        if len(counts) == 1 and counts != {0}:
            return FileKind(name.lower(), f"a {name} text file")
    return FileKind("text", "a text file")


# (prefix, offset, kind, description): checked in order.
_MAGIC: tuple[tuple[bytes, int, str, str], ...] = (
    (b"PAR1", 0, "parquet", "a Parquet file"),
    (b"ARROW1", 0, "arrow", "an Apache Arrow IPC file (Feather v2)"),
    (b"FEA1", 0, "arrow", "a Feather v1 file"),
    (b"\x89HDF\r\n\x1a\n", 0, "hdf5", "an HDF5 file"),
    (b"\x93NUMPY", 0, "npy", "a NumPy .npy file"),
    (b"Obj\x01", 0, "avro", "an Avro object container file"),
    (b"ORC", 0, "orc", "an ORC file"),
    (b"BZh", 0, "bzip2", "a bzip2-compressed file"),
    (b"\xfd7zXZ\x00", 0, "xz", "an xz-compressed file"),
    (b"\x28\xb5\x2f\xfd", 0, "zstd", "a Zstandard-compressed file"),
    (b"\x04\x22\x4d\x18", 0, "lz4", "an LZ4-compressed file"),
    (b"\xff\xff\xff\xff", 0, "arrow", "an Apache Arrow IPC stream"),
    (b"ustar", 257, "tar", "a tar archive"),
)


def sniff(
    head: bytes,
    *,
    tail: bytes = b"",
    size: int | None = None,
    masked_crc32c: Callable[[bytes], int] | None = None,
) -> FileKind:
    """Name the format of a file from its first bytes (``head``, up to :data:`HEAD_SIZE`).

    ``tail`` (the file's last :data:`TAIL_SIZE` bytes, from a block boundary) and ``size``
    tell an ArrayRecord file from another Riegeli file.  ``masked_crc32c`` enables the TFRecord
    check (the first record's length CRC); without it a TFRecord file is ``"unknown"``.
    """
    head = head[:HEAD_SIZE]
    if not head:
        return FileKind("empty", "an empty file")
    if head[: len(FILE_SIGNATURE)] == FILE_SIGNATURE:
        return _riegeli(head, tail, size)
    if _tfrecord(head, masked_crc32c):
        return FileKind("tfrecord", "a TFRecord file")
    if head[:2] == b"\x1f\x8b":
        return FileKind("gzip", "a gzip-compressed file")
    if len(head) >= 2 and head[0] == 0x78 and ((head[0] << 8) | head[1]) % 31 == 0:
        return FileKind("zlib", "a zlib-compressed stream")
    for magic, offset, kind, description in _MAGIC:
        if head[offset : offset + len(magic)] == magic:
            return FileKind(kind, description)
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        (name_len,) = struct.unpack_from("<H", head, 26) if len(head) >= 30 else (0,)
        name = head[30 : 30 + name_len]
        if name.endswith(b".npy"):
            return FileKind("npz", "a NumPy .npz archive")
        return FileKind("zip", "a zip archive")
    if len(head) >= 8 and head[:1] == b"\x80" and head[1:2] in b"\x02\x03\x04\x05":
        return FileKind("pickle", "a Python pickle")
    text = _text_kind(head)
    if text is not None:
        return text
    shown = head[:8].hex(" ")
    return FileKind("unknown", f"a file of unknown format (it starts with bytes {shown})")

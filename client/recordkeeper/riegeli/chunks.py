"""Decoding the data of a simple Riegeli chunk into its records.

A simple chunk's data (format doc, "Simple chunk with records")::

    compression_type (1 byte) | compressed_sizes_size (varint64)
    | compressed_sizes | compressed_values

``compressed_sizes`` holds ``num_records`` varint64 record sizes, ``compressed_values`` the
records' bytes joined (``decoded_data_size`` bytes).  Each buffer is compressed on its own with
``compression_type``: 0 none, ``'b'`` Brotli, ``'z'`` Zstd, ``'s'`` Snappy; a compressed buffer
starts with its decompressed size as a varint64.

Errors raise :class:`ChunkDataError` (the reader adds the chunk's file offset); an installed
decompressor that is missing raises :class:`~recordkeeper.errors.UnsupportedFormat`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import accumulate

from recordkeeper import _native
from recordkeeper.core.errors import UnsupportedFormat

__all__ = ["COMPRESSION_NAMES", "ChunkDataError", "decode_simple_chunk", "read_varint"]

NONE, BROTLI, ZSTD, SNAPPY = 0, 0x62, 0x7A, 0x73
#: Compression type byte → name.
COMPRESSION_NAMES = {NONE: "none", BROTLI: "brotli", ZSTD: "zstd", SNAPPY: "snappy"}
#: Which distribution provides each decompressor (for the message when it is missing).
_PROVIDERS = {BROTLI: "cramjam", ZSTD: "zstandard", SNAPPY: "cramjam"}


class ChunkDataError(Exception):
    """Chunk data that does not decode; ``reason`` is a stable short code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def read_varint(buf: bytes | memoryview, pos: int, what: str) -> tuple[int, int]:
    """The varint64 at ``pos`` and the position after it."""
    if pos < len(buf) and buf[pos] < 0x80:  # one byte: most sizes and counts
        return buf[pos], pos + 1
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ChunkDataError(
                "bad_varint", f"{what}: the varint is cut off by the end of its buffer"
            )
        byte = buf[pos]
        pos += 1
        if shift == 63 and byte > 1:
            raise ChunkDataError("bad_varint", f"{what}: the varint does not fit in 64 bits")
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ChunkDataError("bad_varint", f"{what}: the varint is longer than 10 bytes")


def _decompressor(compression: int) -> Callable[[bytes | memoryview, int], bytes]:
    name = COMPRESSION_NAMES[compression]
    try:
        if compression == ZSTD:
            import zstandard

            local = threading.local()  # a decompressor is reusable, not shareable by threads

            def zstd(data: bytes | memoryview, size: int) -> bytes:
                decompressor = getattr(local, "decompressor", None)
                if decompressor is None:
                    decompressor = local.decompressor = zstandard.ZstdDecompressor()
                try:
                    # the decompressor allocates the size a frame header declares, whatever
                    # max_output_size says: more than the prefix is refused before that
                    declared = zstandard.get_frame_parameters(data).content_size
                except zstandard.ZstdError:
                    declared = zstandard.CONTENTSIZE_UNKNOWN  # decompress() says what is wrong
                if declared != zstandard.CONTENTSIZE_UNKNOWN and declared > size:
                    raise ChunkDataError(
                        "bad_compression",
                        f"zstd: the frame header says {declared} bytes, the prefix {size}",
                    )
                try:
                    return decompressor.decompress(data, max_output_size=size)
                except zstandard.ZstdError as exc:
                    raise ChunkDataError("bad_compression", f"zstd: {exc}") from None

            return zstd
        import cramjam

        # Into a buffer one byte longer than the prefix says, never more: a stream that
        # decompresses to more (a few hundred bytes of brotli can stand for gigabytes) stops
        # at the buffer's end with an error instead of growing without bound, and one that
        # fills the extra byte or falls short is caught by the length check.  Not
        # output_len=size: cramjam pads a shorter stream's output with zeros up to it.
        def brotli(data: bytes | memoryview, size: int) -> bytes:
            out = bytearray(size + 1)
            try:
                written = cramjam.brotli.decompress_into(data, out)
            except cramjam.DecompressionError as exc:
                raise ChunkDataError("bad_compression", f"brotli: {exc}") from None
            return _filled(out, written, size, "brotli")

        def snappy(data: bytes | memoryview, size: int) -> bytes:
            out = bytearray(size + 1)
            try:
                written = cramjam.snappy.decompress_raw_into(data, out)
            except cramjam.DecompressionError as exc:
                raise ChunkDataError("bad_compression", f"snappy: {exc}") from None
            return _filled(out, written, size, "snappy")

        return brotli if compression == BROTLI else snappy
    except ImportError:
        provider = _PROVIDERS[compression]
        raise UnsupportedFormat(
            f"a Riegeli file with {name}-compressed chunks: reading them needs the "
            f"{provider!r} package (pip install {provider})",
            format="riegeli",
            compression=name,
        ) from None


def _filled(out: bytearray, written: int, size: int, name: str) -> bytes:
    """The ``written`` bytes of ``out`` when they are exactly the ``size`` announced."""
    if written != size:
        more = "more than" if written > size else str(written)
        raise ChunkDataError(
            "bad_compression",
            f"{name}: the stream decompresses to {more} bytes, its prefix says {size}",
        )
    del out[size:]
    return bytes(out)


_DECOMPRESSORS: dict[int, Callable[[bytes | memoryview, int], bytes]] = {}


#: The most bytes one compressed byte can stand for, by compression: a zstd RLE block is 4
#: bytes (3 of header) for up to 128 KiB; a snappy copy is at least 3 bytes for at most 64
#: (21.3 measured on zeros); brotli's meta-blocks reach ~620,000 (16 MiB of zeros in 27 bytes),
#: so its bound is 2^21.  A size prefix beyond it for the stream's length is a lie, refused
#: before the buffer it would need is allocated.
_MOST_PER_BYTE = {ZSTD: 1 << 15, SNAPPY: 32, BROTLI: 1 << 21}


def _decompress(
    buf: bytes | memoryview, compression: int, what: str, most: int
) -> bytes | memoryview:
    """A buffer of a simple chunk decompressed: its size prefix, then the stream.  ``most``:
    the size the chunk header allows (the decompressor allocates what the prefix says, so a
    prefix beyond it, or beyond what the stream can hold, is refused before decompressing)."""
    if compression == NONE:
        return buf
    size, pos = read_varint(buf, 0, f"{what} (decompressed size)")
    name = COMPRESSION_NAMES[compression]
    if size > most:
        raise ChunkDataError(
            "bad_compression",
            f"{what}: the {name} stream's prefix says {size} bytes, the chunk header allows "
            f"at most {most}",
        )
    if size > (len(buf) - pos) * _MOST_PER_BYTE[compression]:
        raise ChunkDataError(
            "bad_compression",
            f"{what}: the {name} stream of {len(buf) - pos} bytes cannot hold the {size} bytes "
            "its prefix says",
        )
    decompress = _DECOMPRESSORS.get(compression)
    if decompress is None:
        decompress = _DECOMPRESSORS[compression] = _decompressor(compression)
    out = decompress(buf[pos:], size)
    if len(out) != size:
        raise ChunkDataError(
            "bad_compression",
            f"{what}: the {name} stream decompresses to {len(out)} bytes, its prefix says {size}",
        )
    return out


def _sizes(buf: bytes | memoryview, count: int) -> list[int]:
    """``count`` varint64s filling ``buf`` exactly."""
    if isinstance(buf, memoryview):
        buf = bytes(buf)
    if len(buf) == count and buf.isascii():  # every size below 128: one byte each
        return list(buf)
    sizes = []
    pos = 0
    for _ in range(count):
        size, pos = read_varint(buf, pos, "record sizes")
        sizes.append(size)
    if pos != len(buf):
        raise ChunkDataError(
            "record_count",
            f"record sizes: {len(buf) - pos} bytes are left after the {count} sizes the chunk "
            "header announces (the header's record count is wrong, or the sizes are corrupt)",
        )
    return sizes


def decode_simple_chunk(
    data: bytes | memoryview, num_records: int, decoded_data_size: int
) -> list[bytes]:
    """The records of a simple chunk, checked against the counts its header gives."""
    if not data:
        raise ChunkDataError("truncated", "the chunk data is empty (no compression type)")
    compression = data[0]
    if compression == NONE and num_records == 1 and len(data) > 2 and data[1] < 0x80:
        # one uncompressed record (ArrayRecord's group_size:1): its size, then its bytes
        values = data[2 + data[1] :]
        size, end = read_varint(data, 2, "record sizes")
        if end == 2 + data[1] and size == len(values) == decoded_data_size:
            return [bytes(values)]
    if compression not in COMPRESSION_NAMES:
        raise ChunkDataError(
            "bad_compression", f"unknown compression type {compression:#04x} in a simple chunk"
        )
    sizes_size, pos = read_varint(data, 1, "compressed sizes length")
    if pos + sizes_size > len(data):
        raise ChunkDataError(
            "truncated",
            f"the record sizes claim {sizes_size} bytes, the chunk data has {len(data) - pos} left",
        )
    sizes_buf = _decompress(
        data[pos : pos + sizes_size], compression, "record sizes", 10 * num_records
    )
    speedups = _native.speedups
    split = None if speedups is None else getattr(speedups, "riegeli_records", None)
    if split is not None:  # sizes decoded and records cut in C; on any error the code below
        try:  # finds it again and says what it is, in the same order
            values = _decompress(
                data[pos + sizes_size :], compression, "record values", decoded_data_size
            )
        except ChunkDataError:
            pass
        else:
            if len(values) == decoded_data_size:
                records: list[bytes] | None = split(sizes_buf, values, num_records)
                if records is not None:
                    return records
    try:
        sizes = _sizes(sizes_buf, num_records)
    except ChunkDataError as exc:
        if exc.reason != "bad_varint":
            raise
        raise ChunkDataError(
            "bad_varint" if len(sizes_buf) >= num_records else "record_count",
            f"{exc.message} (the chunk header announces {num_records} records, "
            f"the sizes buffer has {len(sizes_buf)} bytes)",
        ) from None
    values = _decompress(data[pos + sizes_size :], compression, "record values", decoded_data_size)
    total = sum(sizes)
    if total != decoded_data_size or len(values) != total:
        raise ChunkDataError(
            "decoded_size",
            f"the record sizes add up to {total} bytes, the values are {len(values)} bytes and "
            f"the chunk header says {decoded_data_size}",
        )
    if isinstance(values, memoryview):
        values = bytes(values)
    ends = list(accumulate(sizes))
    return [values[start:end] for start, end in zip([0, *ends[:-1]], ends, strict=True)]

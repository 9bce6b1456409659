"""Test helpers: tf.train.Example wire bytes without TensorFlow, and TFRecord files."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import crc32c


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    return _varint(tag << 3 | 2) + _varint(len(payload)) + payload


Values = Sequence[int] | Sequence[float] | Sequence[bytes]


def example_bytes(features: Mapping[str, Values]) -> bytes:
    """Serialize a ``tf.train.Example``: ints → int64_list, floats → float_list, bytes."""
    entries = b""
    for key, values in features.items():
        values = list(values)
        if values and isinstance(values[0], bytes):
            inner = b"".join(_field(1, v) for v in values)  # type: ignore[arg-type]
            feature = _field(1, inner)
        elif values and isinstance(values[0], float):
            packed = b"".join(struct.pack("<f", v) for v in values)  # type: ignore[arg-type]
            feature = _field(2, _field(1, packed))
        else:
            packed = b"".join(_varint(int(v)) for v in values)  # type: ignore[arg-type]
            feature = _field(3, _field(1, packed))
        entries += _field(1, _field(1, key.encode()) + _field(2, feature))
    return _field(1, entries)


def _masked(data: bytes) -> int:
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(records: Iterable[bytes]) -> bytes:
    """TFRecord framing of ``records`` (what tf.io.TFRecordWriter writes, uncompressed)."""
    out = bytearray()
    for rec in records:
        length = struct.pack("<Q", len(rec))
        out += length + struct.pack("<I", _masked(length)) + rec + struct.pack("<I", _masked(rec))
    return bytes(out)


def sample_examples(n: int, start: int = 0) -> list[bytes]:
    return [
        example_bytes({"label": [i % 10], "image": [b"img-%d" % i], "score": [i / 7.0]})
        for i in range(start, start + n)
    ]


def write_tfrecord(path: Path, records: Iterable[bytes], compression: str = "none") -> Path:
    data = frame(records)
    if compression == "gzip":
        data = gzip.compress(data)
    elif compression == "zlib":
        import zlib

        data = zlib.compress(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path

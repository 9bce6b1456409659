"""Minimal failing inputs of the fuzz harness, kept: each runs on every test run.

Add a case here whenever the harness (or a user's file) finds a disagreement, with a line on
what it broke.  ``python -m tests.fuzz.regressions OUT`` pickles what the engine says about
every case, for the check that runs it under ``RECORDKEEPER_PURE_PYTHON``.
"""

from __future__ import annotations

import gzip
import pickle
import sys
import zlib

from ._harness import engine, frame_header, framed

# Example{features: <a ten-byte length prefix of 2**64>}: C read the length as 0.
OVERLONG_LENGTH = bytes.fromhex("0a80808080808080808002")
MANY = [f"record {i}".encode() * 3 for i in range(300)]
SWAPPED_KINDS = [  # {"image/encoded": bytes, "`": float}, {"a": bytes, "image/encoded": float},
    # {"image/encoded": bytes, "a": float}: both "a" and "image/encoded" have two kinds
    b"\n\x1e\n\x13\n\rimage/encoded\x12\x02\n\x00\n\x07\n\x01`\x12\x02\x12\x00",
    b"\n\x1e\n\x07\n\x01a\x12\x02\n\x00\n\x13\n\rimage/encoded\x12\x02\x12\x00",
    b"\n\x1e\n\x13\n\rimage/encoded\x12\x02\n\x00\n\x07\n\x01a\x12\x02\x12\x00",
]


def _flip(data: bytes, at: int, bit: int = 0) -> bytes:
    return data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :]


CASES: dict[str, tuple[bytes, str]] = {
    # issue 14.1: C and Python disagreed on the schema (example vs opaque), by record order
    "overlong varint after an empty Example": (framed([b"", OVERLONG_LENGTH]), "none"),
    "overlong varint before an empty Example": (framed([OVERLONG_LENGTH, b""]), "none"),
    # issue 14.2: a valid-CRC header claiming 2**40 bytes; TensorFlow 2.21 segfaults on it
    "2**40 claimed, 2 bytes follow": (frame_header(1 << 40) + b"\0\0", "none"),
    "2**64-1 claimed after good records": (framed(MANY[:3]) + frame_header((1 << 64) - 1), "none"),
    "2**40 claimed inside gzip": (
        gzip.compress(frame_header(1 << 40) + b"x" * 100, mtime=0),
        "gzip",
    ),
    # issue 14.3: decompression errors lost every record decoded from the same chunk
    "zeros after a gzip member": (gzip.compress(framed(MANY), mtime=0) + b"\0" * 8, "gzip"),
    "data after a zlib stream": (zlib.compress(framed(MANY)) + b"\0" * 8, "zlib"),
    # found by the harness: the gzip trailer's CRC32 flipped after a good record (TensorFlow
    # yields nothing, the engine yields the record, whose own CRCs pass, then refuses)
    "gzip trailer CRC flipped": (_flip(gzip.compress(framed([b"\n\x00"]), mtime=0), 28), "gzip"),
    "gzip cut inside its trailer": (gzip.compress(framed(MANY), mtime=0)[:-3], "gzip"),
    # found by the harness: two features each with two kinds; C summarised the records in
    # another order and its SchemaConflict named the other feature
    "two conflicting features": (framed(SWAPPED_KINDS), "none"),
}

# TensorFlow 2.21 dies (SIGSEGV) reading these: no oracle for them.
TENSORFLOW_CRASHES = frozenset({"2**40 claimed, 2 bytes follow"})


def main(out: str) -> None:
    with open(out, "wb") as fh:
        pickle.dump({name: engine(data, comp) for name, (data, comp) in CASES.items()}, fh)


if __name__ == "__main__":
    main(sys.argv[1])

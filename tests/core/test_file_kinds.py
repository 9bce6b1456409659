"""core.file_kinds: what a file looks like from its bytes (pure rules, synthetic bytes)."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from recordkeeper.core.file_kinds import FileKind, sniff
from recordkeeper.core.riegeli import FILE_SIGNATURE


def _fake_crc(data: bytes) -> int:
    return sum(data) + 1  # any function: sniff only compares it with the stored value


def _tfrecord_head(length: int) -> bytes:
    header = length.to_bytes(8, "little")
    return header + _fake_crc(header).to_bytes(4, "little") + b"x" * length + bytes(4)


@pytest.mark.parametrize(
    ("head", "kind", "description"),
    [
        (b"", "empty", "an empty file"),
        (b"PAR1\x15\x04" + bytes(50), "parquet", "a Parquet file"),
        (b"ARROW1\x00\x00" + bytes(50), "arrow", "an Apache Arrow IPC file (Feather v2)"),
        (b"\x89HDF\r\n\x1a\n" + bytes(50), "hdf5", "an HDF5 file"),
        (b"\x93NUMPY\x01\x00" + bytes(50), "npy", "a NumPy .npy file"),
        (b"\x28\xb5\x2f\xfd" + bytes(20), "zstd", "a Zstandard-compressed file"),
        (b"BZh91AY&SY", "bzip2", "a bzip2-compressed file"),
        (gzip.compress(b"hello", mtime=0), "gzip", "a gzip-compressed file"),
        (zlib.compress(b"hello"), "zlib", "a zlib-compressed stream"),
        (json.dumps({"a": [1, 2]}).encode(), "json", "a JSON text file"),
        (b'{"a": 1}\n{"a": 2}\n{"a": 3}\n', "jsonl", "a JSON Lines text file"),
        (b"id,label,path\n1,cat,a.jpg\n2,dog,b.jpg\n3,cow,c", "csv", "a CSV text file"),
        (b"id\tlabel\n1\tcat\n2\tdog\n", "tsv", "a TSV text file"),
        (b"just some notes\nabout the data\n", "text", "a text file"),
        (bytes(257) + b"ustar\x0000" + bytes(200), "tar", "a tar archive"),
    ],
)
def test_formats_by_their_bytes(head: bytes, kind: str, description: str) -> None:
    found = sniff(head)
    assert (found.kind, found.description) == (kind, description)


def test_unknown_bytes_are_shown() -> None:
    found = sniff(bytes(range(200, 256)))
    assert found.kind == "unknown"
    assert "c8 c9 ca cb" in found.description


def test_tfrecord_needs_the_crc_function_and_a_matching_length_crc() -> None:
    head = _tfrecord_head(20)
    assert sniff(head, masked_crc32c=_fake_crc).kind == "tfrecord"
    assert sniff(head).kind != "tfrecord"  # without the CRC there is no telling
    damaged = head[:8] + b"\x00\x00\x00\x00" + head[12:]
    assert sniff(damaged, masked_crc32c=_fake_crc).kind != "tfrecord"


def test_riegeli_by_its_signature_and_what_its_first_chunk_is() -> None:
    assert sniff(FILE_SIGNATURE) == FileKind("riegeli", "a Riegeli file")
    assert sniff(FILE_SIGNATURE[:63]).kind != "riegeli"


def test_zip_and_npz() -> None:
    def local_header(name: bytes) -> bytes:
        return b"PK\x03\x04" + bytes(22) + len(name).to_bytes(2, "little") + bytes(2) + name

    assert sniff(local_header(b"x.npy")).kind == "npz"
    assert sniff(local_header(b"readme.txt")).kind == "zip"

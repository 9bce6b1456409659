"""Riegeli shards through the format seam: publish in place (detected by content), deep verify
naming the first bad offset for 8 kinds of damage, transposed chunks named, on local storage
with the real service app.  Files are hand-built from the published format
(tests/client/_riegeli_files.py); ArrayRecord files (real Riegeli files from the array-record
wheel) are covered in test_format_array_record.py."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

import recordkeeper as rk
from recordkeeper.core.errors import UnsupportedFormat
from recordkeeper.core.riegeli import ChunkType
from tests.client._records import frame
from tests.client._riegeli_files import Built, Chunk, build, flip, simple, varint
from tests.client.test_client_app import client, roots  # noqa: F401 (fixtures)

pytest.importorskip("fastapi")

_BIG = random.Random(23).randbytes(80_000)
RECORDS = [[b"a" * 1000], [_BIG], [b"z", b"y"]]


def good() -> Built:
    """Three chunks (zstd, none, brotli), the second spanning the block boundary at 65536."""
    return build([simple(RECORDS[0], "zstd"), simple(RECORDS[1]), simple(RECORDS[2], "brotli")])


def _bad_varint() -> tuple[bytes, int]:
    data = bytes([0]) + varint(3) + b"\x85\x80\x80" + b"hello"
    built = build([simple(RECORDS[0]), Chunk(ChunkType.SIMPLE, data, 1, 5)])
    return built.data, built.data_offset(1)


def _unknown_compression() -> tuple[bytes, int]:
    chunk = simple([b"hello"])
    chunk.data = b"x" + chunk.data[1:]
    built = build([simple(RECORDS[0]), chunk])
    return built.data, built.data_offset(1)


def _record_count() -> tuple[bytes, int]:
    chunk = simple([b"a", b"b", b"c"])
    chunk.num_records = 4
    built = build([simple(RECORDS[0]), chunk])
    return built.data, built.data_offset(1)


def _truncated() -> tuple[bytes, int]:
    built = good()
    return built.data[: built.chunk_offsets[1] + 5000], built.chunk_offsets[1]


DAMAGES: dict[str, Callable[[], tuple[bytes, int]]] = {
    "block_header": lambda: (flip(good().data, 65536 + 9), 65536),
    "chunk_header": lambda: (
        flip(good().data, good().chunk_offsets[1] + 30),
        good().chunk_offsets[1],
    ),
    "chunk_data": lambda: (flip(good().data, good().data_offset(1) + 20), good().data_offset(1)),
    "truncated": _truncated,
    "signature": lambda: (flip(good().data, 30), 30),
    "bad_varint": _bad_varint,
    "bad_compression": _unknown_compression,
    "record_count": _record_count,
}


def test_a_riegeli_file_publishes_with_the_tfrecord_digest(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
) -> None:
    data = roots[1]
    (data / "train.riegeli").write_bytes(good().data)
    v = client.publish(rk.Dataset.from_file(data / "train.riegeli", name="coco"), progress=False)
    (shard,) = v.shards
    assert (shard.format, shard.compression, shard.record_count) == ("riegeli", "none", 4)
    other = roots[0] / "same"
    other.mkdir()
    (other / "train.tfrecord").write_bytes(frame([r for chunk in RECORDS for r in chunk]))
    as_tfrecord = client.publish(
        rk.Dataset.from_file(other / "train.tfrecord", name="coco2"), progress=False
    )
    assert as_tfrecord.content_digest == v.content_digest
    assert v.verify(deep=True).ok and v.verify().ok
    with pytest.raises(UnsupportedFormat):
        v.record("train", 0)  # no index: read in order only


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_deep_verify_names_the_first_bad_offset(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
    damage: str,
) -> None:
    path = roots[1] / "train.riegeli"
    path.write_bytes(good().data)
    v = client.publish(rk.Dataset.from_file(path, name="coco"), progress=False)
    damaged, offset = DAMAGES[damage]()
    path.write_bytes(damaged)
    report = v.verify(deep=True)
    (problem,) = report.problems
    assert problem.reason == "corrupt", problem
    assert problem.offset == offset, problem.detail


def test_transposed_chunks_are_named_by_deep_verify(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
) -> None:
    path = roots[1] / "train.riegeli"
    path.write_bytes(good().data)
    v = client.publish(rk.Dataset.from_file(path, name="coco"), progress=False)
    built = build([simple(RECORDS[0]), Chunk(ChunkType.TRANSPOSED, b"\0" * 20, 3, 30)])
    path.write_bytes(built.data)
    (problem,) = v.verify(deep=True).problems
    assert problem.reason == "corrupt"
    assert "transposed chunks" in problem.detail
    assert problem.offset == built.chunk_offsets[1]


def test_publishing_transposed_chunks_is_refused_by_name(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
) -> None:
    path = roots[1] / "train.riegeli"
    path.write_bytes(build([Chunk(ChunkType.TRANSPOSED, b"\0" * 20, 3, 30)]).data)
    with pytest.raises(rk.InvalidInput, match="transposed chunks") as info:
        client.publish(rk.Dataset.from_file(path, name="coco"), progress=False)
    assert info.value.code == "unsupported_format"

"""Digests pinned before the record-format seam: TFRecord data keeps every value it had.

The records are built here from fixed bytes; the expected values were computed on main before
the seam (commit 21d9ca1) and must never change: ``records_sha256`` and ``content_digest`` are
what existing registrations hold.
"""

from __future__ import annotations

import gzip
import hashlib
import io
from pathlib import Path

import pytest

import recordkeeper as rk
from recordkeeper.tfrecord import TFRecordWriter, scan_shard
from tests.client._records import example_bytes, frame
from tests.client.test_client_app import client, roots  # noqa: F401 (fixtures)

pytest.importorskip("fastapi")


def fixed_records(n: int, salt: int = 0) -> list[bytes]:
    return [
        example_bytes(
            {
                "label": [(i * 7 + salt) % 10],
                "image": [bytes((i + salt + k) % 256 for k in range(i % 50 + 1))],
                "score": [float(i) / 4],
            }
        )
        for i in range(n)
    ]


PINNED_FRAMED_SHA256 = "33283df970961f54c1d69596cb8a010932836390140dc5a8acff4157cabdd642"
PINNED_CONTENT_DIGEST = "sha256:2cb9c4dd4daf7647ccb4ebd4afe4de0ffe437f3c9fe0205e6b4490fa08d9ee6e"
PINNED_PUBLISHED_DIGEST = "sha256:e3fb31fd767dd679be981e4144da6b36311292a99d58d5d37e8cc522cd8efcf9"
PINNED_PUBLISHED_SHARDS = {
    ("train", 0): "3dee23869ca84c5416d624aecf7fce7bdb2458d328305c636ffc6affe976fcd3",
    ("train", 1): "81aafcf3bc61bfc50b1f47c03938a6d70466484a3ec72c835f376e76b56bc2c8",
    ("validation", 0): "7e36923278d574a49a134029eb7aa42c4009f50f446db26a0122dd54e4c1ed70",
}


def test_the_writer_framing_and_its_digests_are_pinned() -> None:
    records = fixed_records(500)
    framed = frame(records)
    assert hashlib.sha256(framed).hexdigest() == PINNED_FRAMED_SHA256
    for compression in ("none", "gzip", "zlib"):
        out = io.BytesIO()
        with TFRecordWriter(out, compression=compression) as writer:
            writer.write_many(records)
        stats = writer.stats
        assert stats.records_sha256 == PINNED_FRAMED_SHA256, compression
        assert stats.record_count == 500
        again = scan_shard(io.BytesIO(out.getvalue()), compression)
        assert again.records_sha256 == PINNED_FRAMED_SHA256
        assert again.sha256 == stats.sha256 == hashlib.sha256(out.getvalue()).hexdigest()
    plain = io.BytesIO()
    with TFRecordWriter(plain) as writer:
        writer.write_many(records)
    assert plain.getvalue() == framed


def test_a_written_and_a_published_version_keep_their_content_digest(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
) -> None:
    with client.writer("coco", shard_size=4000, date="2026-11-01") as w:
        for i, record in enumerate(fixed_records(300)):
            w.write(record, split="train" if i % 5 else "validation")
    v = w.version
    assert v.content_digest == PINNED_CONTENT_DIGEST
    data = roots[1]
    (data / "train-00000-of-00002.tfrecord").write_bytes(frame(fixed_records(40, salt=1)))
    (data / "train-00001-of-00002.tfrecord.gz").write_bytes(
        gzip.compress(frame(fixed_records(60, salt=2)), mtime=0)
    )
    (data / "validation-00000-of-00001.tfrecord").write_bytes(frame(fixed_records(25, salt=3)))
    published = client.publish(rk.Dataset.from_directory(data, name="pets"), progress=False)
    assert published.content_digest == PINNED_PUBLISHED_DIGEST
    shards = {(s.split, s.index): s.records_sha256 for s in published.shards}
    assert shards == PINNED_PUBLISHED_SHARDS

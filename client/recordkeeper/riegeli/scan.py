"""Scanning a Riegeli/ArrayRecord file: what deep verification and publish need to know.

:func:`scan_riegeli` reads the file once and returns a
:class:`~recordkeeper.streaming.ShardStats` (sha256, CRC32C and size of the stored bytes;
record count; schema) whose ``records_sha256`` is the sha256 of the records in the canonical
framing (:func:`~recordkeeper.streaming.canonical_framing`, TFRecord's): the same records give
the same ``records_sha256`` as a TFRecord file, so a conversion between formats keeps the
content digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from crc32c import crc32c

from recordkeeper import _native
from recordkeeper.record_ids import RecordIds, native_ids
from recordkeeper.riegeli.reader import BinarySource, RiegeliInfo, RiegeliReader
from recordkeeper.schema_inference import SchemaInferencer
from recordkeeper.streaming import ShardStats, Worker, canonical_framing

__all__ = ["RiegeliScan", "canonical_framing", "scan_riegeli"]


@dataclass(frozen=True)
class RiegeliScan:
    """A scan's result: the shard's stats and what the file is (format, chunks, compressions)."""

    stats: ShardStats
    info: RiegeliInfo


def scan_riegeli(
    fileobj: BinarySource,
    *,
    infer_schema: bool = True,
    hash_in_background: bool = True,
    record_ids: RecordIds | None = None,
) -> RiegeliScan:
    """Read a Riegeli/records or ArrayRecord file, checking everything the format checks.

    Raises :class:`~recordkeeper.errors.CorruptShard` (with ``offset`` and ``reason``) for a
    damaged file and :class:`~recordkeeper.errors.UnsupportedFormat` for one it cannot decode
    (transposed chunks, not a Riegeli file).  The sha256 digests are computed on a helper
    thread unless ``hash_in_background=False`` (for callers that scan one file per core).
    ``record_ids`` gets every record's identity, batch by batch as the chunks decode.
    """
    stored = hashlib.sha256()
    records_hash = hashlib.sha256()
    crc = 0
    size = 0
    hasher = Worker(depth=4) if hash_in_background else None

    def hash_later(update: Callable[[bytes], None], data: bytes) -> None:
        if hasher is None:
            update(data)
        else:
            hasher.submit(update, data)

    def on_read(piece: bytes) -> None:
        nonlocal crc, size
        hash_later(stored.update, piece)
        crc = crc32c(piece, crc)
        size += len(piece)

    reader = RiegeliReader(fileobj, on_read=on_read)
    inferencer = SchemaInferencer() if infer_schema else None
    try:
        if reader.native:
            _scan_framed(reader, hash_later, records_hash.update, inferencer, record_ids)
        else:
            for batch in reader.batches():
                hash_later(records_hash.update, canonical_framing(batch))
                if record_ids is not None:
                    record_ids.add(batch)
                if inferencer is not None:
                    inferencer.add_many(batch)
    except BaseException:
        if hasher is not None:
            hasher.abandon()
        raise
    if hasher is not None:
        hasher.close()
    stats = ShardStats(
        sha256=stored.hexdigest(),
        crc32c=f"{crc:08x}",
        records_sha256=records_hash.hexdigest(),
        record_count=reader.info.record_count,
        size=size,
        compression="none",
        schema=None if inferencer is None else inferencer.result(),
        format=reader.info.format,
    )
    return RiegeliScan(stats, reader.info)


def _scan_framed(
    reader: RiegeliReader,
    hash_later: Callable[[Callable[[bytes], None], bytes], None],
    update: Callable[[bytes], None],
    inferencer: SchemaInferencer | None,
    record_ids: RecordIds | None,
) -> None:
    """The records as the C walk hands them over, in their canonical framing: hashed as they
    are, and given to schema inference and the record identities as a TFRecord scan gives
    them (``deframe_keys`` / ``deframe`` over the framed bytes, no Python object per record)."""
    speedups = _native.speedups
    assert speedups is not None
    direct = (
        record_ids is not None
        and native_ids()
        and getattr(record_ids, "_worker", None) is None  # not hashing on its own thread
    )
    ids = (record_ids.buffer, record_ids.width) if direct and record_ids is not None else ()
    for framed in reader.framed():
        hash_later(update, framed)
        if inferencer is not None:
            summary, slow, _, count, _ = speedups.deframe_keys(framed, 0, False, *ids)
            inferencer.add_summary(summary, slow, count=count)
        elif ids:
            speedups.deframe(framed, 0, False, False, *ids)
        if record_ids is not None and not ids:
            record_ids.add(speedups.deframe(framed, 0, False, True)[0])

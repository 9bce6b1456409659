"""Scanning a Riegeli/ArrayRecord file: what deep verification and publish need to know.

:func:`scan_riegeli` reads the file once and returns a :class:`~recordkeeper.tfrecord.ShardStats`
(sha256, CRC32C and size of the stored bytes; record count; schema) whose ``records_sha256`` is
the sha256 of the records in TFRecord framing (``uint64 length | masked crc32c(length) | data |
masked crc32c(data)``): the same records give the same ``records_sha256`` as a TFRecord file,
so a conversion between formats keeps the content digest.
"""

from __future__ import annotations

import hashlib
import struct
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from crc32c import crc32c

from recordkeeper import _native
from recordkeeper.riegeli.reader import BinarySource, RiegeliInfo, RiegeliReader
from recordkeeper.schema_inference import SchemaInferencer
from recordkeeper.tfrecord import ShardStats, masked_crc32c

__all__ = ["RiegeliScan", "canonical_framing", "scan_riegeli"]

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")


def canonical_framing(records: list[bytes]) -> bytes:
    """The records in TFRecord framing, joined (what ``records_sha256`` hashes)."""
    speedups = _native.speedups
    if speedups is not None:
        return bytes(speedups.frame(records))
    parts: list[bytes] = []
    for record in records:
        length = _LENGTH.pack(len(record))
        parts += (
            length,
            _CRC.pack(masked_crc32c(length)),
            record,
            _CRC.pack(masked_crc32c(record)),
        )
    return b"".join(parts)


@dataclass(frozen=True)
class RiegeliScan:
    """A scan's result: the shard's stats and what the file is (format, chunks, compressions)."""

    stats: ShardStats
    info: RiegeliInfo


class _Hasher:
    """Runs hash updates in order on one helper thread (sha256 releases the GIL), at most
    ``depth`` updates in flight, so they overlap with the decoding in the calling thread."""

    def __init__(self, depth: int = 4) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="recordkeeper-riegeli-hash")
        self._pending: deque[Future[None]] = deque()
        self._depth = depth

    def submit(self, update: Callable[[bytes], None], data: bytes) -> None:
        while len(self._pending) >= self._depth:
            self._pending.popleft().result()
        self._pending.append(self._pool.submit(update, data))

    def close(self) -> None:
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)


def scan_riegeli(
    fileobj: BinarySource, *, infer_schema: bool = True, hash_in_background: bool = True
) -> RiegeliScan:
    """Read a Riegeli/records or ArrayRecord file, checking everything the format checks.

    Raises :class:`~recordkeeper.errors.CorruptShard` (with ``offset`` and ``reason``) for a
    damaged file and :class:`~recordkeeper.errors.UnsupportedFormat` for one it cannot decode
    (transposed chunks, not a Riegeli file).  The sha256 digests are computed on a helper
    thread unless ``hash_in_background=False`` (for callers that scan one file per core).
    """
    stored = hashlib.sha256()
    records_hash = hashlib.sha256()
    crc = 0
    size = 0
    hasher = _Hasher() if hash_in_background else None

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
        for batch in reader.batches():
            hash_later(records_hash.update, canonical_framing(batch))
            if inferencer is not None:
                inferencer.add_many(batch)
    finally:
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
    )
    return RiegeliScan(stats, reader.info)

"""ArrayRecord files through the format seam: write, read, verify, publish, random access.

An ArrayRecord file (github.com/google/array_record) is a Riegeli file whose records are
grouped into chunks of ``group_size`` and indexed by a footer at the end.  Reading, scanning and
random access use recordkeeper's own reader (:mod:`recordkeeper.riegeli`), over any fsspec
file; writing uses the ``array-record`` wheel's writer
(``pip install 'recordkeeper[array_record]'``).

The wheel's writer writes to a local path only, so a shard is written to a local temporary
file first and then streamed to its destination (a local file or an upload), hashed on the
way: one extra local write and read per shard, which the page cache mostly absorbs.
``records_sha256`` is computed from the records themselves (their canonical framing) while they
are written, so it equals the TFRecord file's of the same records.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Any, ClassVar

from crc32c import crc32c

from recordkeeper.core.errors import CorruptShard, InvalidInput, UnsupportedFormat
from recordkeeper.core.file_kinds import sniff
from recordkeeper.core.riegeli import BLOCK_SIZE, ChunkType
from recordkeeper.formats import RandomAccess, ShardWriter
from recordkeeper.formats.riegeli import RiegeliFormat, looks_like_riegeli
from recordkeeper.riegeli.array_record import parse_footer, parse_postscript
from recordkeeper.riegeli.reader import read_chunk_at
from recordkeeper.schema_inference import SchemaInferencer
from recordkeeper.storage import open_read, storage_errors
from recordkeeper.streaming import BinarySink, ShardStats, Worker, canonical_framing
from recordkeeper.tfrecord import record_bytes

__all__ = ["ArrayRecordFormat", "ArrayRecordIndex", "ArrayRecordShardWriter", "writer_options"]

_COMPRESSIONS = ("uncompressed", "zstd", "brotli", "snappy")
_PIECE = 4 << 20  # the temporary file is streamed to the sink in pieces of this size


def writer_options(options: Mapping[str, Any] | None) -> str:
    """The ``array-record`` writer's options string from ``format_options``.

    ``group_size`` (records per chunk: 1 for the fastest random access, larger for better
    compression; the wheel's default is 65536), ``compression`` (``"zstd"``, ``"zstd:3"``,
    ``"brotli:6"``, ``"snappy"``, ``"uncompressed"``; default zstd), or ``options``: a raw
    options string passed as is.  ``transpose`` is refused: recordkeeper does not decode
    transposed chunks.
    """
    given = dict(options or {})
    raw = given.pop("options", None)
    parts: list[str] = []
    if raw is not None:
        if given:
            raise InvalidInput("format_options: give 'options' (a raw string) or the others")
        if "transpose:true" in str(raw).replace(" ", ""):
            raise InvalidInput("ArrayRecord shards with transposed chunks are not supported")
        return str(raw)
    group_size = given.pop("group_size", None)
    if group_size is not None:
        if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 1:
            raise InvalidInput(f"group_size must be a positive integer, not {group_size!r}")
        parts.append(f"group_size:{group_size}")
    compression = given.pop("compression", None)
    if compression is not None:
        name = str(compression).split(":", 1)[0]
        if name not in _COMPRESSIONS:
            raise InvalidInput(
                f"ArrayRecord compression must be one of {', '.join(_COMPRESSIONS)} "
                f"(optionally with a level, 'zstd:3'), not {compression!r}"
            )
        parts.append(str(compression))
    if given:
        raise InvalidInput(
            f"unknown ArrayRecord format options: {', '.join(sorted(given))} "
            "(known: group_size, compression, options)"
        )
    return ",".join(parts)


class ArrayRecordShardWriter:
    """One ArrayRecord shard: records written by the wheel's writer to a temporary file, then
    streamed to ``sink`` with its sha256/CRC32C; ``records_sha256`` and the schema from the
    records as they are written."""

    def __init__(
        self,
        sink: BinarySink,
        *,
        infer_schema: bool = True,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        try:
            from array_record.python.array_record_module import ArrayRecordWriter
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise UnsupportedFormat(
                "writing ArrayRecord shards needs the array-record package: "
                "pip install 'recordkeeper[array_record]'",
                format="array_record",
            ) from exc
        self._sink = sink
        self._options = writer_options(options)
        self._dir = tempfile.mkdtemp(prefix="recordkeeper-array-record-")
        self._path = os.path.join(self._dir, "shard.array_record")
        self._writer = ArrayRecordWriter(self._path, self._options)
        self._records = hashlib.sha256()
        self._worker = Worker(depth=4)
        self._inferencer = SchemaInferencer() if infer_schema else None
        self._count = 0
        self._stats: ShardStats | None = None

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def stats(self) -> ShardStats:
        if self._stats is None:
            raise RuntimeError("the writer is still open: close it first")
        return self._stats

    def write(self, record: Any) -> None:
        self._write_batch([record if type(record) is bytes else record_bytes(record)], 0)

    def write_many(self, records: Sequence[Any]) -> None:
        self._write_batch([r if type(r) is bytes else record_bytes(r) for r in records], 0)

    def _write_batch(self, batch: list[bytes], nbytes: int) -> None:
        write = self._writer.write
        for record in batch:
            write(record)
        self._count += len(batch)
        self._worker.submit(self._records.update, canonical_framing(batch))
        if self._inferencer is not None:
            self._inferencer.add_many(batch)

    def close(self) -> ShardStats:
        if self._stats is not None:
            return self._stats
        try:
            self._writer.close()
            self._worker.close()
            stored = hashlib.sha256()
            crc = size = 0
            with open(self._path, "rb") as fh:
                while piece := fh.read(_PIECE):
                    stored.update(piece)
                    crc = crc32c(piece, crc)
                    size += len(piece)
                    self._sink.write(piece)
            self._sink.flush()
        finally:
            self._cleanup()
        self._stats = ShardStats(
            sha256=stored.hexdigest(),
            crc32c=f"{crc:08x}",
            records_sha256=self._records.hexdigest(),
            record_count=self._count,
            size=size,
            compression="none",
            schema=None if self._inferencer is None else self._inferencer.result(),
            format="array_record",
        )
        return self._stats

    def abandon(self) -> None:
        self._worker.abandon()
        with contextlib.suppress(Exception):
            self._writer.close()
        self._cleanup()

    def _cleanup(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> ArrayRecordShardWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abandon()


class ArrayRecordIndex:
    """Random access to an ArrayRecord file's records through its footer index.

    Opening reads the postscript (the last block) and the footer; ``index[i]`` reads the one
    chunk holding record ``i`` (every hash of it checked; the last chunk read is kept).  Any
    seekable binary file works (local, S3, GCS through fsspec).
    """

    def __init__(self, fileobj: Any, size: int, *, uri: str = "") -> None:
        self._file = fileobj
        self._uri = uri
        last = ((size - 1) // BLOCK_SIZE) * BLOCK_SIZE if size else 0
        _, post = read_chunk_at(fileobj, last)
        footer_offset = parse_postscript(post)
        if footer_offset is None:
            raise CorruptShard(
                f"{uri or 'the file'} has no ArrayRecord postscript in its last block: not an "
                "ArrayRecord file, or its end is damaged",
                offset=last,
                reason="bad_index",
            )
        kind, footer = read_chunk_at(fileobj, footer_offset)
        if kind != ChunkType.SIMPLE:
            raise CorruptShard(
                f"the ArrayRecord postscript names a footer at {footer_offset}, which is not a "
                "simple chunk",
                offset=footer_offset,
                reason="bad_index",
            )
        from recordkeeper.riegeli.chunks import ChunkDataError

        try:
            self.metadata, self.entries = parse_footer(footer)
        except ChunkDataError as exc:
            raise CorruptShard(
                f"the ArrayRecord footer: {exc.message}", offset=footer_offset, reason=exc.reason
            ) from None
        self._starts = [0, *accumulate(e.num_records for e in self.entries)]
        self._cached: tuple[int, list[bytes]] | None = None

    def __len__(self) -> int:
        return self._starts[-1]

    def _chunk(self, k: int) -> list[bytes]:
        if self._cached is not None and self._cached[0] == k:
            return self._cached[1]
        entry = self.entries[k]
        _, records = read_chunk_at(self._file, entry.chunk_offset)
        if len(records) != entry.num_records:
            raise CorruptShard(
                f"the chunk at {entry.chunk_offset} holds {len(records)} records, the "
                f"ArrayRecord index says {entry.num_records}",
                offset=entry.chunk_offset,
                reason="bad_index",
            )
        self._cached = (k, records)
        return records

    def __getitem__(self, index: int) -> bytes:
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"record {index} is out of range: the shard holds {n} records")
        k = bisect.bisect_right(self._starts, index) - 1
        return self._chunk(k)[index - self._starts[k]]

    def read(self, indices: Sequence[int]) -> list[bytes]:
        return [self[i] for i in indices]

    def close(self) -> None:
        self._file.close()


class ArrayRecordFormat(RiegeliFormat):
    """ArrayRecord: a Riegeli file with a chunk index at its end; random access by position."""

    name: ClassVar[str] = "array_record"
    description: ClassVar[str] = "ArrayRecord"
    suffix: ClassVar[str] = ".array_record"
    writable: ClassVar[bool] = True
    random_access: ClassVar[bool] = True

    def detect(self, head: bytes, *, tail: bytes = b"", size: int | None = None) -> str | None:
        if not tail or not looks_like_riegeli(head):
            return None
        return "none" if sniff(head, tail=tail, size=size).kind == "array_record" else None

    def check_options(self, options: Mapping[str, Any] | None) -> None:
        writer_options(options)

    def open_writer(
        self,
        sink: BinarySink,
        compression: str | None = None,
        *,
        infer_schema: bool = True,
        options: Mapping[str, Any] | None = None,
    ) -> ShardWriter:
        self.check_compression(compression)
        return ArrayRecordShardWriter(sink, infer_schema=infer_schema, options=options)

    def open_random_access(
        self, uri: str, storage_options: Mapping[str, Any] | None = None
    ) -> RandomAccess:
        fh = open_read(uri, storage_options)
        try:
            with storage_errors(uri):
                size = getattr(fh, "size", None)
                if not isinstance(size, int):
                    size = fh.seek(0, os.SEEK_END)
                return ArrayRecordIndex(fh, size, uri=uri)
        except BaseException:
            fh.close()
            raise

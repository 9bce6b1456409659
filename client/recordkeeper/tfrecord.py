"""TFRecord files without TensorFlow: write, read, verify and describe shards.

Framing of each record (all little-endian)::

    uint64 length | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)

with ``masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8  (mod 2**32)``.  GZIP and ZLIB
compress the whole file stream, not each record.  Uncompressed output is byte-identical to
``tf.io.TFRecordWriter``'s; compressed output is read by ``tf.data.TFRecordDataset``.

:class:`TFRecordWriter` computes a shard's :class:`ShardStats` while the bytes stream out (sha256
and CRC32C of the stored bytes, sha256 of the uncompressed record stream, record count, size and
the inferred :class:`~recordkeeper.core.schema.Schema`); :func:`scan_shard` computes the same from
an existing file, checking every record CRC on the way.  Both batch records so that per-record
work happens in C, and hash, compress and do I/O on a background thread (those release the GIL).
The format-neutral parts (the digests, the worker, sources and sinks, :class:`ShardStats`) live
in :mod:`recordkeeper.streaming`, shared with the other formats; this module is TFRecord's
framing and compression.  Other modules reach it through :mod:`recordkeeper.formats`.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import struct
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from types import TracebackType
from typing import IO, Any

from crc32c import crc32c

from recordkeeper import _native
from recordkeeper.core.errors import CorruptShard, InvalidInput
from recordkeeper.core.schema import Schema
from recordkeeper.core.shards import COMPRESSIONS, Compression
from recordkeeper.record_ids import RecordIds, native_ids
from recordkeeper.schema_inference import SchemaInferencer
from recordkeeper.streaming import _FILE_WRITE as _FILE_WRITE
from recordkeeper.streaming import (
    READ_INTO_SIZE,
    READ_SIZE,
    BinarySink,
    BinarySource,
    Bytes,
    Digests,
    ShardStats,
    Worker,
    chunks_into,
    masked_crc32c,
    record_bytes,
    source_size,
    stored_chunks,
    write_fd,
)

__all__ = [
    "Compression",
    "ShardStats",
    "TFRecordWriter",
    "compression_from_suffix",
    "detect_compression",
    "iter_records",
    "masked_crc32c",
    "normalize_compression",
    "record_bytes",
    "scan_shard",
    "source_size",
    "write_fd",
]

_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF
_HEADER = struct.Struct("<QI")
_U32LE = struct.Struct("<I")
_BATCH_BYTES = 1 << 20  # records are framed and parsed in batches of about this size ...
_STORE_BYTES = 8 << 20  # ... and hashed, compressed and written in batches of this size
_FIRST_BUFFER = 64 << 10  # a shard's first framing buffer; each new one doubles, to _STORE_BYTES
# Sinks whose write() copies (or writes out) the bytes before returning: the framing buffers
# handed to them are reused.  Others may keep what they were given; they get fresh buffers.
_COPYING_SINKS = (io.BufferedWriter, io.BufferedRandom, io.FileIO, io.BytesIO)
_READ_SIZE = READ_SIZE  # read at call time: tests make it small
_READ_INTO_SIZE = READ_INTO_SIZE  # scan_shard's reused buffer
_WBITS = {"gzip": 31, "zlib": 15}  # zlib window bits selecting the container format
_MEM_LEVEL = 9  # TensorFlow's: with the same zlib, gzip/zlib output matches its byte for byte
_MAX_INFLATE_RATIO = 1032  # deflate's limit: a 258-byte match costs at least a 2-bit code
_INFLATE_SLACK = 1 << 16  # output the inflater may still owe for input it has consumed
_INFLATE_OUT = 8 << 20  # at most this much output per decompression step
_LOCATE_STEP = 4096  # on a decompression error, the step is inflated again in pieces this big
_ADD_16 = (16).__add__
_ADD_4 = (4).__add__
#: A frame claiming more than this is not gathered in memory when the stream's size is unknown
#: (its claim cannot be checked before its bytes arrive): its data is CRC-checked as it streams
#: by, or, where the record itself is wanted, refused.
_UNSIZED_FRAME_MAX = 64 << 20


def _masked_all(crcs: list[int]) -> array[int]:
    """``masked(crc)`` for each of ``crcs``, with the rotate and add done in C for all at once.

    The CRCs go into the 64-bit lanes of one big integer; no lane overflows into the next, as a
    32-bit value plus the delta stays below 2**33.  The low 32 bits of each lane are the result.
    """
    n = len(crcs)
    lo17, hi15, delta, lo32 = _lane_constants(n)
    x = int.from_bytes(array("Q", crcs).tobytes(), sys.byteorder)
    x = ((((x >> 15) & lo17) | ((x << 17) & hi15)) + delta) & lo32
    words = array("I", x.to_bytes(8 * n, sys.byteorder))
    return words[::2] if sys.byteorder == "little" else words[1::2]


@functools.lru_cache(maxsize=16)
def _lane_constants(n: int) -> tuple[int, int, int, int]:
    def lanes(value: int) -> int:
        return int.from_bytes(array("Q", [value]).tobytes() * n, sys.byteorder)

    return lanes((1 << 17) - 1), lanes(_U32 ^ ((1 << 17) - 1)), lanes(_MASK_DELTA), lanes(_U32)


class _Headers(dict[int, bytes]):
    """length -> the 12 header bytes framing a record of that length (computed once)."""

    def __missing__(self, n: int) -> bytes:
        if len(self) > 1 << 16:
            self.clear()
        length = n.to_bytes(8, "little")
        header = self[n] = length + _U32LE.pack(masked_crc32c(length))
        return header


def normalize_compression(compression: str | None) -> Compression:
    """Map ``None``, ``""``, ``"GZIP"``, ``"gz"``, ``"zlib"``, ... to ``none``, ``gzip`` or
    ``zlib`` (TensorFlow spells them ``""``, ``"GZIP"``, ``"ZLIB"``)."""
    value = (compression or "none").lower()
    value = "gzip" if value == "gz" else value
    if value not in COMPRESSIONS:
        raise InvalidInput(f"compression must be none, gzip or zlib, not {compression!r}")
    return value  # type: ignore[return-value]


def compression_from_suffix(path: str | os.PathLike[str]) -> Compression | None:
    """The compression a file name suggests (``.gz`` gzip, ``.zz``/``.zlib`` zlib), else None."""
    name = os.fspath(path).lower()
    if name.endswith((".gz", ".gzip")):
        return "gzip"
    if name.endswith((".zz", ".zlib")):
        return "zlib"
    return None


def detect_compression(first_bytes: bytes) -> Compression | None:
    """Guess a shard's compression from its first bytes (at least 12 are needed for ``none``).

    A valid TFRecord header wins (its CRC makes a false positive practically impossible), then
    the gzip magic ``1f 8b``, then a zlib header (deflate method, ``CMF*256+FLG`` divisible by
    31).  An empty file is ``none``; anything else is None (not a TFRecord shard we know).
    """
    if not first_bytes:
        return "none"
    if len(first_bytes) >= 12:
        _, length_crc = _HEADER.unpack_from(first_bytes)
        if masked_crc32c(first_bytes[:8]) == length_crc:
            return "none"
    if first_bytes[:2] == b"\x1f\x8b":
        return "gzip"
    if len(first_bytes) >= 2:
        cmf, flg = first_bytes[0], first_bytes[1]
        if cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf << 8 | flg) % 31 == 0:
            return "zlib"
    return None


class TFRecordWriter:
    """Write TFRecord framing to a binary file object (or a local path) and describe the shard.

    >>> with TFRecordWriter(fileobj, compression="gzip") as writer:
    ...     for record in records:
    ...         writer.write(record)
    >>> writer.stats.records_sha256, writer.stats.schema

    A file object (e.g. from ``fsspec.open(url, "wb")``) stays open, the caller closes it; a
    path is opened and closed by the writer.  Records are buffered and written in batches of
    about a megabyte.  With ``infer_schema`` (the default) the stats carry the records' schema;
    if a feature has two kinds, :meth:`close` finishes the file and then raises
    :class:`~recordkeeper.errors.SchemaConflict`.  ``compression_level`` (zlib's 0-9, default 6
    like TensorFlow) applies to gzip and zlib.
    """

    def __init__(
        self,
        fileobj: BinarySink | str | os.PathLike[str],
        compression: str | None = None,
        *,
        infer_schema: bool = True,
        compression_level: int = zlib.Z_DEFAULT_COMPRESSION,
    ) -> None:
        self.compression = normalize_compression(compression)
        self._file: BinarySink
        self._owned: IO[bytes] | None = None
        self._fd: int | None = None  # a file of its own is written through its descriptor
        if isinstance(fileobj, str | os.PathLike):
            self._file = self._owned = open(fileobj, "wb", buffering=0)  # noqa: SIM115 - closed by close()
            self._fd = self._owned.fileno()
        else:
            self._file = fileobj
        self._compressor = (
            None
            if self.compression == "none"
            else zlib.compressobj(
                compression_level, zlib.DEFLATED, _WBITS[self.compression], _MEM_LEVEL
            )
        )
        # Uncompressed, the stored bytes are the framed ones: their CRC32C is computed where
        # they are framed (in C, while each frame is in the cache), not by the worker.
        self._crc: int | None = 0 if self.compression == "none" else None
        self._digests = Digests(self.compression, crc=self._crc is None)
        self._inferencer = SchemaInferencer() if infer_schema else None
        self._headers = _Headers()
        self._batch: list[bytes] = []
        self._batch_bytes = 0
        self._framed: list[bytes] = []  # the pure-Python path's framed batches
        self._framed_bytes = 0
        self._buffer: bytearray | None = None  # the C path frames into reused buffers
        self._used = 0
        self._capacity = _FIRST_BUFFER // 2
        self._free: list[bytearray] = []  # buffers the worker is done with
        self._reuse = type(self._file) in _COPYING_SINKS or (
            getattr(self._file, "copies_writes", False) is True
        )
        self._count = 0
        self._worker = Worker()
        self._stats: ShardStats | None = None
        self._ids: RecordIds | None = None  # see hash_records_into

    def hash_records_into(self, ids: RecordIds) -> bool:
        """Have every record written from now on hashed into ``ids`` (kind ``bytes``) in the
        C loop that frames it, while it is in the cache; ``False`` (nothing changed) where the
        C identities are not built: the caller then hashes the records itself."""
        if not native_ids():
            return False
        self._ids = ids
        return True

    @property
    def record_count(self) -> int:
        """Records written so far."""
        return self._count + len(self._batch)

    @property
    def stats(self) -> ShardStats:
        """The shard's stats; available once the writer is closed."""
        if self._stats is None:
            raise RuntimeError("the writer is still open: close it first")
        return self._stats

    def write(self, record: bytes) -> None:
        """Append one record (``bytes``, another buffer, or a message with SerializeToString)."""
        if type(record) is not bytes:
            record = record_bytes(record)
        self._batch.append(record)
        self._batch_bytes += len(record)
        if self._batch_bytes >= _BATCH_BYTES:
            self._flush_batch()

    def write_many(self, records: Iterable[Any]) -> None:
        """Append records in order, each as :meth:`write` takes it: one call for a batch."""
        batch = [r if type(r) is bytes else record_bytes(r) for r in records]
        self._batch += batch
        self._batch_bytes += sum(map(len, batch))
        if self._batch_bytes >= _BATCH_BYTES:
            self._flush_batch()

    def _write_batch(self, batch: list[bytes], nbytes: int) -> None:
        """Frame a batch now: ``bytes`` records (not checked: internal) whose lengths sum to
        ``nbytes``.

        For callers that collect their own batches (:class:`~recordkeeper.writer.VersionWriter`
        hands over ~1 MiB at a time): no pass over the records to check or measure them.
        """
        if self._batch:
            self._batch += batch
            self._batch_bytes += nbytes
        else:
            self._batch, self._batch_bytes = batch, nbytes
        self._flush_batch()

    def _flush_batch(self) -> None:
        batch = self._batch
        self._batch = []
        size = self._batch_bytes + 16 * len(batch)  # framed
        self._batch_bytes = 0
        self._count += len(batch)
        speedups = _native.speedups
        inferencer = self._inferencer
        # (the two paths keep their framed bytes apart: what the other holds is stored first)
        if speedups is None:
            self._store_buffer()
            if self._ids is not None:
                self._ids.add(batch)
            headers = map(self._headers.__getitem__, map(len, batch))
            footers = map(_U32LE.pack, _masked_all(list(map(crc32c, batch))))
            framed = b"".join(chain.from_iterable(zip(headers, batch, footers, strict=True)))
            if self._crc is not None:
                self._crc = crc32c(framed, self._crc)
            self._framed.append(framed)
            self._framed_bytes += len(framed)
            if self._framed_bytes >= _STORE_BYTES:
                self._store_framed()
            if inferencer is not None:
                inferencer.add_many(batch)
            return
        if self._framed:
            self._store_framed()
        ids = self._ids
        if size > _STORE_BYTES:  # bigger than a buffer: framed on its own, after the buffered
            self._store_buffer()
            if ids is not None:
                ids.add(batch)
            framed = speedups.frame(batch)
            if self._crc is not None:
                self._crc = crc32c(framed, self._crc)
            self._worker.submit(self._store, [framed])
            if inferencer is not None:
                inferencer.add_many(batch)
            return
        # Framing, CRCs and the records' structure keys in one pass in C, without the GIL,
        # into a buffer of ~8 MiB that the worker hashes and writes with few calls (each of
        # which must take the GIL back from this thread when it returns).
        if self._buffer is not None and self._used + size > len(self._buffer):
            self._store_buffer()
        if self._buffer is None:
            self._buffer = self._new_buffer(size)
        self._used, crc, summary, slow = speedups.frame_into(
            batch,
            self._buffer,
            self._used,
            inferencer is not None,
            self._crc or 0,
            *(() if ids is None else (ids.buffer, ids.width)),
        )
        if self._crc is not None:
            self._crc = crc
        if inferencer is not None:
            inferencer.add_summary(
                {key: (batch[first], n) for key, (first, n) in summary.items()},
                [batch[i] for i in slow],
                count=len(batch),
            )

    def _new_buffer(self, size: int) -> bytearray:
        """A framing buffer with room for ``size`` bytes: one the worker is done with, or a new
        one (twice the last new one's size, up to ``_STORE_BYTES``: small shards stay small)."""
        while self._free:
            buffer = self._free.pop()
            if len(buffer) >= size:
                return buffer
        self._capacity = min(_STORE_BYTES, max(size, 2 * self._capacity))
        return bytearray(self._capacity)

    def _store_buffer(self) -> None:
        """Hand the framing buffer to the worker."""
        buffer, used = self._buffer, self._used
        self._buffer, self._used = None, 0
        if buffer is not None and used:
            self._worker.submit(self._store_from, buffer, used)

    def _store_from(self, buffer: bytearray, used: int) -> None:
        """On the worker: store the first ``used`` bytes of a framing buffer, and give the
        buffer back for reuse when the sink does not keep what it is given."""
        if not self._reuse:
            del buffer[used:]
            self._store([buffer])
            return
        with memoryview(buffer) as whole, whole[:used] as view:
            self._store([view])
        self._free.append(buffer)

    def _store_framed(self) -> None:
        framed = self._framed
        self._framed = []
        self._framed_bytes = 0
        self._worker.submit(self._store, framed)

    def _store(self, pieces: list[Bytes]) -> None:
        """On the worker: hash, compress and write framed records (~1-8 MiB pieces, not
        joined: joining would copy every byte once more)."""
        for framed in pieces:
            stored = framed if self._compressor is None else self._compressor.compress(framed)
            self._digests.add(stored, framed)
            if stored:
                self._write(stored)

    def _write(self, stored: Bytes) -> None:
        if self._fd is not None:
            write_fd(self._fd, stored)
        else:
            self._file.write(stored)

    def _finish(self) -> None:
        """On the worker: end the compressed stream and flush the file."""
        if self._compressor is not None:
            stored = self._compressor.flush()
            self._digests.add(stored)
            self._write(stored)
        self._file.flush()

    def close(self) -> ShardStats:
        """Write what is buffered, finish the stream and return the :class:`ShardStats`."""
        if self._stats is not None:
            return self._stats
        try:
            if self._batch:
                self._flush_batch()
            self._store_buffer()
            self._store_framed()
            self._worker.submit(self._finish)
            self._worker.close()
        finally:
            if self._owned is not None:
                self._owned.close()
        schema = None if self._inferencer is None else self._inferencer.result()
        if self._crc is not None:
            self._digests.crc = self._crc
        self._stats = self._digests.stats(self._count, schema)
        return self._stats

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:  # don't mask the error with one from closing; release the resources
            self._worker.abandon()
            if self._owned is not None:
                self._owned.close()


# --------------------------------------------------------------------------- reading


class _InflateError(Exception):
    """A stored stream that does not decompress: what decoded before the bad byte, and where."""

    def __init__(self, decoded: bytes, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.decoded = decoded
        self.offset = offset  # of the first stored byte that does not decompress
        self.reason = reason


class _Inflater:
    """Decompresses a stored stream chunk by chunk; gzip may hold several members.

    Each chunk's output comes in pieces of at most ``_INFLATE_OUT`` bytes: a small chunk of a
    very repetitive (or hostile) stream can inflate to gigabytes, which are never held at once.

    zlib raises without returning what it decoded before an error, so on an error the failing
    step is inflated again from a copy of the state before it, piece by piece and then byte by
    byte: the :class:`_InflateError` carries every byte decoded before the bad one, and its
    offset in the stored stream.  Only the error path pays for this (one state copy per step
    otherwise).
    """

    def __init__(self, compression: Compression) -> None:
        self._wbits = _WBITS[compression]
        self._compression = compression
        self._inflater = zlib.decompressobj(self._wbits)
        self.done = False  # the last member ended exactly at the end of the input so far
        self.consumed = 0  # stored bytes inflated so far
        self._member = (0, 0)  # the current member's stored offset, and its output so far

    def __call__(self, data: bytes | memoryview) -> Iterator[bytes]:
        """The output of ``data`` (the next stored bytes), in pieces."""
        while data:
            saved = self._save()
            try:
                out, data = self._step(data, _INFLATE_OUT)
            except zlib.error:
                self._restore(saved)
                self._locate(data)  # raises _InflateError
                return  # not reached: zlib fails the same however the input is split
            if out:
                yield out

    def _save(self) -> tuple[Any, bool, int, tuple[int, int]]:
        return self._inflater.copy(), self.done, self.consumed, self._member

    def _restore(self, saved: tuple[Any, bool, int, tuple[int, int]]) -> None:
        self._inflater, self.done, self.consumed, self._member = saved

    def _step(self, data: bytes | memoryview, limit: int) -> tuple[bytes, bytes]:
        """Inflate the start of ``data`` into at most ``limit`` bytes (0: no limit); return
        the output and the input left over."""
        inflater = self._inflater
        out = inflater.decompress(data, limit)
        self._member = (self._member[0], self._member[1] + len(out))
        self.done = inflater.eof
        rest = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
        self.consumed += len(data) - len(rest)
        if rest and inflater.eof:  # another member follows (gzip), or garbage does
            if self._compression != "gzip":
                raise zlib.error("data after the end of the zlib stream")
            self._inflater = zlib.decompressobj(self._wbits)
            self._member = (self.consumed, 0)
            self.done = False
        elif rest and not out:
            raise zlib.error("no progress")  # never seen; guards the loop
        return out, rest

    def _locate(self, data: bytes | memoryview) -> None:
        """Inflate ``data`` again in small pieces; raise :class:`_InflateError` at the bad byte
        (or, for a gzip member whose header is refused, at the member's first byte)."""
        parts = []
        pos, step = 0, _LOCATE_STEP
        while pos < len(data):
            piece = data[pos : pos + step]
            saved = self._save()
            try:
                while piece:
                    out, piece = self._step(piece, 0)
                    parts.append(out)
            except zlib.error as exc:
                if step == 1:
                    at = self.consumed
                    start, produced = self._member
                    if produced == 0 and "header" in str(exc):
                        at = min(at, start)
                    raise _InflateError(b"".join(parts), at, str(exc)) from None
                self._restore(saved)
                step = 1
                continue
            pos += step
        raise _InflateError(b"".join(parts), self.consumed, "zlib failed only on a whole chunk")


class _Deframer:
    """Splits an uncompressed TFRecord stream, fed in chunks, into records; checks CRCs.

    With ``copy=False`` the records are only checked and counted (``count``), never copied:
    for deep verification.  The hot loop allocates no objects the garbage collector tracks
    (bytes and ints only), so a big heap (TensorFlow's, say) is not rescanned over and over.
    """

    def __init__(
        self,
        verify_crc: bool,
        copy: bool = True,
        inferencer: SchemaInferencer | None = None,
        ids: RecordIds | None = None,
    ) -> None:
        self.verify_crc = verify_crc
        self.copy = copy
        # Each good record's identity goes to ``ids`` (in C: hashed in the CRC loop).
        self.ids = ids
        # With the C fast paths and no copies, records go straight into this inferencer.
        self.inferencer = inferencer
        self.count = 0  # records completed so far
        self.offset = 0  # uncompressed offset of the first frame not yet complete
        self._carry: list[bytes] = []  # the start of that frame; carry[0] holds its header
        self._carry_len = 0
        self._lengths: dict[bytes, int] = {}  # 12 header bytes -> length, once checked
        self.error: CorruptShard | None = None  # the first bad frame, once found
        # The greatest uncompressed offset the stream can reach, when the caller knows it: a
        # frame claiming to end beyond it is corrupt, found before its bytes are gathered.
        self.limit: int | None = None
        # A frame too big to gather while the limit is unknown: (data length, CRC so far,
        # CRC bytes seen); carry[0] keeps its header only, carry_len counts what streamed by.
        self._streaming: tuple[int, int, bytes] | None = None

    def feed(self, chunk: bytes | memoryview) -> list[bytes]:
        """The records completed by ``chunk`` (none unless ``copy``); on a bad frame, the good
        ones before it, and ``error`` is set: the caller raises it once it has used those.

        ``chunk`` may be a view of a buffer the caller reuses: nothing keeps it after the call."""
        records: list[bytes] = []
        if self._streaming is not None:
            pos = self._stream_carry(chunk)
        else:
            pos = self._complete_carry(chunk, records) if self._carry else 0
        if pos < len(chunk) and self.error is None:
            pos = self._split(chunk, pos, records)
            if pos < len(chunk):  # a copy: the chunk may be a view of a reused buffer
                self._carry, self._carry_len = [bytes(chunk[pos:])], len(chunk) - pos
                if self._carry_len >= 12 and self.error is None:
                    try:
                        self._claim(chunk, pos, self.offset)
                    except CorruptShard as exc:
                        self.error = exc
        return records

    def _complete_carry(self, chunk: bytes | memoryview, records: list[bytes]) -> int:
        """Finish the carried frame from the start of ``chunk``; return how much it took."""
        taken = 0
        if self._carry_len < 12:  # first gather the header in one piece
            head = b"".join(self._carry) + chunk[: 12 - self._carry_len]
            taken = len(head) - self._carry_len
            self._carry, self._carry_len = [head], len(head)
            if len(head) < 12:
                return taken
        length = self._claim(self._carry[0], 0, self.offset)
        need = 16 + length - self._carry_len
        if len(chunk) - taken < need:
            if self.limit is None and length > _UNSIZED_FRAME_MAX:
                return taken + self._start_streaming(length, chunk[taken:])
            self._carry.append(bytes(chunk[taken:]))
            self._carry_len += len(chunk) - taken
            return len(chunk)
        frame = b"".join([*self._carry, chunk[taken : taken + need]])
        self._carry, self._carry_len = [], 0
        self._split(frame, 0, records)
        return taken + need

    def _start_streaming(self, length: int, rest: bytes | memoryview) -> int:
        """Go on with the carried frame (claiming ``length`` data bytes, more than may be held
        while the stream's size is unknown) without gathering it; return what ``rest`` gave.

        A lying header would otherwise have the rest of the stream buffered.  Only checking
        needs no record: where the records are wanted, such a frame is refused as corrupt.
        """
        if self.copy or self.inferencer is not None or self.ids is not None:
            raise CorruptShard(
                f"record at offset {self.offset} claims {length} data bytes, more than the "
                f"{_UNSIZED_FRAME_MAX >> 20} MiB read from a source whose size is unknown; the "
                "shard is corrupt, or its size must be known (a file, an fsspec file, a "
                "seekable object, or size= given)",
                offset=self.offset,
            )
        head = b"".join(self._carry)
        self._streaming = (length, crc32c(head[12 : 12 + length]), head[12 + length :])
        self._carry, self._carry_len = [head[:12]], len(head)
        return self._stream_carry(rest)

    def _stream_carry(self, chunk: bytes | memoryview) -> int:
        """Feed ``chunk`` to the streaming frame; return how much of it the frame took."""
        assert self._streaming is not None
        length, crc, trailer = self._streaming
        seen = self._carry_len - 12  # data and CRC bytes so far
        take = min(length + 4 - seen, len(chunk))
        data_left = max(length - seen, 0)
        if data_left:
            crc = crc32c(chunk[: min(data_left, take)], crc)
        trailer += bytes(chunk[data_left:take])
        self._carry_len += take
        if seen + take < length + 4:
            self._streaming = (length, crc, trailer)
            return take
        self._streaming = None
        self._carry, self._carry_len = [], 0
        stored = _U32LE.unpack(trailer)[0]
        computed = (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & _U32
        if self.verify_crc and stored != computed:
            self.error = _data_crc_error(self.offset, length, stored, computed)
            return take
        self.count += 1
        self.offset += 16 + length
        return take

    def _length(self, buf: bytes | memoryview, pos: int, offset: int) -> int:
        """The length in the frame header at ``pos``, after checking its CRC."""
        header = bytes(buf[pos : pos + 12])  # a dict key (a memoryview is not one)
        length = self._lengths.get(header)
        if length is None:
            length, length_crc = _HEADER.unpack_from(header)
            expected = masked_crc32c(header[:8])
            if self.verify_crc and expected != length_crc:
                raise _length_crc_error(offset, length_crc, expected)
            if len(self._lengths) > 1 << 16:
                self._lengths.clear()
            self._lengths[header] = length
        return length

    def _claim(self, buf: bytes | memoryview, pos: int, offset: int) -> int:
        """:meth:`_length`, refusing a frame that would end beyond ``limit``."""
        length = self._length(buf, pos, offset)
        if self.limit is not None and offset + 16 + length > self.limit:
            raise CorruptShard(
                f"record at offset {offset} claims {length} data bytes, but the stream holds "
                f"at most {max(self.limit - offset - 16, 0)} more after its header; the shard "
                "is corrupt or truncated",
                offset=offset,
            )
        return length

    def _split(self, buf: bytes | memoryview, pos: int, records: list[bytes]) -> int:
        """Check the complete frames of ``buf`` from ``pos``, append their records (if
        ``copy``) and return where the rest starts.

        On a bad frame, the good records before it are kept, ``error`` is set and the
        position of the bad frame is returned.
        """
        base = self.offset - pos  # uncompressed offset of buf[0]
        if _native.speedups is not None:
            return self._split_natively(buf, pos, base, records)
        if not isinstance(buf, bytes):  # a view: header slices become dict keys, records bytes
            buf = bytes(buf)
        ends: list[int] = []  # where each record's data ends (its CRC follows)
        lengths = self._lengths
        first_start = pos + 12
        end = len(buf)
        try:
            while pos + 12 <= end:
                length = lengths.get(buf[pos : pos + 12])
                if length is None:
                    length = self._length(buf, pos, base + pos)  # checks, or raises
                stop = pos + 12 + length
                if stop + 4 > end:
                    break
                ends.append(stop)
                pos = stop + 4
        except CorruptShard as exc:
            self.error = exc
        if not ends:
            self.offset = base + pos
            return pos
        starts = [first_start, *map(_ADD_16, ends[:-1])]  # 16 bytes after the previous data
        copied = 0 if self.ids is None else len(records)  # records before this frame's
        if self.copy or self.ids is not None:
            new = list(map(buf.__getitem__, map(slice, starts, ends)))
            records.extend(new)
            crcs = list(map(crc32c, new))
        else:  # CRC views of the records, each dropped at once
            crcs = list(map(crc32c, map(memoryview(buf).__getitem__, map(slice, starts, ends))))
        if self.verify_crc:
            computed = _masked_all(crcs)
            if sys.byteorder != "little":
                computed.byteswap()
            expected = computed.tobytes()  # the CRC fields as they should be stored
            stored = b"".join(map(buf.__getitem__, map(slice, ends, map(_ADD_4, ends))))
            if expected != stored:
                i = next(
                    i
                    for i in range(len(ends))
                    if expected[4 * i : 4 * i + 4] != stored[4 * i : 4 * i + 4]
                )
                size = ends[i] - starts[i]
                del ends[i:]
                if self.copy or self.ids is not None:
                    del records[len(records) - len(crcs) + i :]
                pos = starts[i] - 12
                self.error = _data_crc_error(
                    base + pos,
                    size,
                    _U32LE.unpack_from(stored, 4 * i)[0],
                    _U32LE.unpack_from(expected, 4 * i)[0],
                )
        if self.ids is not None:  # the good records only (a bad one cut the lists)
            self.ids.add(records[copied : copied + len(ends)])
            if not self.copy:
                del records[copied:]
        self.count += len(ends)
        self.offset = base + pos
        return pos

    def _split_natively(
        self, buf: bytes | memoryview, pos: int, base: int, records: list[bytes]
    ) -> int:
        """:meth:`_split` in C (``recordkeeper._speedups.deframe``): same results and errors."""
        speedups = _native.speedups
        assert speedups is not None
        ids = self.ids
        hashed = ids is not None and native_ids()  # in C, in the loop that checks the CRCs
        extra = (ids.buffer, ids.width) if hashed and ids is not None else ()
        if self.inferencer is not None and not self.copy:
            summary, slow, pos, count, error = speedups.deframe_keys(
                buf, pos, self.verify_crc, *extra
            )
            self.inferencer.add_summary(summary, slow, count=count)
        else:
            copy = self.copy or (ids is not None and not hashed)
            found, pos, count, error = speedups.deframe(buf, pos, self.verify_crc, copy, *extra)
            if found:
                if ids is not None and not hashed:
                    ids.add(found)
                if self.copy:
                    records.extend(found)
        self.count += count
        self.offset = base + pos
        if error is not None:
            kind, at, stored, computed = error
            if kind == 1:
                self.error = _length_crc_error(base + at, stored, computed)
            else:
                size = int.from_bytes(buf[at : at + 8], "little")
                self.error = _data_crc_error(base + at, size, stored, computed)
        return pos

    def finish(self) -> None:
        """Raise CorruptShard if the stream ended inside a record."""
        if self._carry_len:
            head = self._carry[0]  # holds the whole header once there are 12 bytes
            if self._carry_len < 12:
                detail = f"{self._carry_len} of its 12 header bytes"
            else:
                length = self._length(head, 0, self.offset)
                detail = f"{self._carry_len - 12} of its {length} data bytes and 4 CRC bytes"
            raise CorruptShard(
                f"record at offset {self.offset} is truncated: the stream ends after {detail}",
                offset=self.offset,
            )


def _length_crc_error(offset: int, stored: int, computed: int) -> CorruptShard:
    return CorruptShard(
        f"record at offset {offset}: the CRC of its length field does not match "
        f"(stored {stored:#010x}, computed {computed:#010x}); the shard is "
        "corrupt or is not an uncompressed TFRecord stream",
        offset=offset,
    )


def _data_crc_error(offset: int, size: int, stored: int, computed: int) -> CorruptShard:
    return CorruptShard(
        f"record at offset {offset}: the CRC of its {size} data bytes does not match "
        f"(stored {stored:#010x}, computed {computed:#010x})",
        offset=offset,
    )


def _record_batches(
    chunks: Iterable[bytes] | Iterable[memoryview],
    compression: Compression,
    deframer: _Deframer,
    on_chunk: Callable[[bytes | memoryview, bytes | memoryview], None] | None = None,
    size: int | None = None,
) -> Iterator[list[bytes]]:
    """Records of a stored stream given in chunks, in lists (one per chunk that ends some).

    ``on_chunk(stored, uncompressed)`` sees every chunk of the stored stream and, for a
    compressed one, what it decompressed to (b"" for an uncompressed stream); a chunk that
    inflates to several pieces comes with the first, the others with b"".  ``size`` (the
    stored bytes the chunks hold, if known) bounds what a frame may claim: the stream itself,
    or for a compressed one what the stored bytes still to come can inflate to at most.
    """
    inflate = None if compression == "none" else _Inflater(compression)
    stored_any = False
    fed = 0  # uncompressed bytes given to the deframer
    for stored in chunks:
        stored_any = True
        pieces = iter((stored,)) if inflate is None else inflate(stored)
        first = True
        while True:
            failure: _InflateError | None = None
            try:
                data = next(pieces)
            except StopIteration:
                break
            except _InflateError as exc:
                data, failure = exc.decoded, exc
            fed += len(data)
            if size is not None:
                if inflate is None:
                    deframer.limit = size
                else:
                    left = max(size - inflate.consumed, 0)
                    deframer.limit = fed + left * _MAX_INFLATE_RATIO + _INFLATE_SLACK
            if on_chunk is not None:
                on_chunk(stored if first else b"", b"" if inflate is None else data)
            first = False
            records = deframer.feed(data)
            if records:
                yield records
            if deframer.error is not None:
                raise deframer.error
            if failure is not None:
                raise CorruptShard(
                    f"the {compression} stream is corrupt at compressed offset {failure.offset} "
                    f"({failure.reason}), in or after the record at uncompressed offset "
                    f"{deframer.offset}",
                    offset=deframer.offset,
                    compressed_offset=failure.offset,
                )
        if first and on_chunk is not None:  # stored bytes that inflated to nothing yet
            on_chunk(stored, b"")
    if inflate is not None and stored_any and not inflate.done:
        raise CorruptShard(
            f"the {compression} stream is truncated at compressed offset {inflate.consumed}, "
            f"in or after the record at uncompressed offset {deframer.offset}",
            offset=deframer.offset,
            compressed_offset=inflate.consumed,
        )
    deframer.finish()


def iter_records(
    fileobj: BinarySource,
    compression: str | None = None,
    *,
    verify_crc: bool = True,
    size: int | None = None,
) -> Iterator[bytes]:
    """Yield the records of a TFRecord stream, checking each record's CRCs.

    A bad or truncated record raises :class:`~recordkeeper.errors.CorruptShard` whose
    ``extra["offset"]`` is the record's byte offset in the uncompressed stream; every record
    before it has been yielded.  A compressed stream that does not decompress raises it too,
    after the records decoded before the bad byte, with ``extra["compressed_offset"]`` (the
    stored byte where decompression failed) beside ``offset``.  With ``verify_crc=False`` only
    the framing is checked.  A bad ``compression`` raises
    :class:`~recordkeeper.errors.InvalidInput` at once.

    ``size`` is how many bytes ``fileobj`` still holds (by default what :func:`source_size`
    finds out: regular files, fsspec files and ``io.BytesIO`` tell): a frame claiming more than
    the stream can hold — for a GZIP/ZLIB stream, more than its remaining bytes can inflate to —
    is refused as soon as its header is read, instead of gathering the rest of the stream
    first.  Without a size such a frame is reported as truncated at the end of the stream.
    """
    compression = normalize_compression(compression)
    if size is None:
        size = source_size(fileobj)
    batches = _record_batches(
        stored_chunks(fileobj, _READ_SIZE), compression, _Deframer(verify_crc), size=size
    )
    return chain.from_iterable(batches)


#: Schemas inferred from a C summary, by (record count, (structure key, records) ...): the
#: shards of one writer mostly share one (a Schema is immutable, so they share the object).
_SUMMARY_SCHEMAS: dict[tuple[Any, ...], Schema] = {}
_SUMMARY_SCHEMAS_MAX = 256


def _schema_of_summary(summary: dict[bytes, Any], slow: list[bytes], count: int) -> Schema:
    """``SchemaInferencer`` fed ``add_summary(summary, slow, count=count)``, its result; the
    same summary again (no records outside the fast path) answers the schema inferred
    before: a schema is determined by its records' structure keys and their counts."""
    key = None if slow else (count, *((k, n) for k, (_, n) in summary.items()))
    if key is not None:
        found = _SUMMARY_SCHEMAS.get(key)
        if found is not None:
            return found
    inferencer = SchemaInferencer()
    inferencer.add_summary(summary, slow, count=count)
    schema = inferencer.result()
    if key is not None:
        if len(_SUMMARY_SCHEMAS) >= _SUMMARY_SCHEMAS_MAX:
            _SUMMARY_SCHEMAS.clear()
        _SUMMARY_SCHEMAS[key] = schema
    return schema


def scan_whole(
    data: bytes, compression: str | None = None, *, record_ids: RecordIds | None = None
) -> ShardStats:
    """:func:`scan_shard` of a shard held whole in memory (``io.BytesIO(data)``, its size
    known): the same stats, the same errors.

    An uncompressed shard of up to one read (8 MiB) is checked, counted, summarised for the
    schema and given its record identities by one C call (``deframe_keys``, what the
    streaming scan calls for such a shard too), its sha256 and CRC32C taken over the bytes
    once, without the streaming scan's reader, deframer, worker and generators (publish
    scans 2,000 small shards one after another).  A shard that call does not pass whole (a
    bad frame, a truncated one), a compressed one, or no C extension: :func:`scan_shard`,
    which says why (the identities gathered so far are dropped first).
    """
    compression = normalize_compression(compression)
    speedups = _native.speedups
    if (
        compression == "none"
        and 0 < len(data) <= _READ_SIZE
        and speedups is not None
        and (record_ids is None or native_ids())
    ):
        start = 0 if record_ids is None else len(record_ids.buffer)
        extra = () if record_ids is None else (record_ids.buffer, record_ids.width)
        summary, slow, pos, count, error = speedups.deframe_keys(data, 0, True, *extra)
        if error is None and pos == len(data):
            schema = _schema_of_summary(summary, slow, count)
            digest = hashlib.sha256(data).hexdigest()
            return ShardStats(
                sha256=digest,
                crc32c=f"{crc32c(data):08x}",
                records_sha256=digest,  # uncompressed: the records are the stored bytes
                record_count=count,
                size=len(data),
                compression="none",
                schema=schema,
            )
        if record_ids is not None:
            del record_ids.buffer[start:]
    return scan_shard(io.BytesIO(data), compression, size=len(data), record_ids=record_ids)


def scan_shard(
    fileobj: BinarySource,
    compression: str | None = None,
    *,
    infer_schema: bool = True,
    size: int | None = None,
    stored_crc32c: bool = True,
    hash_in_background: bool = True,
    record_ids: RecordIds | None = None,
) -> ShardStats:
    """Re-read a stored shard and return the :class:`ShardStats` a writer would have produced.

    Every record's CRCs are checked (a bad one raises
    :class:`~recordkeeper.errors.CorruptShard` with its offset, as :func:`iter_records` does,
    ``size`` included).  Use it for deep verification (``infer_schema=False`` is faster) and to
    describe files written elsewhere.
    ``stored_crc32c=False`` skips the CRC32C of the stored bytes (``crc32c`` is then ``""``):
    deep verification compares their sha256, which already covers every byte.
    ``hash_in_background=False`` hashes in the calling thread instead of a helper thread: for
    callers that already scan one shard per core (the helper would only compete for them).
    Then an uncompressed source with ``readinto`` (local files, fsspec files) is read into one
    reused buffer instead of a new ``bytes`` object per chunk.
    ``record_ids`` (a :class:`~recordkeeper.record_ids.RecordIds`) gets every record's
    identity as the scan checks it (docs/record-identity.md): the shard's record index.
    """
    compression = normalize_compression(compression)
    if size is None:
        size = source_size(fileobj)
    digests = Digests(compression, crc=stored_crc32c)
    inferencer = SchemaInferencer() if infer_schema else None
    if inferencer is not None and _native.speedups is not None:
        # C scans, checks and summarises records without the GIL or a copy of each
        deframer = _Deframer(verify_crc=True, copy=False, inferencer=inferencer, ids=record_ids)
        inferencer = None
    else:  # records only for inference
        deframer = _Deframer(verify_crc=True, copy=infer_schema, ids=record_ids)
    worker = Worker()

    def on_chunk(stored: bytes | memoryview, data: bytes | memoryview) -> None:
        digests.measure(stored)  # in this thread: the CRC releases the GIL, which lets
        if hash_in_background:  # the worker pick up its next job
            worker.submit(digests.hash, stored, data)
        else:
            digests.hash(stored, data)

    try:
        readinto = getattr(fileobj, "readinto", None)
        chunks: Iterator[bytes] | Iterator[memoryview]
        # the hash is done with a chunk before the next is read, unless it is in the background
        if callable(readinto) and compression == "none" and not hash_in_background:
            chunks = chunks_into(readinto, _READ_INTO_SIZE)
        else:
            chunks = stored_chunks(fileobj, _READ_SIZE)
        for records in _record_batches(chunks, compression, deframer, on_chunk, size):
            if inferencer is not None:
                inferencer.add_many(records)
    except BaseException:
        worker.abandon()
        raise
    worker.close()
    inferred = inferencer or deframer.inferencer
    return digests.stats(deframer.count, None if inferred is None else inferred.result())

"""Format-neutral machinery of the record formats: hashing while bytes stream, a background
worker, the shard's stats, sources and sinks.

Every record format (:mod:`recordkeeper.formats`) describes a shard with the same
:class:`ShardStats`: sha256 and CRC32C of the stored bytes, ``records_sha256`` over the records
in the canonical framing (TFRecord's, :func:`canonical_framing`: the same records give the same
digest in any format), the record count, the size and the schema.  The pieces here compute them
while the bytes stream by:

* :class:`Digests`: the stored bytes' sha256, CRC32C and size, and the records' sha256;
* :class:`Worker`: runs hashing, compression and I/O in order on one background thread (those
  release the GIL), started only for a shard of more than one piece;
* :func:`stored_chunks` / :func:`chunks_into`: a source read in big pieces (or into one reused
  buffer); :func:`source_size`: how much a source holds, when it can tell;
* :func:`write_fd`: local file writes in pieces the page cache likes.
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import hashlib
import io
import lzma
import os
import stat
import struct
import zipfile
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from crc32c import crc32c

from recordkeeper import _native
from recordkeeper.core.errors import InvalidRecord
from recordkeeper.core.schema import Schema
from recordkeeper.core.shards import Compression

__all__ = [
    "READ_INTO_SIZE",
    "READ_SIZE",
    "BinarySink",
    "BinarySource",
    "Bytes",
    "Digests",
    "ShardStats",
    "Worker",
    "canonical_framing",
    "chunks_into",
    "masked_crc32c",
    "record_bytes",
    "source_size",
    "stored_chunks",
    "write_fd",
]

READ_SIZE = 8 << 20  # a source is read in pieces of this size ...
READ_INTO_SIZE = 2 << 20  # ... or into a reused buffer of this size: in cache for hash and CRCs
_FILE_WRITE = 256 << 10  # local files are written in write() calls of at most this size
_DECOMPRESSING = (gzip.GzipFile, bz2.BZ2File, lzma.LZMAFile, zipfile.ZipExtFile)
_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")


def masked_crc32c(data: bytes | memoryview) -> int:
    """The masked CRC32C that TFRecord framing (the canonical framing) stores for ``data``."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & _U32


def canonical_framing(records: list[bytes]) -> bytes:
    """The records in TFRecord framing, joined: what ``records_sha256`` hashes in every format
    (``uint64 length | masked crc32c(length) | data | masked crc32c(data)``)."""
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


Bytes = bytes | bytearray | memoryview  # what the writer hashes and hands to its sink


def write_fd(fd: int, data: Bytes) -> None:
    """Write all of ``data`` to a file descriptor in ``write()`` calls of at most 256 KiB.

    Linux sizes a file's page-cache folios by the write: a write of 2 MiB or more asks for
    2 MiB folios.  On a VM that hands free memory back to its host (virtio-balloon free page
    reporting: free 2 MiB blocks are reported), such folios come from memory the host must
    fault in again: 200 MB written in 2-8 MiB calls took 0.5-0.8 s of CPU here, in 64-512 KiB
    calls ~0.06 s.  Smaller folios come from memory that stayed with the guest.  The pieces
    cost a few hundred syscalls per 100 MB elsewhere.  With the C extension the loop runs
    without the GIL.
    """
    speedups = _native.speedups
    write_chunks = None if speedups is None else getattr(speedups, "write_chunks", None)
    if write_chunks is not None:
        write_chunks(fd, data, _FILE_WRITE)
        return
    with memoryview(data) as whole, whole.cast("B") as view:
        done = 0
        while done < len(view):
            done += os.write(fd, view[done : done + _FILE_WRITE])


@dataclass(frozen=True)
class ShardStats:
    """What a shard is: digests of its stored bytes and of its records, and its schema.

    ``sha256`` and ``crc32c`` cover the stored (possibly compressed) bytes; ``crc32c`` is the
    big-endian CRC32C as 8 hex digits (GCS reports the same value, base64-encoded).
    ``records_sha256`` covers the uncompressed framed record stream, so it does not change when
    a shard is recompressed.  ``schema`` is None when inference was switched off.
    """

    sha256: str
    crc32c: str
    records_sha256: str
    record_count: int
    size: int
    compression: Compression
    schema: Schema | None = None
    #: the record format of the stored file (a name of :data:`recordkeeper.formats.FORMATS`)
    format: str = "tfrecord"

    def to_dict(self) -> dict[str, Any]:
        """The stats under the shard record's field names, and the schema as its JSON form."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["schema"] = None if self.schema is None else self.schema.to_dict()
        return out


class Digests:
    """Hashes of the stored and of the uncompressed bytes, and the stored size."""

    def __init__(self, compression: Compression, *, crc: bool = True) -> None:
        self.compression = compression
        self.stored = hashlib.sha256()
        self.records = self.stored if compression == "none" else hashlib.sha256()
        self.crc: int | None = 0 if crc else None  # None: not computed
        self.size = 0

    def add(self, stored: Bytes, records: Bytes = b"") -> None:
        """Account for stored bytes and for the uncompressed bytes they hold (if compressed)."""
        self.measure(stored)
        self.hash(stored, records)

    def measure(self, stored: Bytes) -> None:
        """The cheap part of :meth:`add`: CRC32C (14 GB/s) and size."""
        if self.crc is not None:
            self.crc = crc32c(stored, self.crc)
        self.size += len(stored)

    def hash(self, stored: Bytes, records: Bytes = b"") -> None:
        """The expensive part of :meth:`add`: sha256 (a single C call per digest)."""
        self.stored.update(stored)
        if records and self.records is not self.stored:
            self.records.update(records)

    def stats(
        self, record_count: int, schema: Schema | None, format: str = "tfrecord"
    ) -> ShardStats:
        return ShardStats(
            sha256=self.stored.hexdigest(),
            crc32c="" if self.crc is None else f"{self.crc:08x}",
            records_sha256=self.records.hexdigest(),
            record_count=record_count,
            size=self.size,
            compression=self.compression,
            schema=schema,
            format=format,
        )


class Worker:
    """Runs jobs in order on a background thread, with at most ``depth`` jobs in flight.

    Hashing, compression and file I/O release the GIL, so they overlap with the framing and
    parsing the calling thread does meanwhile.  Each of a job's C calls needs the GIL back when
    it returns, which can take a thread switch interval (5 ms) while the caller is busy: jobs
    should be large, and several may queue.  A job's exception surfaces on a later call.

    The thread starts with the second job: a shard of one chunk (a small shard, read or written
    whole) runs its one job in the caller at :meth:`close`, without starting a thread.
    """

    def __init__(self, depth: int = 2) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[Future[None]] = deque()
        self._depth = depth
        self._first: tuple[Callable[..., None], tuple[Any, ...]] | None = None

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        if self._pool is None:
            if self._first is None:
                self._first = (fn, args)
                return
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="recordkeeper-io")
            first, self._first = self._first, None
            self._pending.append(self._pool.submit(first[0], *first[1]))
        while len(self._pending) >= self._depth:
            self._pending.popleft().result()
        self._pending.append(self._pool.submit(fn, *args))

    def close(self) -> None:
        if self._pool is None:
            if self._first is not None:
                first, self._first = self._first, None
                first[0](*first[1])
            return
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            self._pool.shutdown(wait=True)

    def abandon(self) -> None:
        """Stop without raising: drop waiting jobs, let a running one end."""
        self._first = None
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


class BinarySink(Protocol):
    """What a format's writer writes to: a binary file, an upload pipe, …

    ``write()`` may be given a ``memoryview``.  A sink that copies (or writes out) what it is
    given before ``write()`` returns may say so with a class attribute ``copies_writes = True``
    (regular files and ``io.BytesIO`` are known to): the writer then reuses its buffers.
    """

    def write(self, data: Bytes, /) -> int: ...

    def flush(self) -> None: ...


class BinarySource(Protocol):
    """What the formats' readers and scanners read from: ``read(size)`` → bytes."""

    def read(self, size: int = -1, /) -> bytes: ...


def stored_chunks(fileobj: BinarySource, read_size: int = READ_SIZE) -> Iterator[bytes]:
    """The stream in ``read()`` calls of ``read_size`` bytes, until it ends."""
    while chunk := fileobj.read(read_size):
        yield chunk


def chunks_into(
    readinto: Callable[[memoryview], int | None], buffer_size: int = READ_INTO_SIZE
) -> Iterator[memoryview]:
    """The stream read by ``readinto`` into one reused buffer, as views of it.

    Each view is valid only until the next one is asked for: whoever takes one must be done
    with it (hashed, checked, anything kept copied) by then.  A buffer of about a megabyte is
    still in the CPU's cache when the hash and the record CRCs read it, where fresh 8 MiB
    ``bytes`` from ``read`` cost page faults and three trips to memory.
    """
    view = memoryview(bytearray(buffer_size))
    while n := readinto(view):
        yield view[:n]


def source_size(fileobj: Any) -> int | None:
    """How many bytes a binary source still holds from its current position, if it can tell
    without reading: regular files (by their descriptor), fsspec files (their ``size``),
    ``io.BytesIO``, and any other seekable source by seeking to its end and back (not the
    decompressing readers, whose seek inflates everything).  Anything else (a pipe, a
    decompressing reader, a wrapper without ``seek``) gives None.
    """
    try:
        here = fileobj.tell()
    except (AttributeError, OSError, ValueError):
        return None
    if not isinstance(here, int):
        return None
    total: int | None = None
    if isinstance(fileobj, io.BytesIO):
        with fileobj.getbuffer() as view:
            total = view.nbytes
    elif isinstance(size := getattr(fileobj, "size", None), int) and not isinstance(size, bool):
        total = size  # fsspec's AbstractBufferedFile
    else:
        try:
            status = os.fstat(fileobj.fileno())
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
            return _size_by_seeking(fileobj, here)
        if stat.S_ISREG(status.st_mode):
            total = status.st_size
    return None if total is None else max(total - here, 0)


def _size_by_seeking(fileobj: Any, here: int) -> int | None:
    """What a seekable source holds after ``here``: seek to its end, tell, seek back."""
    if isinstance(fileobj, _DECOMPRESSING):
        return None
    try:
        if not fileobj.seekable():
            return None
        end = fileobj.seek(0, os.SEEK_END)
        fileobj.seek(here)
    except (AttributeError, OSError, ValueError, TypeError):
        return None
    return max(end - here, 0) if isinstance(end, int) and not isinstance(end, bool) else None


def record_bytes(record: Any) -> bytes:
    """A record as bytes: bytes-like objects as given, messages serialized deterministically.

    This is the one place recordkeeper turns a record into bytes (the writer, the TFRecord
    writer and the Beam sink all call it).  A protobuf message (``tf.train.Example``, ...) is
    serialized with ``SerializeToString(deterministic=True)``: map fields — an Example's
    ``features.feature`` is one — are written in key order, where the default order changes
    from one process to the next, so the same data always has the same bytes and therefore the
    same content digest (``DuplicateWarning`` instead of a new version).  An object whose
    ``SerializeToString`` takes no ``deterministic`` argument is serialized as it serializes
    itself.  Bytes given are hashed as given: recordkeeper never re-encodes them.

    Anything else raises :class:`~recordkeeper.errors.InvalidRecord` (an ``InvalidInput`` that
    is also a ``TypeError``).
    """
    if isinstance(record, bytes | bytearray | memoryview):
        return bytes(record)
    serialize = getattr(record, "SerializeToString", None)
    if serialize is None:
        raise InvalidRecord(
            f"a record must be bytes or a message with SerializeToString, "
            f"not {type(record).__name__}"
        )
    try:
        return bytes(serialize(deterministic=True))
    except TypeError:  # not a protobuf message: a SerializeToString of its own
        return bytes(serialize())

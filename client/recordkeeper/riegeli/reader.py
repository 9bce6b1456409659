"""Reading Riegeli/records files (and ArrayRecord files, which are Riegeli files) sequentially.

:class:`RiegeliReader` walks the chunks of a file from its first byte, checking on the way every
block header (its hash and that it points at the chunk it interrupts), every chunk header's
hash, every chunk's data hash and the decoded records against the counts in the chunk header.
It decodes simple chunks (compression none, Brotli, Zstd, Snappy), skips padding, signature
and metadata chunks, and refuses transposed chunks with
:class:`~recordkeeper.errors.UnsupportedFormat`.  It reads forwards only (no seeks), so any
``read()``-able source works.

ArrayRecord files are recognised by their postscript (the last chunk, in the last 64 KiB block,
naming the footer chunk before it with ArrayRecord's magic number): the footer and postscript
records are not yielded, and the footer's index is checked against the data chunks read.  To
tell without seeking, the reader holds back the records of the last two simple chunks until
the next chunk or the end of the file shows what they are.

Corruption raises :class:`~recordkeeper.errors.CorruptShard` with ``extra["offset"]`` (the
first bad byte's file offset as far as the format can tell: the bad block header, the chunk
header, the start of the chunk's data), ``extra["reason"]`` (a stable short code, one of
:data:`REASONS`) and, for chunk-level problems, ``extra["chunk_offset"]``.  Every record of the
chunks before the bad one has been yielded.
"""

from __future__ import annotations

import struct
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Protocol, TypeVar

from recordkeeper import _native
from recordkeeper.core.errors import CorruptShard, UnsupportedFormat
from recordkeeper.core.file_kinds import HEAD_SIZE
from recordkeeper.core.riegeli import (
    BLOCK_HEADER_SIZE,
    BLOCK_SIZE,
    CHUNK_HEADER_SIZE,
    FILE_SIGNATURE,
    BlockHeader,
    ChunkHeader,
    ChunkType,
    chunk_end,
    logical_end,
    possible_chunk_boundary,
)
from recordkeeper.file_kinds import describe_bytes
from recordkeeper.riegeli.array_record import (
    ChunkIndexEntry,
    FooterMetadata,
    parse_footer,
    parse_metadata,
    parse_postscript,
)
from recordkeeper.riegeli.chunks import COMPRESSION_NAMES, ChunkDataError, decode_simple_chunk
from recordkeeper.riegeli.highwayhash import riegeli_hasher

#: what a chunk is emitted as: framed bytes (the C walk's path) or a list of records
_Out = TypeVar("_Out")

__all__ = ["REASONS", "RiegeliInfo", "RiegeliReader", "iter_records", "read_chunk_at"]

#: ``extra["reason"]`` of the :class:`CorruptShard` errors the reader raises.
REASONS = (
    "signature",  # the first 64 bytes are not the file signature (but close to it)
    "block_header",  # a block header's hash, or the chunk it points at, is wrong
    "chunk_header",  # a chunk header's hash does not match, or its fields are impossible
    "chunk_data",  # a chunk's data hash does not match
    "truncated",  # the file ends inside a chunk
    "bad_varint",  # a varint in a chunk is cut off or too long
    "bad_compression",  # unknown compression type, or a stream that does not decompress
    "record_count",  # the record sizes do not match the chunk header's record count
    "decoded_size",  # the records' bytes do not match the chunk header's decoded size
    "bad_index",  # an ArrayRecord footer that does not describe the data chunks
)

#: Whether :meth:`RiegeliReader.framed`'s C walk decompresses zstd chunks through libzstd
#: (loaded at run time; where it cannot be loaded, those chunks take the Python path).
USE_LIBZSTD = True
_READ_SIZE = 8 << 20
#: the framed records one C walk returns, at most (unless a single chunk's need more): an
#: output this small is taken from malloc's heap and reused walk after walk; larger ones
#: (they were 4x the buffer, ~30 MiB) were mapped afresh by each walk, and faulting their
#: pages in took a quarter of the walk's time
_WALK_OUTPUT = 4 << 20
_WALK_FULL = 4  # bit of the walk's `kinds`: it stopped only because its output was full
_MOST_READ = 64 << 20  # the most one read asks for
_HEADER = struct.Struct("<5Q")  # a chunk header
_BATCH_RECORDS = 4096  # batches() joins the records of small chunks up to this many ...
_BATCH_BYTES = 1 << 20  # ... or this many bytes
_SIGNATURE_MATCH = 48  # a head sharing this many of the signature's 64 bytes is a damaged one


class BinarySource(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


@dataclass
class RiegeliInfo:
    """What a read found out about the file (complete once the reader is exhausted)."""

    format: str = "riegeli"  # or "array_record"
    size: int = 0  # bytes in the file
    record_count: int = 0
    chunk_count: int = 0  # chunks holding user records
    compressions: set[str] = field(default_factory=set)  # of those chunks
    array_record: FooterMetadata | None = None  # the footer's metadata, for ArrayRecord


class _Chunk:
    """A decoded simple chunk."""

    __slots__ = ("begin", "compression", "data_offset", "decoded_data_size", "records")

    def __init__(
        self,
        begin: int,
        data_offset: int,
        decoded_data_size: int,
        records: list[bytes],
        compression: str,
    ) -> None:
        self.begin = begin
        self.data_offset = data_offset
        self.decoded_data_size = decoded_data_size
        self.records = records
        self.compression = compression


class _Source:
    """A forward-only window on the file: physical offsets, read in large pieces."""

    def __init__(self, fileobj: BinarySource, on_read: Callable[[bytes], None] | None) -> None:
        self._file = fileobj
        self._on_read = on_read
        self.read_size = _READ_SIZE
        self.buf = bytearray()
        self.base = 0  # physical offset of buf[0]
        self.end = 0  # physical offset after the bytes read so far (the size once eof)
        self.eof = False

    def ensure(self, end: int) -> bool:
        """Whether bytes up to ``end`` are there, reading more as needed."""
        while self.end < end and not self.eof:
            # in pieces of at most _MOST_READ: `end` may come from a chunk header that claims
            # far more than the file holds (read(n) allocates n bytes first)
            piece = self._file.read(max(self.read_size, min(end - self.end, _MOST_READ)))
            if not piece:
                self.eof = True
                break
            if self._on_read is not None:
                self._on_read(piece)
            self.buf += piece
            self.end += len(piece)
        return self.end >= end

    def get(self, start: int, end: int) -> bytes:
        with memoryview(self.buf) as view:
            return view[start - self.base : end - self.base].tobytes()

    def release(self, before: int) -> None:
        """Forget the bytes before ``before`` once enough of them piled up."""
        if before - self.base >= _READ_SIZE:
            del self.buf[: before - self.base]
            self.base = before


def _logical(source: _Source, pos: int, size: int) -> bytes:
    """``size`` bytes from physical ``pos``, without the block headers between them."""
    pieces = []
    while size > 0:
        if pos % BLOCK_SIZE == 0:
            pos += BLOCK_HEADER_SIZE
        take = min(size, BLOCK_SIZE - pos % BLOCK_SIZE)
        pieces.append(source.get(pos, pos + take))
        pos += take
        size -= take
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _corrupt(reason: str, offset: int, message: str, **extra: Any) -> CorruptShard:
    return CorruptShard(
        f"Riegeli file corrupt at offset {offset}: {message}", offset=offset, reason=reason, **extra
    )


def _decoded(
    data: bytes, num_records: int, decoded: int, data_offset: int, begin: int
) -> list[bytes]:
    """A simple chunk's records; a decoding failure as the :class:`CorruptShard` naming it."""
    try:
        return decode_simple_chunk(data, num_records, decoded)
    except ChunkDataError as exc:
        raise _corrupt(
            exc.reason,
            data_offset,
            f"the simple chunk at {begin}: {exc.message}",
            chunk_offset=begin,
        ) from None


class RiegeliReader:
    """The records of a Riegeli/records or ArrayRecord file, checked as they are read.

    Iterate it for records (``bytes``), or call :meth:`batches` for one list per chunk;
    :attr:`info` describes the file once the iteration is complete.  ``on_read`` sees every
    piece of the file as it is read (to hash the stored bytes in the same pass).
    """

    def __init__(
        self, fileobj: BinarySource, *, on_read: Callable[[bytes], None] | None = None
    ) -> None:
        self._source = _Source(fileobj, on_read)
        self.info = RiegeliInfo()
        self._started = False
        self._hash = riegeli_hasher()

    def __iter__(self) -> Iterator[bytes]:
        # chunk by chunk, not joined: a caller after the first few records (``head``, a
        # sample) decodes the first few chunks, not a megabyte of them
        if self._started:
            raise RuntimeError("a RiegeliReader reads its file once")
        self._started = True
        return chain.from_iterable(self._batches())

    def batches(self) -> Iterator[list[bytes]]:
        """The user records in lists: one per chunk, the records of small chunks joined (up to
        about 4096 records or 1 MiB per list)."""
        if self._started:
            raise RuntimeError("a RiegeliReader reads its file once")
        self._started = True
        return self._joined(self._batches())

    @staticmethod
    def _joined(batches: Iterator[list[bytes]]) -> Iterator[list[bytes]]:
        pending: list[bytes] = []
        size = 0
        try:
            for batch in batches:
                if not pending and len(batch) >= _BATCH_RECORDS:
                    yield batch
                    continue
                pending += batch
                size += sum(map(len, batch))
                if len(pending) >= _BATCH_RECORDS or size >= _BATCH_BYTES:
                    yield pending
                    pending, size = [], 0
        except (CorruptShard, UnsupportedFormat):
            if pending:
                yield pending
            raise
        if pending:
            yield pending

    # -- chunks ----------------------------------------------------------------------------

    def _check_signature(self) -> bool:
        """Check the file's first 64 bytes; False for an empty file."""
        source = self._source
        if not source.ensure(len(FILE_SIGNATURE)):
            if source.end == 0:
                return False
            head = source.get(0, source.end)
            if FILE_SIGNATURE.startswith(head):
                raise _corrupt(
                    "truncated",
                    0,
                    f"the file ends after {source.end} bytes of its 64-byte signature",
                    size=source.end,
                )
        else:
            head = source.get(0, len(FILE_SIGNATURE))
        if head == FILE_SIGNATURE:
            return True
        same = sum(a == b for a, b in zip(head, FILE_SIGNATURE, strict=False))
        if same >= _SIGNATURE_MATCH:
            first = next(
                i for i, (a, b) in enumerate(zip(head, FILE_SIGNATURE, strict=False)) if a != b
            )
            part = "block header" if first < BLOCK_HEADER_SIZE else "signature chunk header"
            raise _corrupt("signature", first, f"the file signature's {part} is damaged")
        source.ensure(HEAD_SIZE)
        kind = describe_bytes(source.get(0, min(source.end, HEAD_SIZE)))
        raise UnsupportedFormat(
            f"not a Riegeli file: the file signature is missing; it looks like {kind.description}",
            format=kind.kind,
        )

    def _verify_block_header(self, block: int, begin: int, end: int | None) -> None:
        source = self._source
        raw = source.get(block, block + BLOCK_HEADER_SIZE)
        header = BlockHeader.parse(raw)
        computed = self._hash(BlockHeader.hashed_part(raw))
        if computed != header.stored_hash:
            raise _corrupt(
                "block_header",
                block,
                f"the block header's hash does not match (stored {header.stored_hash:#018x}, "
                f"computed {computed:#018x})",
                chunk_offset=begin,
            )
        if header.previous_chunk != block - begin or (
            end is not None and header.next_chunk != end - block
        ):
            raise _corrupt(
                "block_header",
                block,
                f"the block header points at a chunk from {block - header.previous_chunk} to "
                f"{block + header.next_chunk}, the chunk it interrupts runs from {begin} to "
                f"{end if end is not None else '?'}",
                chunk_offset=begin,
            )

    def _read_chunk(self, begin: int) -> tuple[int, int, int, int, bytes, int]:
        """``(chunk_type, num_records, decoded_data_size, data_offset, data, end)`` of the
        chunk at ``begin``, all checked."""
        source = self._source
        in_block = begin % BLOCK_SIZE
        block_end = begin - in_block + BLOCK_SIZE
        if in_block and begin + CHUNK_HEADER_SIZE <= block_end and source.ensure(begin + 40):
            # the common case, no block header: a chunk inside one block
            buf = source.buf
            at = begin - source.base
            stored, data_size, data_hash, type_and_count, decoded = _HEADER.unpack_from(buf, at)
            if self._hash(buf[at + 8 : at + 40]) == stored:
                num_records = type_and_count >> 8
                data_offset = begin + CHUNK_HEADER_SIZE
                data_end = data_offset + data_size
                end = max(data_end, possible_chunk_boundary(begin + num_records))
                if end <= block_end and source.ensure(end):
                    at = data_offset - source.base
                    data = bytes(source.buf[at : at + data_size])
                    if self._hash(data) == data_hash:
                        return type_and_count & 0xFF, num_records, decoded, data_offset, data, end
        header, data_offset, data, end = self._read_chunk_checked(begin)
        return (
            header.chunk_type,
            header.num_records,
            header.decoded_data_size,
            data_offset,
            data,
            end,
        )

    def _read_chunk_checked(self, begin: int) -> tuple[ChunkHeader, int, bytes, int]:
        """:meth:`_read_chunk` for any chunk, and for every error."""
        source = self._source
        header_end = logical_end(begin, CHUNK_HEADER_SIZE)
        if not source.ensure(header_end):
            raise _corrupt(
                "truncated",
                begin,
                f"the file ends at {source.end}, inside the header of the chunk at {begin}",
                chunk_offset=begin,
                size=source.end,
            )
        first_block = -(-begin // BLOCK_SIZE) * BLOCK_SIZE
        for block in range(first_block, header_end, BLOCK_SIZE):
            self._verify_block_header(block, begin, None)
        raw = _logical(source, begin, CHUNK_HEADER_SIZE)
        header_offset = begin + BLOCK_HEADER_SIZE if begin % BLOCK_SIZE == 0 else begin
        header = ChunkHeader.parse(raw)
        computed = self._hash(ChunkHeader.hashed_part(raw))
        if computed != header.stored_hash:
            raise _corrupt(
                "chunk_header",
                header_offset,
                f"the hash of the header of the chunk at {begin} does not match (stored "
                f"{header.stored_hash:#018x}, computed {computed:#018x})",
                chunk_offset=begin,
            )
        end = chunk_end(begin, header)
        data_offset = header_end + BLOCK_HEADER_SIZE if header_end % BLOCK_SIZE == 0 else header_end
        if not source.ensure(end):
            raise _corrupt(
                "truncated",
                begin,
                f"the file ends at {source.end}, inside the {ChunkType.name(header.chunk_type)} "
                f"chunk at {begin} (which runs to {end})",
                chunk_offset=begin,
                size=source.end,
            )
        for block in range(first_block, end, BLOCK_SIZE):
            self._verify_block_header(block, begin, end)
        data = _logical(source, header_end, header.data_size)
        computed = self._hash(data)
        if computed != header.data_hash:
            raise _corrupt(
                "chunk_data",
                data_offset,
                f"the hash of the data of the {ChunkType.name(header.chunk_type)} chunk at "
                f"{begin} does not match (stored {header.data_hash:#018x}, computed "
                f"{computed:#018x})",
                chunk_offset=begin,
            )
        return header, data_offset, data, end

    def _chunks(self) -> Iterator[_Chunk]:
        """The checked simple chunks of the file, decoded, in order."""
        source = self._source
        if not self._check_signature():
            return
        begin = 0
        while source.ensure(begin + 1):
            chunk, begin = self._next_chunk(begin)
            if chunk is not None:
                yield chunk
            source.release(begin)
        self.info.size = source.end

    def _next_chunk(self, begin: int) -> tuple[_Chunk | None, int]:
        """The chunk at ``begin`` checked (decoded if simple, else None) and where it ends."""
        kind, num_records, decoded, data_offset, data, end = self._read_chunk(begin)
        if kind == ChunkType.SIMPLE:
            records = _decoded(data, num_records, decoded, data_offset, begin)
            compression = COMPRESSION_NAMES[data[0]]
            return _Chunk(begin, data_offset, decoded, records, compression), end
        if num_records:
            self._refuse(kind, num_records, begin)
        return None, end

    @staticmethod
    def _refuse(kind: int, num_records: int, begin: int) -> None:
        """A chunk other than a simple one that claims records."""
        if kind == ChunkType.TRANSPOSED:
            raise UnsupportedFormat(
                f"a Riegeli file with transposed chunks (the first at offset {begin}); "
                "not supported: recordkeeper reads Riegeli files of simple chunks (ArrayRecord "
                "writes transposed chunks with its 'transpose' option; Riegeli's with "
                "'transpose')",
                format="riegeli",
                feature="transposed_chunks",
                offset=begin,
            )
        if kind in ChunkType.NAMES:
            raise _corrupt(
                "chunk_header",
                begin,
                f"a {ChunkType.name(kind)} chunk claims {num_records} records",
                chunk_offset=begin,
            )
        raise UnsupportedFormat(
            f"a Riegeli file with a chunk of unknown type {ChunkType.name(kind)} holding "
            f"{num_records} records at offset {begin}",
            format="riegeli",
            feature="unknown_chunk_type",
            offset=begin,
        )

    # -- records in their canonical framing (the C walk) ------------------------------------

    @property
    def native(self) -> bool:
        """Whether :meth:`framed` walks the chunks in C (``recordkeeper._speedups``)."""
        return _walker() is not None

    def framed(self, *, zstd: bool | None = None) -> Iterator[bytes]:
        """The user records in the canonical (TFRecord) framing, in pieces, for the scan.

        Needs :attr:`native`.  Most chunks are checked and decoded by one C call per buffer
        (``_speedups.riegeli_walk``, zstd through libzstd unless ``zstd=False``); any chunk it
        does not take (another compression, anything wrong) is read by the Python code here,
        which raises the same errors at the same offsets as :meth:`batches`.  ``zstd``:
        whether the C walk may decompress zstd chunks (default :data:`USE_LIBZSTD`).
        """
        walk = _walker()
        if walk is None:
            raise RuntimeError("the C extension's riegeli_walk is not available")
        if self._started:
            raise RuntimeError("a RiegeliReader reads its file once")
        self._started = True
        return self._walked(walk, USE_LIBZSTD if zstd is None else zstd)

    def _walked(self, walk: Callable[..., Any], zstd: bool) -> Iterator[bytes]:
        source = self._source
        info = self.info
        frame = _native.speedups.frame  # type: ignore[union-attr]
        held: deque[_Chunk] = deque()
        index = array("Q")
        names = COMPRESSION_NAMES

        def emit(chunk: _Chunk) -> bytes:
            info.record_count += len(chunk.records)
            info.chunk_count += 1
            info.compressions.add(chunk.compression)
            index.extend((chunk.begin, chunk.decoded_data_size, len(chunk.records)))
            return bytes(frame(chunk.records))

        try:
            if not self._check_signature():
                return
            begin = 0
            while source.ensure(begin + 1):
                cap = _framed_cap()
                walked = walk(source.buf, source.base, begin, zstd, cap)
                if walked[2] == begin and walked[6] & _WALK_FULL and cap == _WALK_OUTPUT:
                    # no progress: a chunk whose records need more room than that
                    walked = walk(source.buf, source.base, begin, zstd, _room_for(source.buf))
                framed, packed, resume, stop, records, chunks, kinds = walked
                if chunks:
                    while held:
                        yield emit(held.popleft())
                    info.record_count += records
                    info.chunk_count += chunks
                    if kinds & 1:
                        info.compressions.add(names[0])
                    if kinds & 2:
                        info.compressions.add(names[0x7A])
                    index.frombytes(packed)
                    yield framed
                if kinds & _WALK_FULL and resume > begin:
                    # the chunks held back are whole and sound, and more follow them: not the
                    # end of the file, so the next walk takes them again (no Python decoding)
                    begin = resume
                    source.release(begin)
                    continue
                begin = resume
                while begin <= stop and source.ensure(begin + 1):
                    chunk, begin = self._next_chunk(begin)
                    if chunk is not None:
                        held.append(chunk)
                        if len(held) > 2:
                            yield emit(held.popleft())
                source.release(begin)
            info.size = source.end
        except (CorruptShard, UnsupportedFormat):
            while held:  # the records before the bad chunk, then the error
                yield emit(held.popleft())
            raise
        yield from self._tail(held, emit, lambda footer: self._check_footer_packed(footer, index))

    def _tail(
        self,
        held: deque[_Chunk],
        emit: Callable[[_Chunk], _Out],
        check_footer: Callable[[_Chunk], None],
    ) -> Iterator[_Out]:
        """The chunks held back at the end: an ArrayRecord footer and postscript are checked
        (they hold no records), any other chunk's records go out."""
        postscript = held[-1] if held else None
        footer_offset = None if postscript is None else self._postscript_target(postscript)
        if footer_offset is not None and len(held) == 2 and held[0].begin == footer_offset:
            check_footer(held[0])
            self.info.format = "array_record"
            return
        if footer_offset is not None:
            raise _corrupt(
                "bad_index",
                postscript.begin if postscript is not None else 0,
                f"the ArrayRecord postscript names a footer at {footer_offset}, which is not "
                "the simple chunk before it",
                chunk_offset=postscript.begin if postscript is not None else 0,
            )
        while held:
            yield emit(held.popleft())

    def _check_footer_packed(self, footer: _Chunk, index: array[int]) -> None:
        """:meth:`_check_footer` for an index of (offset, decoded size, records) triples:
        compared in C when the footer's entries are byte for byte what array_record writes."""
        speedups = _native.speedups
        records = footer.records
        if speedups is not None and len(records) == len(index) // 3 + 1:
            try:
                metadata = parse_metadata(records[0])
            except ChunkDataError:
                pass
            else:
                if (
                    metadata.num_chunks == len(records) - 1
                    and metadata.num_records == sum(index[2::3])
                    and bytes(speedups.frame(records[1:]))
                    == speedups.riegeli_index_framing(index.tobytes())
                ):
                    self.info.array_record = metadata
                    return
        triples = zip(index[0::3], index[1::3], index[2::3], strict=True)
        self._check_footer(footer, [ChunkIndexEntry(*t) for t in triples])

    # -- records ---------------------------------------------------------------------------

    def _batches(self) -> Iterator[list[bytes]]:
        held: deque[_Chunk] = deque()
        index: list[ChunkIndexEntry] = []
        try:
            for chunk in self._chunks():
                held.append(chunk)
                if len(held) > 2:
                    yield self._emit(held.popleft(), index)
        except (CorruptShard, UnsupportedFormat):
            while held:  # the records before the bad chunk, then the error
                yield self._emit(held.popleft(), index)
            raise
        yield from self._tail(
            held, lambda chunk: self._emit(chunk, index), lambda f: self._check_footer(f, index)
        )

    def _emit(self, chunk: _Chunk, index: list[ChunkIndexEntry]) -> list[bytes]:
        info = self.info
        info.record_count += len(chunk.records)
        info.chunk_count += 1
        info.compressions.add(chunk.compression)
        index.append(ChunkIndexEntry(chunk.begin, chunk.decoded_data_size, len(chunk.records)))
        return chunk.records

    def _postscript_target(self, chunk: _Chunk) -> int | None:
        """The footer offset if ``chunk`` is an ArrayRecord postscript, else None."""
        size = self.info.size
        if (
            chunk.begin % BLOCK_SIZE
            or size - chunk.begin > BLOCK_SIZE
            or chunk.compression != "none"
        ):
            return None
        return parse_postscript(chunk.records)

    def _check_footer(self, footer: _Chunk, index: list[ChunkIndexEntry]) -> None:
        try:
            metadata, entries = parse_footer(footer.records, index)
        except ChunkDataError as exc:
            raise _corrupt(
                exc.reason,
                footer.data_offset,
                f"the ArrayRecord footer: {exc.message}",
                chunk_offset=footer.begin,
            ) from None
        total = sum(entry.num_records for entry in index)
        if entries != index or metadata.num_chunks != len(index) or metadata.num_records != total:
            wrong = next(
                (i for i, (a, b) in enumerate(zip(entries, index, strict=False)) if a != b),
                min(len(entries), len(index)),
            )
            raise _corrupt(
                "bad_index",
                footer.data_offset,
                f"the ArrayRecord footer lists {len(entries)} chunks ({metadata.num_chunks} in its "
                f"metadata, {metadata.num_records} records); the file has {len(index)} data "
                f"chunks with {total} records; they differ from chunk #{wrong}",
                chunk_offset=footer.begin,
            )
        self.info.array_record = metadata


def _framed_cap() -> int:
    """The most bytes of framed records one C walk returns (it stops before a chunk whose
    records would not fit, and the next walk starts there; a chunk larger than that is walked
    with :func:`_room_for` the buffer, and one that never fits is read by the Python code)."""
    return _WALK_OUTPUT


def _room_for(buffered: bytearray) -> int:
    """Room for the records of a large chunk in the buffer: 4x the bytes buffered (a chunk
    whose records need more is read by the Python code)."""
    return max(_WALK_OUTPUT, 4 * len(buffered))


def _walker() -> Callable[..., Any] | None:
    speedups = _native.speedups
    return None if speedups is None else getattr(speedups, "riegeli_walk", None)


def iter_records(fileobj: BinarySource) -> Iterator[bytes]:
    """The user records of a Riegeli/records or ArrayRecord file (see :class:`RiegeliReader`)."""
    return iter(RiegeliReader(fileobj))


def read_chunk_at(fileobj: Any, begin: int, *, read_size: int = 1 << 16) -> tuple[int, list[bytes]]:
    """``(chunk_type, records)`` of the chunk at physical offset ``begin`` of a seekable file:
    the block headers it crosses, its header and data hashes and its records checked, as a
    sequential read checks them (the same :class:`CorruptShard` errors).  For random access
    through an ArrayRecord index; a transposed chunk raises
    :class:`~recordkeeper.errors.UnsupportedFormat`."""
    block_start = begin - begin % BLOCK_SIZE
    fileobj.seek(block_start)
    reader = RiegeliReader(fileobj)
    source = reader._source
    source.base = source.end = block_start
    source.read_size = read_size
    header, data_offset, data, _ = reader._read_chunk_checked(begin)
    if header.chunk_type == ChunkType.TRANSPOSED:
        reader._refuse(header.chunk_type, header.num_records, begin)
    if header.chunk_type != ChunkType.SIMPLE:
        return header.chunk_type, []
    records = _decoded(data, header.num_records, header.decoded_data_size, data_offset, begin)
    return header.chunk_type, records

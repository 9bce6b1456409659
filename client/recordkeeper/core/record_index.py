"""The per-shard record index, the streaming merge of sorted indexes, and the record-set digest.

Index format, version 1 (docs/record-identity.md; all integers little-endian)::

    offset  size     field
    0       6        magic  b"RKRIDX"
    6       2        format version (1)
    8       1        identity kind (1 = bytes, 2 = example: core.record_identity.KIND_CODES)
    9       1        width: bytes per record identity (16 to 32)
    10      6        reserved, zero
    16      8        count: records in the shard (duplicates included)
    24      32       records_sha256 of the shard the index was built from (zeros: unknown)
    56      8        reserved, zero
    64      n * w    the records' identities, sorted ascending as unsigned big-endian numbers
                     (bytes order); a record that occurs k times occurs k times here
    64+n*w  32       sha256 of every byte before it (catches a truncated or damaged index)

So an index costs ``16·n + 96`` bytes at the default width: 1.6 % of the data for 1 KiB
records, 16 % for 100-byte records.  A lookup is a binary search over the fixed-width body
(:meth:`RecordIndex.count_of`); two indexes merge without decoding anything.

Set digest (:class:`SetDigest`): ``sha256(b"rk-record-set-v1\\0" || kind || width || h_1 || …
|| h_n || n)`` over the **sorted multiset** of the identities (``n`` as 8 bytes little-endian).
Sorting makes it independent of order and sharding; keeping duplicates makes it a multiset
digest; the encoding is injective (fixed width, trailing count), so two different multisets
collide only if sha256 does or two different records share an identity.  A sum or XOR of
per-record hashes would be order-invariant too, but Wagner's generalised birthday attack finds
``k`` records whose hashes sum (or XOR) to a chosen value in about ``2^(b/(1+log2 k))`` work —
a 256-bit XOR falls to a few million records chosen by an adversary.  Sorting leaves no algebra
to attack: the digest's collision resistance is sha256's, capped by the identity width
(2^(4·width), see :mod:`recordkeeper.core.record_identity`).  The price: it is not updatable
in place; a version built as a change recomputes it by merging its shards' indexes — 16 bytes
per record read, no shard read.

The version's record digest (:func:`version_records_digest`) hashes each split's name, record
count and set digest, splits in name order: moving a record between splits changes it.
"""

from __future__ import annotations

import hashlib
import operator
import re
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Final, Generic, TypeVar

from recordkeeper.core.errors import InvalidIndex
from recordkeeper.core.record_identity import (
    DEFAULT_WIDTH,
    KIND_CODES,
    IdentityKind,
    record_hasher,
    validate_identity,
)

__all__ = [
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "MAGIC",
    "TRAILER_SIZE",
    "IndexHeader",
    "RecordIndex",
    "RecordIndexBuilder",
    "SetDigest",
    "encode_index",
    "held_index_chunks",
    "identity_in_header",
    "index_chunks",
    "index_size",
    "merge_sorted",
    "set_digest",
    "version_records_digest",
]

MAGIC: Final = b"RKRIDX"
FORMAT_VERSION: Final = 1
HEADER_SIZE: Final = 64
TRAILER_SIZE: Final = 32
_HEADER = struct.Struct("<6sHBB6xQ32s8x")
_NO_SHA = bytes(32)
_KINDS_BY_CODE: Final[dict[int, IdentityKind]] = {v: k for k, v in KIND_CODES.items()}


def identity_in_header(code: int, width: int) -> IdentityKind:
    """The identity kind a stored header's kind ``code`` names, checked with its ``width``
    (record indexes and record lookups); :class:`InvalidIndex` for anything else."""
    kind = _KINDS_BY_CODE.get(code)
    if kind is None:
        raise InvalidIndex(f"unknown identity kind code {code}")
    try:
        validate_identity(kind, width)
    except ValueError as exc:
        raise InvalidIndex(str(exc)) from None
    return kind


T = TypeVar("T")


def index_size(count: int, width: int = DEFAULT_WIDTH) -> int:
    """Bytes of the index of a shard of ``count`` records."""
    return HEADER_SIZE + count * width + TRAILER_SIZE


@dataclass(frozen=True)
class IndexHeader:
    """What an index's first 64 bytes say."""

    kind: IdentityKind
    width: int
    count: int
    records_sha256: str | None  # hex; None when the index did not record it

    def to_bytes(self) -> bytes:
        sha = bytes.fromhex(self.records_sha256) if self.records_sha256 else _NO_SHA
        return _HEADER.pack(
            MAGIC, FORMAT_VERSION, KIND_CODES[self.kind], self.width, self.count, sha
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> IndexHeader:
        """Parse a header; :class:`~recordkeeper.errors.InvalidIndex` for anything else."""
        if len(data) < HEADER_SIZE:
            raise InvalidIndex(f"a record index starts with {HEADER_SIZE} bytes, got {len(data)}")
        magic, version, code, width, count, sha = _HEADER.unpack_from(data)
        if magic != MAGIC:
            raise InvalidIndex("not a record index (bad magic)")
        if version != FORMAT_VERSION:
            raise InvalidIndex(f"record index format {version} is not supported (this is 1)")
        kind = identity_in_header(code, width)
        return cls(kind, width, count, None if sha == _NO_SHA else sha.hex())


class RecordIndexBuilder:
    """Builds one shard's index from its records, in the order the shard holds them.

    The hook a writer, publish or a deep verify calls once per record: ``add(record)``, then
    ``finish()`` for the index bytes.  ``add_hash`` takes an identity computed elsewhere.
    """

    def __init__(self, kind: IdentityKind = "bytes", width: int = DEFAULT_WIDTH) -> None:
        self.kind, self.width = validate_identity(kind, width)
        self._hash = record_hasher(self.kind, self.width)
        self._hashes: list[bytes] = []

    @property
    def count(self) -> int:
        return len(self._hashes)

    def add(self, record: bytes) -> None:
        self._hashes.append(self._hash(record))

    def add_many(self, records: Iterable[bytes]) -> None:
        self._hashes.extend(map(self._hash, records))

    def add_hash(self, identity: bytes) -> None:
        if len(identity) != self.width:
            raise InvalidIndex(f"a record identity is {self.width} bytes, got {len(identity)}")
        self._hashes.append(bytes(identity))

    def finish(self, records_sha256: str | None = None) -> bytes:
        """The index bytes (header, sorted identities, trailer)."""
        return encode_index(self.kind, self.width, b"".join(sorted(self._hashes)), records_sha256)


def encode_index(
    kind: IdentityKind, width: int, sorted_body: bytes, records_sha256: str | None = None
) -> bytes:
    """An index's bytes from its identities already sorted and joined (``sorted_body``): what
    :meth:`RecordIndexBuilder.finish` gives, for callers that collect and sort identities
    themselves (the client's inline indexing, in C)."""
    kind, width = validate_identity(kind, width)
    if len(sorted_body) % width:
        raise InvalidIndex(f"{len(sorted_body)} bytes are not whole {width}-byte identities")
    header = IndexHeader(kind, width, len(sorted_body) // width, records_sha256)
    data = header.to_bytes() + sorted_body
    return data + hashlib.sha256(data).digest()


class RecordIndex:
    """One index held in memory: its header and a binary search over its identities."""

    def __init__(self, data: bytes) -> None:
        self.header = IndexHeader.from_bytes(data)
        w, n = self.header.width, self.header.count
        if len(data) != index_size(n, w):
            raise InvalidIndex(
                f"a record index of {n} records is {index_size(n, w)} bytes, got {len(data)}"
            )
        end = HEADER_SIZE + n * w
        if hashlib.sha256(data[:end]).digest() != data[end:]:
            raise InvalidIndex("the record index is damaged (its checksum does not match)")
        self._body = bytes(data[HEADER_SIZE:end])
        self._keys = _Keys(self._body, w)
        if any(self._keys[i] > self._keys[i + 1] for i in range(n - 1)):
            raise InvalidIndex("the record index is not sorted")

    def __len__(self) -> int:
        return self.header.count

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._keys)

    def __contains__(self, identity: object) -> bool:
        return isinstance(identity, bytes) and self.count_of(identity) > 0

    def count_of(self, identity: bytes) -> int:
        """How many records of the shard have this identity (binary search)."""
        n = self.header.count
        return bisect_right(self._keys, identity, 0, n) - bisect_left(self._keys, identity, 0, n)

    @property
    def body(self) -> bytes:
        """The sorted identities, concatenated."""
        return self._body


class _Keys(Sequence[bytes]):
    """The fixed-width identities of a body as a sequence (what ``bisect`` searches)."""

    def __init__(self, body: bytes, width: int) -> None:
        self._body, self._w = body, width

    def __len__(self) -> int:
        return len(self._body) // self._w

    def __getitem__(self, i: int) -> bytes:  # type: ignore[override]  # int indexes only
        w = self._w
        if not 0 <= i < len(self._body) // w:
            raise IndexError(i)
        return self._body[i * w : (i + 1) * w]

    def __iter__(self) -> Iterator[bytes]:
        body, w = self._body, self._w
        return (body[i : i + w] for i in range(0, len(body) - len(body) % w, w))


def index_chunks(
    read: Callable[[int], bytes], chunk_records: int = 65536
) -> tuple[IndexHeader, Iterator[bytes]]:
    """Stream an index from ``read(n)``: its header, and its body in chunks of up to
    ``chunk_records`` identities.  The trailer is checked when the body has been read (a
    damaged index raises :class:`~recordkeeper.errors.InvalidIndex` from the iterator)."""
    head = read(HEADER_SIZE)
    header = IndexHeader.from_bytes(head)
    if chunk_records < 1:
        raise ValueError("chunk_records must be at least 1")

    def chunks() -> Iterator[bytes]:
        digest = hashlib.sha256(head)
        left = header.count * header.width
        step = chunk_records * header.width
        last = b""
        while left:
            data = read(min(step, left))
            if not data:
                raise InvalidIndex("the record index is truncated")
            if len(data) % header.width:  # a short read mid-identity: complete it
                more = read(header.width - len(data) % header.width)
                data += more
                if len(data) % header.width:
                    raise InvalidIndex("the record index is truncated")
            left -= len(data)
            digest.update(data)
            if data[: header.width] < last:
                raise InvalidIndex("the record index is not sorted")
            last = data[-header.width :]
            yield data
        if read(TRAILER_SIZE) != digest.digest():
            raise InvalidIndex("the record index is damaged (its checksum does not match)")

    return header, chunks()


def held_index_chunks(data: bytes, chunk_records: int = 65536) -> Iterator[bytes]:
    """:func:`index_chunks` of an index held whole in memory, as one iterator: the same
    chunks and the same checks and errors, in the same order (a bad header raises on the first
    ``next``), from slices of ``data`` with one sha256 over it instead of a reader, a closure
    and a digest update per chunk (publish holds the index of each of 2,000 small shards)."""
    header = IndexHeader.from_bytes(data[:HEADER_SIZE])
    if chunk_records < 1:
        raise ValueError("chunk_records must be at least 1")
    width = header.width
    end = HEADER_SIZE + header.count * width
    step = chunk_records * width
    pos, last = HEADER_SIZE, b""
    while pos < end:
        chunk = data[pos : min(pos + step, end)]
        if not chunk or len(chunk) % width:  # what a short read gives a reader
            raise InvalidIndex("the record index is truncated")
        if chunk[:width] < last:
            raise InvalidIndex("the record index is not sorted")
        last = chunk[-width:]
        pos += len(chunk)
        yield chunk
    if data[end : end + TRAILER_SIZE] != hashlib.sha256(data[:end]).digest():
        raise InvalidIndex("the record index is damaged (its checksum does not match)")


# --------------------------------------------------------------------------- streaming merge


class _Source(Generic[T]):
    __slots__ = ("buf", "chunks", "done", "last_taken", "pos", "split", "tag")

    def __init__(
        self, tag: T, chunks: Iterator[bytes], split: Callable[[bytes], list[bytes]]
    ) -> None:
        self.tag, self.chunks, self.split = tag, chunks, split
        self.buf, self.pos, self.done = b"", 0, False
        self.last_taken = b""

    def _next_chunk(self) -> bytes | None:
        """The next chunk, refused unless its identities are in order after the last chunk's:
        the merge's bound and bisections rely on it (an unsorted chunk stopped it from making
        progress), as the C merge does."""
        chunk = next(self.chunks, None)
        if chunk is None:
            return None
        data = bytes(chunk)
        ids = self.split(data)
        if ids:
            if ids[0] < self.last_taken or not all(map(operator.le, ids, islice(ids, 1, None))):
                raise InvalidIndex("the record index is not sorted")
            self.last_taken = ids[-1]
        return data

    def fill(self, width: int) -> None:
        """Make the buffer hold at least one identity unless the source is exhausted."""
        while not self.done and self.pos >= len(self.buf):
            chunk = self._next_chunk()
            if chunk is None:
                self.done = True
            else:
                self.buf, self.pos = chunk, 0

    def extend(self) -> None:
        chunk = self._next_chunk()
        if chunk is None:
            self.done = True
        else:
            self.buf, self.pos = self.buf[self.pos :] + chunk, 0

    def last(self, width: int) -> bytes:
        return self.buf[-width:]


def merge_sorted(
    sources: Iterable[tuple[T, Iterator[bytes]]], width: int, *, sort: bool = True
) -> Iterator[dict[T, list[bytes]]]:
    """Merge sorted identity streams into batches over consecutive key ranges.

    Each source is ``(tag, chunks)``: chunks of concatenated ``width``-byte identities, sorted
    within and across chunks (an index body read by :func:`index_chunks`).  Each batch maps a
    tag to the sorted identities of its sources that fall in the batch's key range; every
    identity lands in exactly one batch, and all copies of one identity in the same batch (so a
    consumer counts duplicates and overlaps batch by batch).  Memory: the sources' current
    chunks plus one batch — bounded by the number of sources times the chunk size, not by the
    record count (a run of copies of a single identity longer than a chunk is held whole).
    A source out of order raises :class:`~recordkeeper.errors.InvalidIndex`.
    With ``sort=False`` a tag's identities are its sources' runs one after the other, unsorted
    (enough for counting; a set digest needs them sorted).
    """
    split = re.compile(b"(?s).{%d}" % width).findall  # fixed-width pieces, split in C
    live = [_Source(tag, iter(chunks), split) for tag, chunks in sources]
    while True:
        for s in live:
            s.fill(width)
        live = [s for s in live if s.pos < len(s.buf)]
        if not live:
            return
        pending = [s for s in live if not s.done]
        if pending:
            bound_source = min(pending, key=lambda s: s.last(width))
            bound = bound_source.last(width)
            if bound_source.buf[bound_source.pos : bound_source.pos + width] == bound:
                # Everything this source holds equals the bound: a later chunk may hold more
                # copies, so read on before emitting any of them.
                bound_source.extend()
                continue
        else:
            bound = None  # every source is exhausted: emit all that is left
        batch: dict[T, list[bytes]] = {}
        for s in live:
            keys = _Keys(s.buf, width)
            lo = s.pos // width
            hi = len(keys) if bound is None else bisect_left(keys, bound, lo)
            if hi > lo:
                part = s.buf[lo * width : hi * width]
                out = batch.setdefault(s.tag, [])
                out.extend(split(part))
                s.pos = hi * width
        if sort:
            for items in batch.values():
                items.sort()  # sorted runs of one tag's sources: Timsort merges them in C
        yield batch


# --------------------------------------------------------------------------- digests


class SetDigest:
    """The order-invariant multiset digest of one split (see the module docstring).

    Feed it the identities in sorted order (:meth:`update_sorted`, e.g. the batches of
    :func:`merge_sorted`); an identity smaller than the previous one is refused.
    """

    def __init__(self, kind: IdentityKind = "bytes", width: int = DEFAULT_WIDTH) -> None:
        self.kind, self.width = validate_identity(kind, width)
        self._sha = hashlib.sha256(b"rk-record-set-v1\0" + bytes([KIND_CODES[kind], width]))
        self.count = 0
        self._last = b""

    def update_sorted(self, identities: Sequence[bytes]) -> None:
        if not identities:
            return
        if identities[0] < self._last:
            raise InvalidIndex("identities given to a set digest out of order")
        self._last = identities[-1]
        self._sha.update(b"".join(identities))
        self.count += len(identities)

    def update_sorted_body(self, body: bytes) -> None:
        """:meth:`update_sorted` for identities already joined (an index body, or bodies
        merged and sorted by the caller); only its ends are checked against the order."""
        w = self.width
        if len(body) % w:
            raise InvalidIndex(f"{len(body)} bytes are not whole {w}-byte identities")
        if not body:
            return
        if body[:w] < self._last:
            raise InvalidIndex("identities given to a set digest out of order")
        self._last = bytes(body[-w:])
        self._sha.update(body)
        self.count += len(body) // w

    def hexdigest(self) -> str:
        sha = self._sha.copy()
        sha.update(self.count.to_bytes(8, "little"))
        return sha.hexdigest()


def set_digest(
    identities: Iterable[bytes], kind: IdentityKind = "bytes", width: int = DEFAULT_WIDTH
) -> str:
    """The set digest of identities in any order (sorts them in memory: for tests and small
    sets; versions use :func:`merge_sorted` over their indexes)."""
    digest = SetDigest(kind, width)
    digest.update_sorted(sorted(identities))
    return digest.hexdigest()


def version_records_digest(
    splits: Mapping[str, tuple[int, str]], kind: IdentityKind = "bytes", width: int = DEFAULT_WIDTH
) -> str:
    """A version's record digest from ``{split: (record count, set digest hex)}``."""
    kind, width = validate_identity(kind, width)
    sha = hashlib.sha256(b"rk-record-version-v1\0" + bytes([KIND_CODES[kind], width]))
    for name in sorted(splits):
        count, digest = splits[name]
        encoded = name.encode("utf-8")
        sha.update(len(encoded).to_bytes(2, "little") + encoded)
        sha.update(count.to_bytes(8, "little") + bytes.fromhex(digest))
    return sha.hexdigest()

"""The per-version record lookup: which shards of a version may hold a record, in a few reads.

A version's shard indexes (:mod:`recordkeeper.core.record_index`) answer "is this record in
this shard"; asking each of 10,000 shards costs 10,000 reads.  The lookup answers "which shards"
for the whole version from one file with a fan-out table, reading four small ranges whatever the
version's size.  Format version 1 (docs/record-identity.md; integers little-endian)::

    offset        size        field
    0             6           magic b"RKRLKP"
    6             2           format version (1)
    8             1           identity kind (core.record_identity.KIND_CODES)
    9             1           width of the identities it was built from (16 to 32)
    10            1           fan-out bits b (0 to 24)
    11            5           reserved, zero
    16            8           n: entries (records of the version, every copy counted)
    24            4           s: shards
    28            36          reserved, zero
    64            12 * n      entries sorted ascending: the identity's first 8 bytes, then the
                              shard's ordinal (u32) in the version's shard table
    64 + 12n      8 * (2^b+1) fan-out: entry index of the first entry whose top b bits are >= i
    ...           64 * s      shard table, by ordinal: the shard file's sha256, then its
                              records_sha256 (32 bytes each)

A query reads the header, two fan-out slots, one bucket (n / 2^b entries, ~100 by the default
choice of b) and the shard table rows of the candidates.  An entry keeps 8 bytes of the
identity: a record that is not in the version matches an entry by chance with probability
below n / 2^64 (5·10⁻¹³ for ten million records), and callers confirm each candidate in that
shard's full index (an exact answer, still no shard read).
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from recordkeeper.core.errors import InvalidIndex
from recordkeeper.core.record_identity import (
    KIND_CODES,
    IdentityKind,
    validate_identity,
)
from recordkeeper.core.record_index import HEADER_SIZE as INDEX_HEADER_SIZE
from recordkeeper.core.record_index import IndexHeader, identity_in_header, merge_sorted

__all__ = [
    "LOOKUP_FORMAT_VERSION",
    "LOOKUP_MAGIC",
    "LookupHeader",
    "LookupShard",
    "count_in_index",
    "fanout_bits",
    "lookup_candidates",
    "lookup_size",
    "write_lookup",
]

LOOKUP_MAGIC: Final = b"RKRLKP"
LOOKUP_FORMAT_VERSION: Final = 1
_HEADER = struct.Struct("<6sHBBB5xQI36x")
HEADER_SIZE: Final = 64
ENTRY_SIZE: Final = 12
PREFIX: Final = 8
SHARD_ROW: Final = 64
_TARGET_BUCKET: Final = 128


def fanout_bits(entries: int) -> int:
    """Fan-out bits for ``entries``: buckets of about 128 entries, at most 2^24 of them."""
    bits = 0
    while bits < 24 and (entries >> bits) > _TARGET_BUCKET:
        bits += 1
    return bits


def lookup_size(entries: int, shards: int) -> int:
    """Bytes of a lookup of ``entries`` entries over ``shards`` shards."""
    return HEADER_SIZE + ENTRY_SIZE * entries + 8 * ((1 << fanout_bits(entries)) + 1) + 64 * shards


@dataclass(frozen=True)
class LookupShard:
    """A row of the shard table: the shard file's sha256 and its records_sha256 (hex)."""

    sha256: str
    records_sha256: str


@dataclass(frozen=True)
class LookupHeader:
    kind: IdentityKind
    width: int
    bits: int
    entries: int
    shards: int

    def to_bytes(self) -> bytes:
        return _HEADER.pack(
            LOOKUP_MAGIC,
            LOOKUP_FORMAT_VERSION,
            KIND_CODES[self.kind],
            self.width,
            self.bits,
            self.entries,
            self.shards,
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> LookupHeader:
        if len(data) < HEADER_SIZE:
            raise InvalidIndex(f"a record lookup starts with {HEADER_SIZE} bytes, got {len(data)}")
        magic, version, code, width, bits, entries, shards = _HEADER.unpack_from(data)
        if magic != LOOKUP_MAGIC:
            raise InvalidIndex("not a record lookup (bad magic)")
        if version != LOOKUP_FORMAT_VERSION:
            raise InvalidIndex(f"record lookup format {version} is not supported (this is 1)")
        kind = identity_in_header(code, width)
        if bits > 24 or bits != fanout_bits(entries):
            raise InvalidIndex(f"record lookup fan-out of {bits} bits for {entries} entries")
        return cls(kind, width, bits, entries, shards)

    @property
    def fanout_at(self) -> int:
        return HEADER_SIZE + ENTRY_SIZE * self.entries

    @property
    def shards_at(self) -> int:
        return self.fanout_at + 8 * ((1 << self.bits) + 1)

    @property
    def size(self) -> int:
        return self.shards_at + SHARD_ROW * self.shards


def _top(prefix: bytes, bits: int) -> int:
    return int.from_bytes(prefix, "big") >> (64 - bits) if bits else 0


#: ``record_lookup_stream(sources, width, bits, write, block) -> (entries, fanout bytes)``:
#: the entries and fan-out merged in C (``client/recordkeeper/_speedups.c``).
NativeLookup = Callable[
    [list[Iterator[bytes]], int, int, Callable[[bytes], object], int], tuple[int, bytes]
]


def write_lookup(
    shards: Sequence[tuple[LookupShard, Iterator[bytes]]],
    entries: int,
    kind: IdentityKind,
    width: int,
    write: Callable[[bytes], object],
    *,
    native: NativeLookup | None = None,
) -> None:
    """Write a version's lookup (see the module docstring).

    ``shards``: per shard, its table row and its sorted index body as chunks (what
    :func:`recordkeeper.core.record_index.index_chunks` streams); ``entries``: the records of
    all of them (the sum of the index headers' counts, known before the bodies are read, so the
    file streams out front to back).  Memory: the merge's chunks, one batch and the fan-out
    table (8 bytes per bucket), not the entries.  Entries are in (identity, ordinal) order.
    ``native``: ``recordkeeper._speedups.record_lookup_stream`` when built (the same bytes)."""
    kind, width = validate_identity(kind, width)
    if len(shards) >= 2**32:
        raise InvalidIndex("a record lookup holds at most 2^32 - 1 shards")
    header = LookupHeader(kind, width, fanout_bits(entries), entries, len(shards))
    bits = header.bits
    write(header.to_bytes())
    if native is not None:
        written, fanout = native([chunks for _, chunks in shards], width, bits, write, 1 << 20)
    else:
        written, fanout = _entries(shards, width, bits, write)
    if written != entries:
        raise InvalidIndex(f"the shard indexes hold {written} records, expected {entries}")
    write(fanout)
    write(
        b"".join(bytes.fromhex(row.sha256) + bytes.fromhex(row.records_sha256) for row, _ in shards)
    )


def _entries(
    shards: Sequence[tuple[LookupShard, Iterator[bytes]]],
    width: int,
    bits: int,
    write: Callable[[bytes], object],
) -> tuple[int, bytes]:
    """The pure-Python reference of ``record_lookup_stream``: entries written, fan-out."""
    starts = [0] * ((1 << bits) + 1)  # counts per bucket first, prefix sums at the end
    written = 0
    sources = [(ordinal, chunks) for ordinal, (_, chunks) in enumerate(shards)]
    for batch in merge_sorted(sources, width, sort=False):
        pairs = sorted((h, ordinal) for ordinal, items in batch.items() for h in items)
        rows = [h[:PREFIX] + ordinal.to_bytes(4, "little") for h, ordinal in pairs]
        for row in rows:
            starts[_top(row[:PREFIX], bits) + 1] += 1
        written += len(rows)
        write(b"".join(rows))
    for i in range(1, len(starts)):
        starts[i] += starts[i - 1]
    return written, struct.pack(f"<{len(starts)}Q", *starts)


def lookup_candidates(
    read: Callable[[int, int], bytes], identity: bytes
) -> tuple[LookupHeader, list[tuple[int, LookupShard]]]:
    """The shards of a version with an entry matching ``identity``'s first 8 bytes, each once
    as ``(ordinal, row)``, from ``read(offset, size)`` over the lookup file (four small reads;
    confirm each candidate in its shard's index for an exact answer)."""
    header = LookupHeader.from_bytes(read(0, HEADER_SIZE))
    if len(identity) != header.width:
        raise InvalidIndex(
            f"a {header.kind}/{header.width} lookup takes {header.width}-byte identities, "
            f"got {len(identity)} bytes"
        )
    prefix = identity[:PREFIX]
    bucket = _top(prefix, header.bits)
    starts = read(header.fanout_at + 8 * bucket, 16)
    if len(starts) != 16:  # the header claims more entries than the file holds
        raise InvalidIndex("the record lookup is truncated")
    lo, hi = struct.unpack("<QQ", starts)
    if not lo <= hi <= header.entries:
        raise InvalidIndex("the record lookup's fan-out table is damaged")
    if hi == lo:
        return header, []
    data = read(HEADER_SIZE + ENTRY_SIZE * lo, ENTRY_SIZE * (hi - lo))
    if len(data) != ENTRY_SIZE * (hi - lo):
        raise InvalidIndex("the record lookup is truncated")
    keys = _Prefixes(data)
    first, last = bisect_left(keys, prefix), bisect_right(keys, prefix)
    ordinals = sorted(
        {
            int.from_bytes(data[i * ENTRY_SIZE + PREFIX : (i + 1) * ENTRY_SIZE], "little")
            for i in range(first, last)
        }
    )
    found = []
    for ordinal in ordinals:
        if ordinal >= header.shards:
            raise InvalidIndex("the record lookup names a shard it does not hold")
        row = read(header.shards_at + SHARD_ROW * ordinal, SHARD_ROW)
        if len(row) != SHARD_ROW:
            raise InvalidIndex("the record lookup is truncated")
        found.append((ordinal, LookupShard(row[:32].hex(), row[32:].hex())))
    return header, found


class _Prefixes(Sequence[bytes]):
    def __init__(self, data: bytes) -> None:
        self._data = data

    def __len__(self) -> int:
        return len(self._data) // ENTRY_SIZE

    def __getitem__(self, i: int) -> bytes:  # type: ignore[override]  # int indexes only
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._data[i * ENTRY_SIZE : i * ENTRY_SIZE + PREFIX]

    def __iter__(self) -> Iterator[bytes]:
        return (self._data[i : i + PREFIX] for i in range(0, len(self._data), ENTRY_SIZE))


def count_in_index(read: Callable[[int, int], bytes], identity: bytes) -> int:
    """How many records of a shard have ``identity``, by a binary search over its index file
    (:mod:`recordkeeper.core.record_index` format) through ``read(offset, size)``: about
    ``2·log2(n)`` reads of one identity, never the whole index."""
    header = IndexHeader.from_bytes(read(0, INDEX_HEADER_SIZE))
    w, n = header.width, header.count
    if len(identity) != w:
        raise InvalidIndex(f"the index holds {w}-byte identities, got {len(identity)} bytes")

    def key(i: int) -> bytes:
        data = read(INDEX_HEADER_SIZE + i * w, w)
        if len(data) != w:
            raise InvalidIndex("the record index is truncated")
        return data

    def bound(strict: bool) -> int:
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            k = key(mid)
            if k < identity or (strict and k == identity):
                lo = mid + 1
            else:
                hi = mid
        return lo

    first = bound(False)
    if first == n or key(first) != identity:
        return 0
    return bound(True) - first

"""The per-version record lookup (recordkeeper.core.record_lookup): format, candidates, and the
range-read index search, against a direct scan (property tests)."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recordkeeper.core.errors import InvalidIndex
from recordkeeper.core.record_identity import record_hash
from recordkeeper.core.record_index import RecordIndexBuilder
from recordkeeper.core.record_lookup import (
    LookupHeader,
    LookupShard,
    count_in_index,
    fanout_bits,
    lookup_candidates,
    lookup_size,
    write_lookup,
)

W = 16


def reader(data: bytes) -> Callable[[int, int], bytes]:
    return lambda offset, size: data[offset : offset + size]


def body_chunks(ids: list[bytes], chunk: int = 3) -> Iterator[bytes]:
    body = b"".join(sorted(ids))
    for i in range(0, len(body), chunk * W):
        yield body[i : i + chunk * W]


def build(shards: list[list[bytes]]) -> bytes:
    out = io.BytesIO()
    rows = [
        (LookupShard(hashlib.sha256(bytes([i])).hexdigest(), "ab" * 32), body_chunks(ids))
        for i, ids in enumerate(shards)
    ]
    write_lookup(rows, sum(map(len, shards)), "bytes", W, out.write)
    return out.getvalue()


# identities sharing 8-byte prefixes are common here: a candidate is a prefix match
ident = st.sampled_from([bytes([i % 5]) * 8 + bytes([i]) * 8 for i in range(40)])


@settings(max_examples=200, deadline=None)
@given(shards=st.lists(st.lists(ident, max_size=40), max_size=8), probe=ident)
def test_candidates_are_exactly_the_shards_with_the_prefix(
    shards: list[list[bytes]], probe: bytes
) -> None:
    data = build(shards)
    header, found = lookup_candidates(reader(data), probe)
    assert len(data) == header.size == lookup_size(header.entries, len(shards))
    expected = [i for i, ids in enumerate(shards) if any(h[:8] == probe[:8] for h in ids)]
    assert [o for o, _ in found] == expected
    for o, row in found:
        assert row.sha256 == hashlib.sha256(bytes([o])).hexdigest()


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(ident, max_size=60), probe=ident)
def test_count_in_index_by_range_reads(ids: list[bytes], probe: bytes) -> None:
    builder = RecordIndexBuilder()
    for h in ids:
        builder.add_hash(h)
    assert count_in_index(reader(builder.finish()), probe) == ids.count(probe)


def test_a_real_record_and_the_fanout() -> None:
    shards = [[record_hash(f"{s}-{i}".encode()) for i in range(500)] for s in range(6)]
    data = build(shards)
    header = LookupHeader.from_bytes(data)
    assert header.bits == fanout_bits(3000) == 5  # buckets of about 100 entries
    _, found = lookup_candidates(reader(data), record_hash(b"4-17"))
    assert [o for o, _ in found] == [4]
    assert lookup_candidates(reader(data), record_hash(b"absent"))[1] == []
    assert fanout_bits(10_000_000) == 17


def test_damaged_or_foreign_files_are_refused() -> None:
    data = build([[record_hash(b"x")]])
    with pytest.raises(InvalidIndex, match="bad magic"):
        lookup_candidates(reader(b"X" * 64), record_hash(b"x"))
    with pytest.raises(InvalidIndex, match="format 9"):
        lookup_candidates(reader(data[:6] + b"\x09\x00" + data[8:]), record_hash(b"x"))
    with pytest.raises(InvalidIndex, match="16-byte identities"):
        lookup_candidates(reader(data), b"short")
    with pytest.raises(InvalidIndex, match="expected 5"):
        write_lookup(
            [(LookupShard("00" * 32, "00" * 32), body_chunks([record_hash(b"x")]))],
            5,
            "bytes",
            W,
            io.BytesIO().write,
        )


def test_a_header_claiming_more_entries_than_the_file_holds_is_truncated() -> None:
    """A lookup's header counts its entries, and where the fan-out table is follows from it:
    a count beyond the file put that read past the end (struct.error, not InvalidIndex)."""
    data = build([[record_hash(b"x"), record_hash(b"y")]])
    header = LookupHeader.from_bytes(data)
    for entries in (1 << 40, (1 << 64) - 1):
        lying = LookupHeader(header.kind, header.width, fanout_bits(entries), entries, 1)
        with pytest.raises(InvalidIndex, match="truncated"):
            lookup_candidates(reader(lying.to_bytes() + data[64:]), record_hash(b"x"))

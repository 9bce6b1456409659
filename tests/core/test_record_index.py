"""recordkeeper.core.record_index / record_diff: the index format, the merge, the set digest."""

from __future__ import annotations

import io
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recordkeeper.core.errors import InvalidIndex
from recordkeeper.core.record_diff import diff_records, leakage
from recordkeeper.core.record_identity import record_hash
from recordkeeper.core.record_index import (
    HEADER_SIZE,
    IndexHeader,
    RecordIndex,
    RecordIndexBuilder,
    SetDigest,
    index_chunks,
    index_size,
    merge_sorted,
    set_digest,
    version_records_digest,
)

W = 16
records_st = st.lists(st.binary(max_size=6), max_size=60)


def _index(records: list[bytes], sha: str | None = None) -> bytes:
    builder = RecordIndexBuilder()
    for r in records:
        builder.add(r)
    return builder.finish(sha)


def _chunks(data: bytes, chunk: int = 3):
    return index_chunks(io.BytesIO(data).read, chunk)[1]


def _sharded_digest(shards: list[list[bytes]], chunk: int) -> str:
    digest = SetDigest()
    sources = [("s", _chunks(_index(s), chunk)) for s in shards]
    for batch in merge_sorted(sources, W):
        digest.update_sorted(batch.get("s", []))
    return digest.hexdigest()


def _partition(records: list[bytes], seed: int, parts: int) -> list[list[bytes]]:
    rng = random.Random(seed)
    shuffled = records[:]
    rng.shuffle(shuffled)
    shards: list[list[bytes]] = [[] for _ in range(parts)]
    for r in shuffled:
        shards[rng.randrange(parts)].append(r)
    return shards


@settings(max_examples=150, deadline=None)
@given(records_st, st.integers(0, 2**32), st.integers(1, 7), st.integers(1, 5))
def test_set_digest_is_invariant_to_order_and_sharding(records, seed, parts, chunk) -> None:
    whole = set_digest(record_hash(r) for r in records)
    assert _sharded_digest(_partition(records, seed, parts), chunk) == whole
    assert _sharded_digest([records], 64) == whole


@settings(max_examples=100, deadline=None)
@given(records_st, st.binary(max_size=6))
def test_set_digest_counts_copies_and_sees_a_one_record_change(records, extra) -> None:
    base = set_digest(record_hash(r) for r in records)
    assert set_digest(record_hash(r) for r in [*records, extra]) != base  # one more copy
    if records:
        changed = [*records[1:], records[0] + b"!"]
        assert set_digest(record_hash(r) for r in changed) != base


def test_set_digest_differs_from_a_sum_or_xor_shaped_collision() -> None:
    # {x, x} and {} collide under XOR; {x, y} and {y, x} must collide (same multiset).
    x, y = record_hash(b"x"), record_hash(b"y")
    assert set_digest([x, x]) != set_digest([])
    assert set_digest([x, y]) == set_digest([y, x])
    assert set_digest([x], "bytes", 16) != set_digest([x], "example", 16)


def test_index_round_trip_lookup_and_header() -> None:
    records = [b"a", b"b", b"a", b"c"]
    data = _index(records, "ab" * 32)
    assert len(data) == index_size(4) == HEADER_SIZE + 4 * 16 + 32
    index = RecordIndex(data)
    assert index.header == IndexHeader("bytes", 16, 4, "ab" * 32)
    assert index.count_of(record_hash(b"a")) == 2
    assert record_hash(b"c") in index and record_hash(b"z") not in index
    assert list(index) == sorted(record_hash(r) for r in records)


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:-1],
        lambda d: d[:HEADER_SIZE] + bytes([d[HEADER_SIZE] ^ 1]) + d[HEADER_SIZE + 1 :],
        lambda d: b"XXXXXX" + d[6:],
        lambda d: d[:6] + b"\x02\x00" + d[8:],
        lambda d: d[:8] + b"\x07" + d[9:],
        lambda d: d[:9] + b"\x08" + d[10:],
        lambda d: d[:10],
    ],
)
def test_a_damaged_index_is_refused(damage) -> None:
    data = damage(_index([b"a", b"b", b"c"]))
    with pytest.raises(InvalidIndex):
        RecordIndex(data)
    with pytest.raises(InvalidIndex):
        list(index_chunks(io.BytesIO(data).read, 1)[1])


def test_merge_keeps_every_copy_of_an_identity_in_one_batch() -> None:
    records = [b"same"] * 9 + [b"other"] * 3 + [b"x"]
    sources = [(i, _chunks(_index(s), 1)) for i, s in enumerate([records[:5], records[5:]])]
    seen: Counter[bytes] = Counter()
    for batch in merge_sorted(sources, W):
        here = Counter(h for items in batch.values() for h in items)
        assert not set(here) & set(seen)
        seen.update(here)
    assert seen == Counter(record_hash(r) for r in records)


@pytest.mark.parametrize(
    "chunks",
    [
        [bytes([5]) * W + bytes([3]) * W],  # inside a chunk: index_chunks does not see it
        [bytes([1]) * W + bytes([2]) * W + bytes([1]) * W],
        [bytes([7]) * W, bytes([3]) * W],  # where two chunks meet
    ],
)
def test_merge_refuses_a_source_out_of_order(chunks: list[bytes]) -> None:
    """A chunk out of order (an index written by anyone) is refused with the error
    index_chunks gives; before, the merge yielded empty batches forever."""
    sources = [(0, iter(chunks)), (1, iter([bytes([9]) * W]))]
    batches = merge_sorted(sources, W)
    with pytest.raises(InvalidIndex, match="the record index is not sorted"):
        for _ in range(1000):  # a bound: an unfixed merge makes no progress
            next(batches)


def _brute_diff(a: dict[str, list[bytes]], b: dict[str, list[bytes]]):
    out = {}
    for name in set(a) | set(b):
        ca = Counter(map(record_hash, a.get(name, [])))
        cb = Counter(map(record_hash, b.get(name, [])))
        common = sum((ca & cb).values())
        out[name] = (
            sum((cb - ca).values()),
            sum((ca - cb).values()),
            common,
            sum(ca.values()) - len(ca),
            sum(cb.values()) - len(cb),
        )
    return out


splits_st = st.dictionaries(st.sampled_from(["train", "test", "validation"]), records_st)


@settings(max_examples=120, deadline=None)
@given(splits_st, splits_st, st.integers(1, 4))
def test_record_diff_matches_counting_in_memory(a, b, chunk) -> None:
    def streams(side):
        return [
            (name, _chunks(_index(part), chunk))
            for name, recs in side.items()
            for part in _partition(recs, 1, 2)
        ]

    diff = diff_records(streams(a), streams(b), W)
    for name, (added, removed, common, dup_a, dup_b) in _brute_diff(a, b).items():
        d = diff.splits[name]
        assert (d.added, d.removed, d.common, d.duplicates_a, d.duplicates_b) == (
            added,
            removed,
            common,
            dup_a,
            dup_b,
        )
    all_a = {record_hash(r) for v in a.values() for r in v}
    all_b = {record_hash(r) for v in b.values() for r in v}
    assert (diff.new, diff.gone) == (len(all_b - all_a), len(all_a - all_b))


def test_record_diff_finds_moves_and_streams_lists() -> None:
    a = {"train": [b"1", b"2", b"3"], "test": [b"4"]}
    b = {"train": [b"1", b"2"], "test": [b"4", b"3", b"5"]}
    emitted: list[tuple[str, str, str]] = []
    diff = diff_records(
        [(k, _chunks(_index(v))) for k, v in a.items()],
        [(k, _chunks(_index(v))) for k, v in b.items()],
        W,
        emit=lambda cat, split, h: emitted.append((cat, split, h.hex())),
    )
    assert diff.moved == {("train", "test"): 1}
    assert (diff.new, diff.gone) == (1, 0)
    assert ("moved", "train->test", record_hash(b"3").hex()) in emitted
    assert ("added", "test", record_hash(b"5").hex()) in emitted
    assert diff.splits["test"].sample_added == sorted(
        [record_hash(b"3").hex(), record_hash(b"5").hex()]
    )


@settings(max_examples=100, deadline=None)
@given(records_st, records_st)
def test_leakage_counts_match_counting_in_memory(train, test) -> None:
    sources = [
        (("v", "train"), _chunks(_index(train), 2)),
        (("v", "test"), _chunks(_index(test), 3)),
    ]
    (pair,) = leakage(sources, [(("v", "test"), ("v", "train"))], W)
    train_ids = {record_hash(r) for r in train}
    test_ids = [record_hash(r) for r in test]
    assert pair.records == len(test)
    assert pair.leaked == sum(h in train_ids for h in test_ids)
    assert pair.distinct == len(set(test_ids) & train_ids)


def test_version_digest_depends_on_split_assignment() -> None:
    d1, d2 = set_digest([record_hash(b"1")]), set_digest([record_hash(b"2")])
    one = version_records_digest({"train": (1, d1), "test": (1, d2)})
    assert one == version_records_digest({"test": (1, d2), "train": (1, d1)})
    assert one != version_records_digest({"train": (1, d2), "test": (1, d1)})


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=60), st.integers(0, 3))
def test_encode_index_and_body_digest_agree_with_the_builder(records, cut) -> None:
    from recordkeeper.core.record_index import SetDigest, encode_index

    builder = RecordIndexBuilder()
    builder.add_many(records)
    body = b"".join(sorted(map(record_hash, records)))
    assert encode_index("bytes", 16, body, "ab" * 32) == builder.finish("ab" * 32)
    whole, parts = SetDigest(), SetDigest()
    whole.update_sorted(sorted(map(record_hash, records)))
    step = 16 * max(1, cut)
    for i in range(0, len(body), step):
        parts.update_sorted_body(body[i : i + step])
    assert (parts.hexdigest(), parts.count) == (whole.hexdigest(), whole.count)
    if len(body) >= 32:
        later = SetDigest()
        later.update_sorted_body(body[-16:])
        if body[:16] < body[-16:]:
            with pytest.raises(InvalidIndex, match="out of order"):
                later.update_sorted_body(body[:16])
    with pytest.raises(InvalidIndex):
        encode_index("bytes", 16, b"x" * 17)

"""The record diff counted in C (``_speedups.record_diff_stream``) agrees with the pure-Python
reference of ``recordkeeper.core.record_diff.diff_records`` (property tests, issue 25 item 3)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recordkeeper import _native
from recordkeeper.core.record_diff import diff_records

W = 16
SPLITS = ["test", "train", "validation"]

if _native.speedups is None or not hasattr(_native.speedups, "record_diff_stream"):
    if os.environ.get("CI") == "true":
        raise RuntimeError("recordkeeper._speedups is not built")
    pytest.skip("recordkeeper._speedups is not built here", allow_module_level=True)

NATIVE = _native.speedups.record_diff_stream
LOOKUP = _native.speedups.record_lookup_stream

# Few distinct identities (so copies, moves and overlaps are common), some sharing prefixes.
identity = st.sampled_from([bytes([i // 3]) * 8 + bytes([i]) * 8 for i in range(24)])
shard = st.tuples(st.sampled_from(SPLITS), st.lists(identity, max_size=30))
version = st.lists(shard, max_size=6)


def chunks(ids: list[bytes], chunk: int) -> Iterator[bytes]:
    body = b"".join(sorted(ids))
    step = chunk * W
    for i in range(0, len(body), step):
        yield body[i : i + step]


def streams(v: list[tuple[str, list[bytes]]], chunk: int) -> list[tuple[str, Iterator[bytes]]]:
    return [(split, chunks(ids, chunk)) for split, ids in v]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=version, b=version, chunk=st.integers(1, 7), sample=st.integers(0, 4))
def test_native_and_python_agree(
    a: list[tuple[str, list[bytes]]], b: list[tuple[str, list[bytes]]], chunk: int, sample: int
) -> None:
    python = diff_records(streams(a, chunk), streams(b, chunk), W, sample=sample)
    native = diff_records(streams(a, chunk), streams(b, chunk), W, sample=sample, native=NATIVE)
    assert native.to_dict() == python.to_dict()


def test_bad_sources_are_refused() -> None:
    with pytest.raises(ValueError, match="whole identities"):
        NATIVE([(0, iter([b"x" * 17]))], 1, W, 1)
    with pytest.raises(ValueError, match="tag out of range"):
        NATIVE([(2, iter([b"x" * 16]))], 1, W, 1)
    with pytest.raises(TypeError):
        NATIVE([(0,)], 1, W, 1)
    with pytest.raises(ZeroDivisionError):  # an error inside a stream comes through

        def failing() -> Iterator[bytes]:
            yield b"x" * 16
            raise ZeroDivisionError

        NATIVE([(0, failing())], 1, W, 1)


@settings(max_examples=200, deadline=None)
@given(shards=st.lists(st.lists(identity, max_size=30), max_size=6), chunk=st.integers(1, 5))
def test_lookup_native_and_python_write_the_same_file(
    shards: list[list[bytes]], chunk: int
) -> None:
    import io

    from recordkeeper.core.record_lookup import LookupShard, write_lookup

    def build(native: object) -> bytes:
        out = io.BytesIO()
        rows = [(LookupShard("00" * 32, "11" * 32), chunks(ids, chunk)) for ids in shards]
        write_lookup(rows, sum(map(len, shards)), "bytes", W, out.write, native=native)  # type: ignore[arg-type]
        return out.getvalue()

    assert build(LOOKUP) == build(None)


def _wide_chunks(ids: list[bytes], width: int, chunk: int) -> Iterator[bytes]:
    body = b"".join(sorted(ids))
    for i in range(0, len(body), chunk * width):
        yield body[i : i + chunk * width]


@pytest.mark.parametrize("width", [16, 20, 32])
def test_native_and_python_agree_over_many_key_rounds(width: int) -> None:
    """Random identities spread over the whole key space (the C merge takes them in key-range
    rounds that adapt to the density), identities wider than 16 bytes, copies that straddle
    chunks, identities sharing their first 16 bytes, and the largest prefixes."""
    import random

    rng = random.Random(width)
    base = [rng.randbytes(width) for _ in range(6000)]
    base += [b"\xff" * width, b"\xff" * (width - 1) + b"\xfe", b"\x00" * width]
    base += [base[0][:16] + bytes([i]) * (width - 16) for i in range(3)] if width > 16 else []
    a = [(rng.choice(SPLITS), rng.sample(base, 1500)) for _ in range(5)]
    b = [(s, ids[100:] + rng.sample(base, 100)) for s, ids in a]
    b[0][1].extend([base[1]] * 700)  # a long run of copies across chunks

    def streams_of(v: list[tuple[str, list[bytes]]]) -> list[tuple[str, Iterator[bytes]]]:
        return [(split, _wide_chunks(ids, width, 64)) for split, ids in v]

    python = diff_records(streams_of(a), streams_of(b), width, sample=3)
    native = diff_records(streams_of(a), streams_of(b), width, sample=3, native=NATIVE)
    assert native.to_dict() == python.to_dict()
    assert sum(d.added for d in native.splits.values()) > 0


LEAKAGE = getattr(_native.speedups, "record_leakage_stream", None)
TAGS = [("v", "test"), ("v", "train"), ("v", "validation"), ("w", "train")]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shards=st.lists(st.tuples(st.sampled_from(TAGS), st.lists(identity, max_size=30)), max_size=8),
    pairs=st.lists(st.tuples(st.sampled_from(TAGS), st.sampled_from(TAGS)), max_size=6),
    chunk=st.integers(1, 7),
    sample=st.integers(0, 4),
)
def test_leakage_native_and_python_agree(
    shards: list[tuple[tuple[str, str], list[bytes]]],
    pairs: list[tuple[tuple[str, str], tuple[str, str]]],
    chunk: int,
    sample: int,
) -> None:
    from recordkeeper.core.record_diff import leakage

    def sources() -> list[tuple[tuple[str, str], Iterator[bytes]]]:
        return [(tag, chunks(ids, chunk)) for tag, ids in shards]

    python = leakage(sources(), pairs, W, sample=sample)
    native = leakage(sources(), pairs, W, sample=sample, native=LEAKAGE)
    assert [p.to_dict() for p in native] == [p.to_dict() for p in python]


def test_leakage_bad_pairs_are_refused() -> None:
    assert LEAKAGE is not None
    with pytest.raises(ValueError, match="tag out of range"):
        LEAKAGE([(0, iter([b"x" * 16]))], 1, W, [(0, 1)], 1)
    with pytest.raises(TypeError, match="pairs"):
        LEAKAGE([(0, iter([b"x" * 16]))], 1, W, [(0,)], 1)


# --------------------------------------------------------------------------- hostile indexes
# A shard's .rkidx may come from anyone who can write to the bucket, and index_chunks checks
# the order only where one chunk meets the next: a chunk out of order inside reaches the merges.
# They rely on every source being sorted (a key-range round's entries must lie in its range;
# one entry per source and identity), so each refuses such a source with the error
# index_chunks gives; before, the C merges wrote out of bounds (the diff, merge and leakage
# rounds' bucket counts; the lookup's per-identity shard list).


def _id(prefix: int, tail: int = 0) -> bytes:
    return prefix.to_bytes(8, "big") + tail.to_bytes(W - 8, "big")


UNSORTED_SOURCES = {
    # the second identity falls below the round the first one opened (rs_order's buckets)
    "back across a key round": [[_id(1 << 41) + _id(5)]],
    # an identity again after another one: two entries of one source for one identity
    "a repeat after another": [[_id(1) + _id(2) + _id(1)]],
    # in order inside each chunk, not where they meet (seen by index_chunks, also by the merge)
    "back across chunks": [[_id(7), _id(3)]],
    "back in a later source only": [[_id(1) + _id(2)], [_id(9, 1) + _id(9)]],
}


@pytest.mark.parametrize("case", sorted(UNSORTED_SOURCES))
def test_every_merge_refuses_a_source_out_of_order(case: str) -> None:
    from recordkeeper.core.errors import InvalidIndex

    shards = UNSORTED_SOURCES[case]
    sink: list[bytes] = []
    merge = _native.speedups.record_merge_stream  # type: ignore[union-attr]
    calls = {
        "diff": lambda: NATIVE([(0, iter(c)) for c in shards], 1, W, 2),
        "lookup": lambda: LOOKUP([iter(c) for c in shards], W, 4, sink.append, 1 << 20),
        "merge": lambda: merge([iter(c) for c in shards], W, sink.append, 1 << 20),
        "leakage": lambda: LEAKAGE([(0, iter(c)) for c in shards], 1, W, [(0, 0)], 2),  # type: ignore[misc]
    }
    for call in calls.values():
        with pytest.raises(InvalidIndex, match="the record index is not sorted"):
            call()
    # the pure-Python reference refuses it too (it looped forever on empty batches)
    with pytest.raises(InvalidIndex, match="the record index is not sorted"):
        diff_records([("train", iter(c)) for c in shards], [], W)


def test_a_source_list_changed_by_its_own_iterators_is_read_as_given() -> None:
    """The merges run the sources' iterators while they set up: one that empties the list of
    sources must not make them read past its end (they did: a crash)."""
    sources: list[object] = []

    def clearing() -> Iterator[bytes]:
        sources.clear()
        yield _id(1)

    sources += [iter([_id(2)]), clearing(), iter([_id(3)])]
    merged: list[bytes] = []
    merge = _native.speedups.record_merge_stream  # type: ignore[union-attr]
    assert merge(list(sources), W, merged.append, 1 << 20) == 3  # a copy: the documented use
    sources[:] = [iter([_id(2)]), clearing(), iter([_id(3)])]
    assert merge(sources, W, merged.append, 1 << 20) == 3
    assert b"".join(merged[1:]) == _id(1) + _id(2) + _id(3)


def test_leakage_reads_each_pairs_tags_once() -> None:
    """A tag object whose __index__ answers differently each time: the pair is validated and
    used with the same value (the second reading was used unchecked, out of bounds)."""
    assert LEAKAGE is not None

    class Shifty:
        def __init__(self) -> None:
            self.calls = 0

        def __index__(self) -> int:
            self.calls += 1
            return 0 if self.calls == 1 else -(10**9)

    sources = [(0, iter([_id(1)])), (1, iter([_id(1)]))]
    rows = LEAKAGE(sources, 2, W, [(0, Shifty())], 5)
    assert rows == [(1, 1, 1, [_id(1)])]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a=st.lists(st.tuples(st.sampled_from(SPLITS), st.lists(identity, max_size=12)), max_size=4),
    b=st.lists(st.tuples(st.sampled_from(SPLITS), st.lists(identity, max_size=12)), max_size=4),
    chunk=st.integers(1, 5),
)
def test_native_and_python_agree_on_sources_in_any_order(
    a: list[tuple[str, list[bytes]]], b: list[tuple[str, list[bytes]]], chunk: int
) -> None:
    """Sources as written (not sorted first): both merges give the same diff, or both refuse
    the same way (InvalidIndex) — what an index written by anyone may hold."""
    from recordkeeper.core.errors import InvalidIndex

    def raw(v: list[tuple[str, list[bytes]]]) -> list[tuple[str, Iterator[bytes]]]:
        out = []
        for split, ids in v:
            body = b"".join(ids)
            out.append(
                (split, iter([body[i : i + chunk * W] for i in range(0, len(body), chunk * W)]))
            )
        return out

    def outcome(native: object) -> object:
        try:
            return diff_records(raw(a), raw(b), W, sample=2, native=native).to_dict()  # type: ignore[arg-type]
        except InvalidIndex as exc:
            return str(exc)

    python = outcome(None)
    assert outcome(NATIVE) == python
    in_order = all(ids == sorted(ids) for _, ids in a + b)
    assert isinstance(python, dict) == in_order


def test_a_chunk_changed_after_it_was_read_cannot_put_an_entry_below_its_round() -> None:
    """A bytearray chunk rewritten between two rounds by another source's iterator: its
    identities look in order next to each other, but one now lies below the round it is
    read in (the merge put it in a bucket out of bounds before checking that too)."""
    from recordkeeper.core.errors import InvalidIndex

    shared = bytearray(_id(1 << 41) + _id(1 << 50) + _id((1 << 50) + 1))

    def rewriting() -> Iterator[bytes]:
        yield _id((1 << 41) + 1)  # read in the round of 2^41, with the chunk's first identity
        shared[:] = _id(0) + _id(5) + _id(6)  # the same size: the buffer stays exported
        yield _id(1 << 60)

    merge = _native.speedups.record_merge_stream  # type: ignore[union-attr]
    with pytest.raises(InvalidIndex, match="the record index is not sorted"):
        merge([iter([shared]), rewriting()], W, [].append, 1 << 20)

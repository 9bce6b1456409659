"""The leakage check before a commit, from record indexes held in memory: the same counts as
counting the records directly, whatever the chunking, in C and in pure Python."""

from __future__ import annotations

import hashlib
import random
from collections import Counter

import pytest

from recordkeeper import _native
from recordkeeper.core.record_index import encode_index
from recordkeeper.leakage import memory_sources
from recordkeeper.record_ids import sort_identities
from recordkeeper.record_sets import staged_leakage


def _index(records: list[bytes]) -> bytes:
    ids = b"".join(hashlib.sha256(r).digest()[:16] for r in records)
    return encode_index("bytes", 16, sort_identities(ids, 16), None)


@pytest.mark.parametrize("native", [True, False])
def test_in_memory_check_counts_like_the_records(
    native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not native:
        monkeypatch.setattr(_native, "speedups", None)
    elif _native.speedups is None:
        pytest.skip("the C extension is not built")
    rng = random.Random(3)
    train = [rng.randbytes(20) for _ in range(3000)]
    test = (
        [rng.randbytes(20) for _ in range(700)] + train[:40] + train[:5]
    )  # 45 copies, 40 distinct
    valid = [rng.randbytes(20) for _ in range(10)] + test[:3]
    shards = {
        "train": [_index(train[:1000]), _index(train[1000:])],  # several shards per split
        "test": [_index(test[:300]), _index(test[300:])],
        "valid": [_index(valid)],
    }
    pairs = {(p.split, p.other_split): p for p in staged_leakage("v", memory_sources(shards))}
    assert set(pairs) == {
        ("test", "train"),
        ("test", "valid"),
        ("valid", "train"),
        ("valid", "test"),
    }
    for (e, o), p in pairs.items():
        records = {"train": train, "test": test, "valid": valid}
        other = set(records[o])
        assert p.records == len(records[e])
        assert p.leaked == sum(1 for r in records[e] if r in other)
        assert p.distinct == len(set(records[e]) & other)
    assert (pairs["test", "train"].leaked, pairs["test", "train"].distinct) == (45, 40)
    assert Counter(p.ref for p in pairs.values()) == {"v": 4}


def test_memory_sources_cut_each_index_into_the_merges_chunks() -> None:
    big = _index([bytes([i % 256, i // 256]) for i in range(5000)])
    chunks = list(memory_sources({"train": [big]}, 16)[0][1])
    assert len(chunks) == 1  # under the budget: one chunk
    many = {"train": [big] * 5000}  # 5,000 streams share the budget: 256 identities each
    chunks = list(memory_sources(many, 16)[0][1])
    assert [len(c) for c in chunks] == [256 * 16] * 19 + [(5000 - 19 * 256) * 16]
    assert b"".join(chunks) == big[64:-32]

"""client.diff on compact columns gives the answer of the rule on whole Shard objects."""

from __future__ import annotations

import random

import recordkeeper as rk
from recordkeeper.core.diff import diff_shards
from recordkeeper.core.shard_columns import ShardColumns, to_columns
from recordkeeper.diff import diff_versions
from recordkeeper.registry import collect_splits


def _shard(split: str, index: int, records: str, n: int = 10) -> rk.Shard:
    return rk.Shard.from_json(
        {
            "split": split,
            "index": index,
            "count": 1,
            "uri": f"file:///d/{split}-{index}-{records}",
            "compression": "none",
            "size": 100 + index,
            "sha256": "a" * 64,
            "crc32c": "0" * 8,
            "records_sha256": records.ljust(64, "0"),
            "record_count": n,
            "storage_identity": {},
        }
    )


def _version(name: str, shards: list[rk.Shard], compact: bool) -> rk.DatasetVersion:
    shards = sorted(shards, key=lambda s: (s.split, s.index))
    body = {
        "name": name,
        "dataset": "coco",
        "number": 1,
        "date": "2023-10-15",
        "content_digest": f"sha256:{name}",
        "schema_digest": "sha256:same",
    }
    if compact:
        columns = to_columns(shards)
        page = ShardColumns(rk.Shard, columns["uri_prefix"], columns["columns"])
        return rk.DatasetVersion.from_dict(body, splits=collect_splits([page]))
    splits: dict[str, dict[str, list[dict]]] = {}
    for s in shards:
        splits.setdefault(s.split, {"shards": []})["shards"].append(s.to_dict())
    return rk.DatasetVersion.from_dict({**body, "splits": splits})


def _reindex(shards: list[rk.Shard]) -> list[rk.Shard]:
    out, seen = [], {}
    for s in shards:
        i = seen.get(s.split, 0)
        seen[s.split] = i + 1
        out.append(_shard(s.split, i, s.records_sha256.rstrip("0"), s.record_count))
    return out


def _change(rnd: random.Random, shards: list[rk.Shard]) -> list[rk.Shard]:
    out = list(shards)
    for _ in range(rnd.randint(0, 4)):
        op = rnd.choice(["drop", "insert", "change", "append", "split", "dup"])
        if op == "drop" and out:
            del out[rnd.randrange(len(out))]
        elif op == "insert":
            out.insert(rnd.randrange(len(out) + 1), _shard("train", 0, f"n{rnd.random()}"[:10]))
        elif op == "change" and out:
            i = rnd.randrange(len(out))
            out[i] = _shard(out[i].split, out[i].index, out[i].records_sha256[:5], 11)
        elif op == "append":
            out.append(_shard("train", 0, f"e{rnd.randint(0, 9)}"))
        elif op == "split":
            out.append(_shard(rnd.choice(["test", "validation"]), 0, f"s{rnd.randint(0, 9)}"))
        elif op == "dup" and out:
            out.append(out[rnd.randrange(len(out))])
    return _reindex(out)


def test_columns_answer_equals_the_rule_on_objects() -> None:
    rnd = random.Random(24)
    for case in range(300):
        base = _reindex(
            [_shard(rnd.choice(["train", "test"]), 0, f"b{rnd.randint(0, 30)}") for _ in range(30)]
        )
        new = _change(rnd, base) if case % 5 else base
        want, unchanged = diff_shards(base, new)
        for compact in (True, False):
            a, b = _version("a_v1", base, compact), _version("b_v2", new, compact)
            got = diff_versions(a, b)
            assert list(got.shards) == want, (case, compact)
            assert got.unchanged_shards == unchanged, (case, compact)
            totals = {
                s.split: (s.old_records, s.new_records, s.old_shards, s.new_shards)
                for s in got.splits
            }
            for split in {s.split for s in base} | {s.split for s in new}:
                old = [s for s in base if s.split == split]
                now = [s for s in new if s.split == split]
                assert totals[split] == (
                    sum(s.record_count for s in old),
                    sum(s.record_count for s in now),
                    len(old),
                    len(now),
                )


def test_only_the_shards_in_the_answer_are_built() -> None:
    base = [_shard("train", i, f"b{i}") for i in range(1000)]
    new = _reindex(base[:500] + base[501:] + [_shard("train", 0, "added")])
    a, b = _version("a_v1", base, True), _version("b_v2", new, True)
    diff = diff_versions(a, b)
    assert [(c.change, c.index) for c in diff.shards] == [("removed", 500), ("added", 999)]
    assert diff.unchanged_shards == 999  # the shards after the removed one shifted
    built = [
        sum(x is not None for x in v.splits["train"].shards._built)  # type: ignore[attr-defined]
        for v in (a, b)
    ]
    assert built == [1, 1]

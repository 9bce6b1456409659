"""recordkeeper.core.diff: the one diff rule the client, the service and the UI share."""

from __future__ import annotations

from recordkeeper.core.diff import DiffSide, diff_versions
from recordkeeper.core.schema import Feature, Schema
from recordkeeper.core.shards import ShardRecord


def _shard(split: str, index: int, records: str, count: int = 10, uri: str = "") -> ShardRecord:
    return ShardRecord(
        split=split,
        index=index,
        count=3,
        uri=uri or f"file:///d/{split}-{index}",
        compression="none",
        size=100,
        sha256="a" * 64,
        crc32c="0" * 8,
        records_sha256=records * 64,
        record_count=count,
    )


def _side(name: str, shards: list[ShardRecord], schema: Schema | None, digest: str | None):
    asked: list[str] = []

    def load() -> Schema:
        asked.append(name)
        return schema or Schema()

    side = DiffSide(name, f"sha256:{name}", digest, shards, load)
    return side, asked


def test_shards_by_split_and_index_and_content_by_records_hash() -> None:
    old, _ = _side("a", [_shard("train", 0, "1"), _shard("train", 1, "2")], None, None)
    moved = _shard("train", 0, "1", uri="s3://elsewhere/x")  # moved, same records: unchanged
    new, _ = _side("b", [moved, _shard("train", 1, "3", 12), _shard("test", 0, "4")], None, None)
    diff = diff_versions(old, new)
    assert diff.unchanged_shards == 1
    assert [(c.split, c.index) for c in diff.changed] == [("train", 1)]
    assert [(c.split, c.index) for c in diff.added] == [("test", 0)]
    assert diff.removed == []
    counts = {s.split: (s.old_records, s.new_records, s.record_delta) for s in diff.splits}
    assert counts == {"test": (0, 10, 10), "train": (20, 22, 2)}
    assert diff.to_dict()["shards"]["changed"][0]["new"]["record_count"] == 12


def test_schemas_are_read_only_when_their_digests_differ() -> None:
    label = Feature("label", "int64", 1, 1, 10)
    wider = Schema("example", 10, (label, Feature("person", "float", 4, 4, 10)))
    old, asked_old = _side("a", [], Schema("example", 10, (label,)), "sha256:s1")
    new, asked_new = _side("b", [], wider, "sha256:s2")
    diff = diff_versions(old, new)
    assert [c.describe() for c in diff.schema] == ["+ person (float, 4 per record)"]
    assert asked_old == ["a"] and asked_new == ["b"]
    same_old, asked = _side("a", [], None, "sha256:s1")
    same_new, asked_too = _side("b", [], None, "sha256:s1")
    assert diff_versions(same_old, same_new).schema == ()
    assert asked == [] and asked_too == []


def test_a_removed_shard_is_one_removal_not_a_shift_of_every_later_shard() -> None:
    base = [_shard("train", i, str(i)) for i in range(5)]
    derived = [_shard("train", i, r) for i, r in enumerate(["0", "2", "3", "4", "9"])]
    old, _ = _side("a", base, None, None)
    new, _ = _side("b", derived, None, None)
    diff = diff_versions(old, new)
    assert [(c.split, c.index, c.change) for c in diff.shards] == [
        ("train", 1, "removed"),
        ("train", 4, "added"),
    ]
    assert diff.unchanged_shards == 4  # 0, and 2, 3, 4 shifted
    appended = [*base, _shard("train", 5, "a")]
    diff = diff_versions(old, _side("c", appended, None, None)[0])
    assert [(c.index, c.change) for c in diff.shards] == [(5, "added")]


def test_the_answer_reads_back_page_by_page() -> None:
    """``VersionDiff.from_dict`` and ``page_changes`` read what ``to_dict(full=True)`` wrote,
    one page at a time: what a client gets from the service's diff."""
    from recordkeeper.core.diff import VersionDiff, page_changes

    label = Feature("label", "int64", 1, 1, 10)
    old, _ = _side("a", [_shard("train", i, str(i)) for i in range(5)], Schema(), "sha256:s1")
    new_shards = [_shard("train", i, str(i + 1)) for i in range(5)] + [_shard("test", 0, "9")]
    new, _ = _side("b", new_shards, Schema("example", 10, (label,)), "sha256:s2")
    diff = diff_versions(old, new)
    changes = []
    for offset in range(0, len(diff.shards), 2):
        page = diff.to_dict(limit=2, offset=offset, full=True)
        changes += page_changes(page["shards"], ShardRecord.from_json)
    assert VersionDiff.from_dict(page, changes) == diff

"""diff_versions on value objects; fast verification of local shards (no service needed)."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

import recordkeeper as rk
from recordkeeper.diff import diff_versions
from recordkeeper.storage import stat_object
from recordkeeper.verify import verify_shards
from recordkeeper.writer import parse_size


def _shard(split: str, index: int, count: int, records: str, n: int = 10, uri: str = "") -> dict:
    return {
        "split": split,
        "index": index,
        "count": count,
        "uri": uri or f"file:///d/{split}{index}",
        "compression": "none",
        "size": 100,
        "sha256": "a" * 64,
        "crc32c": "0" * 8,
        "records_sha256": records * 64,
        "record_count": n,
        "storage_identity": {},
    }


def _version(name: str, shards: list[dict], features: list[dict], digest: str) -> rk.DatasetVersion:
    splits: dict = {}
    for s in shards:
        splits.setdefault(s["split"], {"shards": []})["shards"].append(s)
    for v in splits.values():
        v["record_count"] = sum(s["record_count"] for s in v["shards"])
        v["size"] = sum(s["size"] for s in v["shards"])
    schema = rk.Schema.from_dict(
        {"record_type": "example", "record_count": 1, "features": features}
    )
    return rk.DatasetVersion.from_dict(
        {
            "name": name,
            "dataset": "coco",
            "number": int(name.split("_v")[1]),
            "date": "2023-10-15",
            "state": "committed",
            "content_digest": digest,
            "schema_digest": schema.digest(),
            "storage_prefix": "file:///d/",
            "splits": splits,
        },
        schema=schema,
    )


def _feat(name: str, kind: str, lo: int = 1, hi: int = 1) -> dict:
    return {"name": name, "kind": kind, "min_count": lo, "max_count": hi, "present_count": 1}


def test_diff_shards_counts_and_schema() -> None:
    a = _version(
        "coco_20231015_v1",
        [_shard("train", 0, 2, "a"), _shard("train", 1, 2, "b"), _shard("test", 0, 1, "c")],
        [_feat("image", "bytes"), _feat("label", "int64"), _feat("old", "float")],
        "sha256:1",
    )
    b = _version(
        "coco_20231015_v2",
        [
            _shard("train", 0, 3, "a", uri="s3://moved/0"),
            _shard("train", 1, 3, "d", n=12),
            _shard("train", 2, 3, "e"),
            _shard("validation", 0, 1, "f"),
        ],
        [
            _feat("image", "bytes"),
            _feat("label", "float"),
            _feat("boxes", "float", 0, 40),
        ],
        "sha256:2",
    )
    d = diff_versions(a, b)
    assert [(c.split, c.index) for c in d.added] == [("train", 2), ("validation", 0)]
    assert [(c.split, c.index) for c in d.removed] == [("test", 0)]
    assert [(c.split, c.index) for c in d.changed] == [("train", 1)]
    assert d.unchanged_shards == 1  # moved + re-counted, same records: not a change
    counts = {s.split: (s.old_records, s.new_records) for s in d.splits}
    assert counts == {"test": (10, 0), "train": (20, 32), "validation": (0, 10)}
    changes = {(c.name, c.change) for c in d.schema}
    assert changes == {("boxes", "added"), ("old", "removed"), ("label", "kind_changed")}
    assert not d.same_content
    assert d.to_dict()["shards"]["unchanged"] == 1


def test_diff_shape_change_and_identity() -> None:
    a = _version(
        "coco_20231015_v1", [_shard("train", 0, 1, "a")], [_feat("x", "int64", 1, 1)], "sha256:1"
    )
    b = _version(
        "coco_20231015_v2", [_shard("train", 0, 1, "a")], [_feat("x", "int64", 1, 3)], "sha256:1"
    )
    d = diff_versions(a, b)
    assert d.same_content and not d.shards
    assert [c.change for c in d.schema] == ["shape_changed"]
    assert "1 per record -> 1..3 per record" in d.schema[0].describe()


def _local_shard(path: Path) -> rk.Shard:
    st = stat_object(str(path))
    return rk.Shard(
        split="train",
        index=0,
        count=1,
        uri=path.as_uri(),
        compression="none",
        size=st.size,
        sha256="a" * 64,
        crc32c="0" * 8,
        records_sha256="b" * 64,
        record_count=1,
        storage_identity=st.identity,
    )


def test_fast_verify_local(tmp_path: Path) -> None:
    good, touched, truncated, gone = (tmp_path / n for n in ("good", "touched", "trunc", "gone"))
    for p in (good, touched, truncated, gone):
        p.write_bytes(b"0123456789")
    shards = [_local_shard(p) for p in (good, touched, truncated, gone)]
    os.utime(touched, ns=(1, 1))
    truncated.write_bytes(b"01234")
    gone.unlink()
    report = verify_shards(shards)
    assert not report.ok
    by_uri = {p.uri.rsplit("/", 1)[-1]: p.reason for p in report.problems}
    assert by_uri == {"touched": "identity_changed", "trunc": "size_changed", "gone": "missing"}
    with pytest.raises(rk.CorruptShard, match="gone"):
        report.raise_for_problems()
    assert verify_shards(shards[:1]).ok


def test_fast_verify_misses_a_bit_flip_that_keeps_size_and_mtime(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    shard = _local_shard(path)
    st = path.stat()
    path.write_bytes(b"0123456780")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert verify_shards([shard]).ok  # documented: only deep verification finds this


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("256MB", 256_000_000),
        ("64MiB", 64 * 2**20),
        ("1 GiB", 2**30),
        (1000, 1000),
        ("10k", 10_000),
    ],
)
def test_parse_size(text: str | int, size: int) -> None:
    assert parse_size(text) == size


def test_parse_size_rejects_nonsense() -> None:
    with pytest.raises(rk.InvalidRequest):
        parse_size("lots")


def test_version_value_object() -> None:
    v = _version(
        "coco_20231015_v3",
        [_shard("train", 1, 2, "b"), _shard("train", 0, 2, "a")],
        [_feat("x", "int64")],
        "sha256:1",
    )
    assert v.date == datetime.date(2023, 10, 15)
    assert v.files("train") == ["file:///d/train0", "file:///d/train1"]
    assert v.splits["train"].shards[1].name == "train-00001-of-00002"
    with pytest.raises(KeyError, match="no split 'validation'; splits: train"):
        v.files("validation")
    with pytest.raises(rk.SplitNotFound) as missing:  # typed, with its code, for the CLI
        v.split("validation")
    assert missing.value.code == "split_not_found" and missing.value.extra["split"] == "validation"
    with pytest.raises(AttributeError):
        v.name = "x"  # type: ignore[misc]

"""Record identity computed inline (issue 25, item 1): the writer, publish (in place and
copied) and deep verify build each shard's record index from the records their scan already
passes, store it beside the shard and register the version's record identity.  The index is
byte for byte the one ``recordkeeper index`` builds afterwards, for every format."""

from __future__ import annotations

import gzip
import hashlib
import random
from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from recordkeeper import _native
from recordkeeper.core.record_index import RecordIndex, RecordIndexBuilder
from recordkeeper.record_ids import RecordIds, index_uri, sort_identities, split_digest
from recordkeeper.storage import to_uri
from tests.client._records import frame, sample_examples
from tests.client._riegeli_files import build, simple
from tests.client.test_client_app import client, roots  # noqa: F401 (fixtures)

pytest.importorskip("fastapi")


def _path(uri: str) -> Path:
    return Path(to_uri(uri)[len("file://") :])


def _indexes(v: rk.DatasetVersion) -> dict[str, bytes]:
    return {s.uri: _path(index_uri(s.uri)).read_bytes() for s in v.shards}


def _afterwards(api: rk.Client, v: rk.DatasetVersion) -> tuple[dict[str, bytes], str]:
    """The indexes and records digest ``recordkeeper index`` gives once the inline ones are
    removed (it then reads every shard)."""
    for s in v.shards:
        _path(index_uri(s.uri)).unlink()
    answer = api.index(v.name, progress=False)
    return _indexes(v), answer["records_digest"]


def _expected(records: list[bytes], records_sha256: str) -> bytes:
    builder = RecordIndexBuilder()
    builder.add_many(records)
    return builder.finish(records_sha256)


@pytest.fixture(params=["c", "python"])
def implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both implementations of the per-record loops (C deframer/hash/sort, pure Python)."""
    if request.param == "python":
        monkeypatch.setattr(_native, "speedups", None)
    elif _native.speedups is None or not hasattr(_native.speedups, "record_ids"):
        pytest.skip("the C extension (with OpenSSL) is not built")
    return str(request.param)


@pytest.mark.parametrize(
    ("fmt", "compression"), [("tfrecord", "none"), ("tfrecord", "gzip"), ("array_record", None)]
)
def test_the_writer_indexes_as_it_writes_and_registers(
    client: rk.Client,  # noqa: F811
    implementation: str,
    fmt: str,
    compression: str | None,
) -> None:
    if fmt == "array_record":
        pytest.importorskip("array_record.python.array_record_module")
    records = sample_examples(300)
    records += records[:7]  # duplicates are counted
    with client.writer("coco", shard_size=6000, format=fmt, compression=compression) as w:
        for i, record in enumerate(records):
            w.write(record, split="test" if i % 6 == 0 else "train")
    v = w.version
    assert len(v.splits["train"].shards) > (0 if compression == "gzip" else 2)
    assert w.record_set is not None
    (registered,) = client.record_sets(v.name)
    assert registered["records_digest"] == w.record_set["records_digest"]
    assert {s["split"]: s["records"] for s in registered["splits"]} == {
        "train": v.splits["train"].record_count,
        "test": v.splits["test"].record_count,
    }
    inline = _indexes(v)
    for s in v.shards:
        index = RecordIndex(inline[s.uri])
        assert (len(index), index.header.records_sha256) == (s.record_count, s.records_sha256)
    built, digest = _afterwards(client, v)
    assert built == inline
    assert digest == registered["records_digest"]


def test_the_writer_without_record_index_writes_none(client: rk.Client) -> None:  # noqa: F811
    with client.writer("coco", record_index=False) as w:
        for record in sample_examples(20):
            w.write(record)
    assert w.record_set is None and client.record_sets(w.version.name) == []
    assert not _path(index_uri(w.version.shards[0].uri)).exists()


def test_a_duplicate_version_keeps_no_index_of_its_deleted_shards(
    client: rk.Client,  # noqa: F811
) -> None:
    records = sample_examples(30)
    for _ in range(2):
        with pytest.warns(rk.DuplicateWarning) if _ else _nothing(), client.writer("coco") as w:
            for record in records:
                w.write(record)
    kept = w.version
    assert len(client.record_sets(kept.name)) == 1
    index_dir = _path(index_uri(kept.shards[0].uri)).parent
    assert sorted(p.name for p in index_dir.iterdir()) == [
        Path(s.uri).name + ".rkidx" for s in kept.shards
    ]


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _riegeli(records: list[bytes]) -> bytes:
    return build([simple(records[:40], "zstd"), simple(records[40:], "brotli")]).data


@pytest.mark.parametrize("kind", ["tfrecord", "gzip", "array_record", "riegeli"])
@pytest.mark.parametrize("copy", [False, True])
def test_publish_indexes_in_the_scan_and_registers(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
    implementation: str,
    kind: str,
    copy: bool,
) -> None:
    data = roots[1]
    parts = [sample_examples(70, start=0), sample_examples(50, start=1000)]
    for i, part in enumerate(parts):
        name = f"train-{i:05d}-of-00002"
        if kind == "tfrecord":
            (data / f"{name}.tfrecord").write_bytes(frame(part))
        elif kind == "gzip":
            (data / f"{name}.tfrecord.gz").write_bytes(gzip.compress(frame(part)))
        elif kind == "riegeli":
            (data / f"{name}.riegeli").write_bytes(_riegeli(part))
        else:
            module = pytest.importorskip("array_record.python.array_record_module")
            writer = module.ArrayRecordWriter(str(data / f"{name}.array_record"), "group_size:8")
            for record in part:
                writer.write(record)
            writer.close()
    v = client.publish(
        rk.Dataset.from_directory(data, name="pets"), progress=False, copy_to=copy or None
    )
    assert len(v.shards) == 2
    inline = _indexes(v)
    for shard, part in zip(v.shards, parts, strict=True):
        assert inline[shard.uri] == _expected(part, shard.records_sha256)
    (registered,) = client.record_sets(v.name)
    assert registered["splits"] == [
        {"split": "train", "records": 120, "digest": registered["splits"][0]["digest"]}
    ]
    built, digest = _afterwards(client, v)
    assert built == inline and digest == registered["records_digest"]


def test_publish_without_record_index(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
) -> None:
    (roots[1] / "train.tfrecord").write_bytes(frame(sample_examples(10)))
    v = client.publish(
        rk.Dataset.from_directory(roots[1], name="pets"), progress=False, record_index=False
    )
    assert client.record_sets(v.name) == []
    assert not _path(index_uri(v.shards[0].uri)).exists()


def test_publish_in_place_where_no_index_can_be_written_still_commits(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Files published in place may lie where nothing can be written: the version is
    committed, and the missing record identity is a warning, not a failed publish."""
    from recordkeeper import publish

    def refuse(indexes: Any, options: Any = None) -> None:
        raise rk.StorageError("read-only file system", uri=next(iter(indexes)))

    monkeypatch.setattr(publish, "write_indexes", refuse)
    (roots[1] / "train.tfrecord").write_bytes(frame(sample_examples(10)))
    with pytest.warns(rk.NotStoredWarning, match="record indexes could not be stored"):
        v = client.publish(rk.Dataset.from_directory(roots[1], name="pets"), progress=False)
    assert v.state == "committed" and client.record_sets(v.name) == []
    assert not _path(index_uri(v.shards[0].uri)).exists()


def test_deep_verify_writes_checks_and_rewrites_indexes(
    client: rk.Client,  # noqa: F811
    implementation: str,
) -> None:
    with client.writer("coco", shard_size=5000, record_index=False) as w:
        for i, record in enumerate(sample_examples(200)):
            w.write(record, split="test" if i % 4 == 0 else "train")
    v = w.version
    n = len(v.shards)
    assert client.record_sets(v.name) == []
    report = v.verify(deep=True, record_index=True)
    assert report.ok and report.record_index == {"written": n, "registered": 1}
    assert report.to_dict()["record_index"] == {"written": n, "registered": 1}
    (registered,) = client.record_sets(v.name)
    written = _indexes(v)

    report = v.verify(deep=True, record_index=True)
    assert report.record_index == {"matched": n, "registered": 1}

    # A stale index whose header still matches (recordkeeper index would skip it): two
    # identities swapped in the body, its own checksum recomputed.  Deep verify rewrites it.
    victim = v.shards[1]
    data = bytearray(written[victim.uri])
    data[64:80] = bytes(16)
    data[-32:] = hashlib.sha256(bytes(data[:-32])).digest()
    _path(index_uri(victim.uri)).write_bytes(bytes(data))
    report = v.verify(deep=True, record_index=True)
    assert report.ok and report.record_index == {"matched": n - 1, "rewritten": 1, "registered": 1}
    assert _indexes(v) == written
    assert client.record_sets(v.name)[0]["records_digest"] == registered["records_digest"]

    # Without record_index a deep verify does not look at indexes; a split-only one does not
    # register.
    assert v.verify(deep=True).record_index == {}
    partial = v.verify(deep=True, splits=["test"], record_index=True)
    assert partial.record_index == {"matched": len(v.splits["test"].shards)}


def test_deep_verify_leaves_the_index_of_a_bad_shard_alone(
    client: rk.Client,  # noqa: F811
) -> None:
    with client.writer("coco", shard_size=5000) as w:
        for record in sample_examples(100):
            w.write(record)
    v = w.version
    before = _indexes(v)
    shard = _path(v.shards[0].uri)
    damaged = bytearray(shard.read_bytes())
    damaged[40] ^= 0x01
    shard.write_bytes(bytes(damaged))
    report = v.verify(deep=True, record_index=True)
    assert not report.ok and "registered" not in report.record_index
    assert _indexes(v) == before


def test_scans_give_the_identities_of_good_records_only(implementation: str) -> None:
    from recordkeeper.core.errors import CorruptShard
    from recordkeeper.tfrecord import scan_shard

    records = sample_examples(50)
    data = bytearray(frame(records))
    cut = len(frame(records[:30]))
    data[cut + 20] ^= 0x01  # record 30's data
    ids = RecordIds()
    import io

    with pytest.raises(CorruptShard):
        scan_shard(io.BytesIO(bytes(data)), infer_schema=False, record_ids=ids)
    assert bytes(ids.buffer) == b"".join(hashlib.sha256(r).digest()[:16] for r in records[:30])
    ids = RecordIds(width=32)
    scan_shard(io.BytesIO(frame(records)), record_ids=ids)  # the schema-inferring path
    assert bytes(ids.buffer) == b"".join(hashlib.sha256(r).digest() for r in records)


def test_identities_sort_like_python_whatever_their_prefixes(implementation: str) -> None:
    rng = random.Random(5)
    items = [rng.randbytes(16) for _ in range(3000)]
    items += [items[7]] * 500  # a long run of duplicates
    items += [b"\x00" * 4 + rng.randbytes(12) for _ in range(300)]  # a shared 32-bit prefix
    items += [items[9][:8] + rng.randbytes(8) for _ in range(50)]  # a shared 64-bit prefix
    rng.shuffle(items)
    assert sort_identities(b"".join(items), 16) == b"".join(sorted(items))
    assert sort_identities(b"", 16) == b""
    wide = [rng.randbytes(32) for _ in range(100)]
    assert sort_identities(b"".join(wide), 32) == b"".join(sorted(wide))


def test_the_split_digest_of_held_indexes_is_the_merge_of_stored_ones() -> None:
    from recordkeeper.core.record_identity import record_hash
    from recordkeeper.core.record_index import set_digest

    shards = [sample_examples(30, start=i * 30) for i in range(3)]
    indexes = [_expected(s, "00" * 32) for s in shards]
    every = [r for s in shards for r in s]
    assert split_digest(indexes).hexdigest() == set_digest(map(record_hash, every))


def test_a_derivation_of_an_unindexed_base_opens_none_of_its_indexes(
    client: rk.Client,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A base without record identity has no indexes to merge: the derivation asks the
    registry once instead of opening an index per kept shard (O(change), not O(base)); its
    added shard is still indexed beside it, and ``recordkeeper index`` completes the rest."""
    from recordkeeper import record_sets

    with client.writer("coco", record_index=False, shard_size=600) as w:
        for record in sample_examples(40):
            w.write(record)
    base = w.version
    assert len(base.shards) > 3 and client.record_sets(base.name) == []
    opened: list[str] = []
    real = record_sets._streams
    monkeypatch.setattr(
        record_sets,
        "_streams",
        lambda version, *a, **k: opened.append(version.name) or real(version, *a, **k),
    )
    with client.derive(base.name, desc="more") as d:
        for record in sample_examples(5, 7000):
            d.write(record)
    assert d.record_set is None and opened == []
    derived = d.version
    added = [s for s in derived.shards if s.uri not in {b.uri for b in base.shards}]
    assert added and all(_path(index_uri(s.uri)).exists() for s in added)
    monkeypatch.undo()
    client.index(derived.name, progress=False)
    assert client.record_sets(derived.name)


def test_a_version_of_more_splits_than_record_identity_covers(
    client: rk.Client,  # noqa: F811
) -> None:
    """One rule (``MAX_RECORD_SET_SPLITS``) for the service's record sets and the client: the
    writer commits and warns, ``index`` refuses before it reads a shard."""
    from recordkeeper.core.record_identity import MAX_RECORD_SET_SPLITS

    n = MAX_RECORD_SET_SPLITS + 1
    with (
        pytest.warns(rk.NotStoredWarning, match=f"{n:,} splits: record identity covers"),
        client.writer("wide") as w,
    ):
        for i in range(n):
            w.write(sample_examples(1, i)[0], split=f"s{i}")
    v = w.version
    assert v.state == "committed" and client.record_sets(v.name) == []
    for shard in v.shards:  # nothing may be read
        _path(shard.uri).unlink()
    with pytest.raises(rk.InvalidRequest, match="at most 1,000 splits"):
        client.index(v.name, progress=False)

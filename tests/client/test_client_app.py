"""The client against the real service app in-process (FastAPI TestClient, SQLite temp DB).

Shards live on local disk under tmp dirs that are the service's allowed roots.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import recordkeeper as rk
from tests.apps import sqlite_app
from tests.client._records import sample_examples, write_tfrecord

pytest.importorskip("fastapi")


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    store, data = tmp_path / "store", tmp_path / "data"
    store.mkdir()
    data.mkdir()
    return store, data


@pytest.fixture
def client(tmp_path: Path, roots: tuple[Path, Path]) -> Iterator[rk.Client]:
    store, data = roots
    allowed = [store.as_uri(), data.as_uri()]
    with sqlite_app(tmp_path, storage_root=store.as_uri(), allowed_roots=allowed) as http:
        yield rk.Client(http_client=http)


def _publish_dir(client: rk.Client, path: Path, **kwargs) -> rk.DatasetVersion:
    return client.publish(rk.Dataset.from_directory(path, name="coco"), progress=False, **kwargs)


def test_testclient_base_url_is_used(client: rk.Client) -> None:
    assert client.url == "http://testserver"
    assert client.info()["storage_root"].startswith("file://")


def test_writer_end_to_end(client: rk.Client, roots: tuple[Path, Path]) -> None:
    records = sample_examples(300)
    with client.writer("coco", desc="first", shard_size=2000) as w:
        for i, rec in enumerate(records):
            w.write(rec, split="train" if i < 250 else "validation")
    v = w.version
    assert v.name.startswith("coco_") and v.name.endswith("_v1_first")
    assert v.state == "committed"
    train = v.splits["train"]
    assert train.record_count == 250 and train.shard_count > 1
    names = [u.rsplit("/", 1)[-1] for u in v.files("train")]
    assert names == [
        f"train-{i:05d}-of-{train.shard_count:05d}.tfrecord" for i in range(train.shard_count)
    ]
    assert v.storage_prefix.startswith(roots[0].as_uri())
    prefix = Path(v.storage_prefix[len("file://") :])
    assert not (prefix / "_incomplete").exists()
    assert {f.name for f in v.schema.features} == {"image", "label", "score"}
    assert v.schema.feature("label").kind == "int64"
    assert client.resolve("coco@latest").content_digest == v.content_digest
    assert v.verify(deep=True).ok
    assert v.verify().ok


def test_writer_gzip(client: rk.Client) -> None:
    records = sample_examples(100)
    with client.writer("coco", compression="gzip") as w:
        for rec in records:
            w.write(rec, split="test")
    (shard,) = w.version.splits["test"].shards
    assert shard.uri.endswith("/test-00000-of-00001.tfrecord.gz")
    assert shard.compression == "gzip" and shard.record_count == 100
    assert Path(shard.uri[len("file://") :]).read_bytes()[:2] == b"\x1f\x8b"
    assert w.version.verify(deep=True).ok


def test_writer_accepts_messages_and_rejects_other_types(client: rk.Client) -> None:
    class Msg:
        def SerializeToString(self) -> bytes:
            return sample_examples(1)[0]

    with client.writer("coco") as w:
        w.write(Msg())
        with pytest.raises(TypeError):
            w.write(42)
    assert w.version.record_count == 1


def test_writer_exception_leaves_nothing_visible(client: rk.Client) -> None:
    with pytest.raises(RuntimeError, match="boom"), client.writer("coco", shard_size=500) as w:
        for rec in sample_examples(50):
            w.write(rec)
        staged = w.staged
        raise RuntimeError("boom")
    assert staged is not None
    prefix = Path(staged.storage_prefix[len("file://") :])
    leftovers = [p for p in prefix.rglob("*") if p.is_file()] if prefix.exists() else []
    assert leftovers == []
    with pytest.raises(rk.VersionNotFound):
        client.resolve("coco@latest")
    assert client.resolve(staged.name).state == "abandoned"


def test_writer_with_nothing_written_fails_clearly(client: rk.Client) -> None:
    with pytest.raises(rk.InvalidShard, match="nothing was written"), client.writer("coco"):
        pass


def test_duplicate_content_keeps_existing_unless_forced(client: rk.Client) -> None:
    staged: list[str] = []

    def write() -> rk.DatasetVersion:
        with client.writer("coco") as w:
            for rec in sample_examples(20):
                w.write(rec)
        assert w.staged is not None
        staged.append(w.staged.name)
        return w.version

    first = write()
    # the writer reserves the number when it stages: named v1 (and stored so) from the start
    assert first.was_staged_as(staged[0]) and first.name == staged[0]
    assert first.storage_prefix.endswith(f"/coco/{first.name}/")
    assert first.verify(deep=True).ok
    with pytest.warns(rk.DuplicateWarning, match=first.name):
        again = write()
    assert again.name == first.name
    assert not again.was_staged_as(staged[1])  # the existing version answered
    assert first.verify(deep=True).ok  # deleting the duplicate's copies left the first alone
    assert client.resolve(staged[1]).state == "abandoned"
    with client.writer("coco", force_new=True) as w:
        for rec in sample_examples(20):
            w.write(rec)
    # content unknown until the end: the duplicate writer's reserved number stays a gap
    # (docs/naming.md); publish --copy, whose content is known first, takes none
    assert w.version.number == first.number + 2
    assert w.version.content_digest == first.content_digest


def test_publish_in_place_resolve_and_refs(client: rk.Client, roots: tuple[Path, Path]) -> None:
    data = roots[1]
    for i in range(3):
        write_tfrecord(data / f"train-{i:05d}-of-00003.tfrecord", sample_examples(10, i * 10))
    write_tfrecord(data / "validation.tfrecord.gz", sample_examples(5, 100), "gzip")
    v = _publish_dir(client, data, desc="raw")
    assert v.files("train")[0] == (data / "train-00000-of-00003.tfrecord").as_uri()
    assert v.splits["validation"].shards[0].compression == "gzip"
    assert v.record_count == 35
    for ref in ("coco@latest", "coco@v1", "coco@1", v.name, f"coco@{v.content_digest[:19]}"):
        assert client.resolve(ref).name == v.name, ref
    assert client.resolve("coco@latest").ref == "coco@latest"
    assert client.resolve(v.name, expect_digest=v.content_digest).name == v.name
    with pytest.raises(rk.DigestMismatch):
        client.resolve("coco@latest", expect_digest="sha256:" + "0" * 64)
    with pytest.raises(rk.VersionNotFound):
        client.resolve("coco@v9")
    with pytest.raises(rk.InvalidReference):
        client.resolve("coco@")
    with pytest.raises(rk.DatasetNotFound if False else rk.NotFound):
        client.resolve("nothing@latest")
    assert [x.name for x in client.versions("coco")] == [v.name]
    assert [d.name for d in client.datasets()] == ["coco"]


def test_publish_gzip_without_suffix_is_detected(
    client: rk.Client, roots: tuple[Path, Path]
) -> None:
    # write_small_dataset(..., file_type="tfrecords_gzip") writes GZIP under any name.
    write_tfrecord(roots[1] / "examples", sample_examples(7), "gzip")
    v = _publish_dir(client, roots[1])
    shard = v.splits["examples"].shards[0]
    assert (shard.compression, shard.record_count) == ("gzip", 7)


def test_publish_outside_allowed_roots_is_refused_before_reading(
    client: rk.Client, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    write_tfrecord(outside / "train.tfrecord", sample_examples(3))
    with pytest.raises(rk.StorageRootNotAllowed, match="copy_to"):
        _publish_dir(client, outside)
    with pytest.raises(rk.NotFound):
        client.resolve("coco@latest")


def test_publish_copy_to_the_versioned_layout(
    client: rk.Client, roots: tuple[Path, Path], tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    write_tfrecord(outside / "part-00000-of-00002", sample_examples(4), "gzip")
    write_tfrecord(outside / "part-00001-of-00002", sample_examples(4, 4), "gzip")
    ds = rk.Dataset.from_files("coco", {"train": sorted(outside.iterdir())})
    v = client.publish(ds, copy_to=roots[0].as_uri(), progress=False)
    assert [u.rsplit("/", 1)[-1] for u in v.files("train")] == [
        "train-00000-of-00002.tfrecord.gz",
        "train-00001-of-00002.tfrecord.gz",
    ]
    assert all(u.startswith(v.storage_prefix) for u in v.files("train"))
    assert v.verify(deep=True).ok


def test_publish_copy_true_uses_the_service_storage_root(
    client: rk.Client, roots: tuple[Path, Path], tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    write_tfrecord(outside / "train.tfrecord", sample_examples(3))
    v = client.publish(
        rk.Dataset.from_directory(outside, name="coco"), copy_to=True, progress=False
    )
    root = client.info()["storage_root"].rstrip("/")
    assert v.storage_prefix.startswith(root + "/coco/")
    assert all(u.startswith(v.storage_prefix) for u in v.files("train"))
    assert v.record_count == 3


def test_publish_identical_content_returns_existing(
    client: rk.Client, roots: tuple[Path, Path]
) -> None:
    write_tfrecord(roots[1] / "train.tfrecord", sample_examples(5))
    first = _publish_dir(client, roots[1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = _publish_dir(client, roots[1])
    assert again.name == first.name
    assert any(issubclass(w.category, rk.DuplicateWarning) for w in caught)
    forced = _publish_dir(client, roots[1], force_new=True)
    assert forced.number == first.number + 1  # the duplicate consumed no number


def test_publish_corrupt_shard_is_refused(client: rk.Client, roots: tuple[Path, Path]) -> None:
    path = write_tfrecord(roots[1] / "train.tfrecord", sample_examples(5))
    data = bytearray(path.read_bytes())
    data[40] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(rk.CorruptShard):
        _publish_dir(client, roots[1])
    with pytest.raises(rk.NotFound):
        client.resolve("coco@latest")


def test_from_tfds_record_counts_are_checked(client: rk.Client, roots: tuple[Path, Path]) -> None:
    import json

    d = roots[1]
    write_tfrecord(d / "mnist-train.tfrecord-00000-of-00001", sample_examples(4))
    (d / "dataset_info.json").write_text(
        json.dumps({"name": "mnist", "splits": [{"name": "train", "shardLengths": ["5"]}]})
    )
    with pytest.raises(
        rk.InvalidShard, match="says train-00000-of-00001 holds 5 records, the file holds 4"
    ):
        client.publish(rk.Dataset.from_tfds(d), progress=False)
    (d / "dataset_info.json").write_text(
        json.dumps({"name": "mnist", "splits": [{"name": "train", "shardLengths": ["4"]}]})
    )
    assert client.publish(rk.Dataset.from_tfds(d), progress=False).record_count == 4


def test_bit_flip_keeping_size_and_mtime_only_deep_finds(
    client: rk.Client, roots: tuple[Path, Path]
) -> None:
    for i in range(2):
        write_tfrecord(roots[1] / f"train-{i:05d}-of-00002.tfrecord", sample_examples(50, i * 50))
    v = _publish_dir(client, roots[1])
    victim = roots[1] / "train-00001-of-00002.tfrecord"
    st = victim.stat()
    data = bytearray(victim.read_bytes())
    data[1000] ^= 0x10
    victim.write_bytes(bytes(data))
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert v.verify().ok  # fast: same size and mtime on local disk
    report = v.verify(deep=True)
    assert not report.ok
    (problem,) = report.problems
    assert problem.shard.name == "train-00001-of-00002"
    assert problem.reason == "corrupt"
    assert problem.offset is not None and problem.offset <= 1000
    with pytest.raises(rk.CorruptShard, match="train-00001-of-00002"):
        report.raise_for_problems()


def test_replaced_shard_with_valid_records_is_records_changed(
    client: rk.Client, roots: tuple[Path, Path]
) -> None:
    path = write_tfrecord(roots[1] / "train.tfrecord", sample_examples(10))
    v = _publish_dir(client, roots[1])
    write_tfrecord(path, sample_examples(10, 500))
    assert [p.reason for p in v.verify().problems] in (["identity_changed"], ["size_changed"])
    assert [p.reason for p in v.verify(deep=True).problems] in (
        ["records_changed"],
        ["size_changed"],
    )
    path.unlink()
    assert [p.reason for p in v.verify(deep=True).problems] == ["missing"]
    assert [p.reason for p in v.verify().problems] == ["missing"]


def test_aliases_diff_and_deprecate(client: rk.Client, roots: tuple[Path, Path]) -> None:
    with client.writer("coco") as w:
        for rec in sample_examples(30):
            w.write(rec)
    v1 = w.version
    with client.writer("coco") as w:
        for rec in sample_examples(40):
            w.write(rec)
    v2 = w.version
    client.set_alias("coco", "prod", "coco@v1")
    assert client.resolve("coco@prod").name == v1.name
    aliases = {a["alias"]: a["version"] for a in client.aliases("coco")}
    assert aliases["prod"] == v1.name and aliases["latest"] == v2.name
    d = client.diff("coco@prod", "coco@latest")
    assert [(s.split, s.old_records, s.new_records) for s in d.splits] == [("train", 30, 40)]
    assert len(d.changed) == 1 and not d.schema
    with pytest.raises(rk.InvalidAlias):
        client.set_alias("coco", "latest", v1.name)
    client.deprecate(v2, reason="labels were wrong")
    assert client.resolve("coco@latest").name == v1.name
    assert client.resolve(v2.name).state == "deprecated"


def test_register_shards_against_missing_version(
    client: rk.Client, roots: tuple[Path, Path]
) -> None:
    with pytest.raises(rk.VersionNotFound):
        client.register_shards(
            "coco_20231015_v1",
            [
                {
                    "split": "train",
                    "index": 0,
                    "count": 1,
                    "uri": (roots[1] / "a").as_uri(),
                    "compression": "none",
                    "size": 1,
                    "sha256": "0" * 64,
                    "crc32c": "0" * 8,
                    "records_sha256": "0" * 64,
                    "record_count": 1,
                }
            ],
        )


def test_lazy_schema_is_fetched_once(client: rk.Client) -> None:
    with client.writer("coco") as w:
        for rec in sample_examples(3):
            w.write(rec)
    v = client.resolve("coco@latest")
    assert v.schema is v.schema
    assert v.schema.record_count == 3


def test_process_pool_path_keeps_errors_typed(
    client: rk.Client, roots: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Big jobs run in worker processes: results, offsets and error codes must survive."""
    monkeypatch.setenv("RECORDKEEPER_PROCESSES", "1")
    for i in range(2):
        write_tfrecord(roots[1] / f"train-{i:05d}-of-00002.tfrecord", sample_examples(40, i * 40))
    v = _publish_dir(client, roots[1])
    assert v.record_count == 80 and v.verify(deep=True).ok
    victim = roots[1] / "train-00000-of-00002.tfrecord"
    data = bytearray(victim.read_bytes())
    data[700] ^= 0x08
    victim.write_bytes(bytes(data))
    (problem,) = v.verify(deep=True).problems
    assert (problem.shard.name, problem.reason) == ("train-00000-of-00002", "corrupt")
    assert problem.offset is not None
    with pytest.raises(rk.CorruptShard) as info:
        _publish_dir(client, roots[1], force_new=True)
    assert "offset" in info.value.extra


def test_auth_required_without_token_is_typed(tmp_path: Path) -> None:
    with sqlite_app(tmp_path, auth="required") as http:
        with pytest.raises(rk.AuthenticationRequired):
            rk.Client(http_client=http, token="").resolve("coco@latest")
        with pytest.raises(rk.AuthenticationRequired):
            rk.Client(http_client=http, token="rk_wrong").datasets()


@pytest.mark.parametrize("shard_size", [1, 5_000, 2**20 + 7, 3 * 2**20])
def test_writer_shards_end_at_the_record_reaching_shard_size(
    client: rk.Client, shard_size: int
) -> None:
    """Uncompressed shards close exactly after the record whose frame reaches shard_size,
    also when records are handed to the TFRecordWriter in batches of ~1 MiB."""
    rng = __import__("random").Random(shard_size)
    records = [b"\xff" + rng.randbytes(rng.randrange(0, 3000)) for _ in range(4000)]  # opaque
    with client.writer("sizes", shard_size=shard_size) as w:
        for rec in records:
            w.write(rec)
        assert w.record_count == len(records)
    expected, size = [], 0
    for rec in records:
        size += len(rec) + 16
        if size >= shard_size:
            expected.append(size)
            size = 0
    if size:
        expected.append(size)
    assert [s.size for s in w.version.shards] == expected
    assert w.version.verify(deep=True).ok

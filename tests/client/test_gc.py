"""``client.collect_garbage`` against the real service app in-process (SQLite, local disk)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import recordkeeper as rk
from recordkeeper.errors import Conflict
from recordkeeper.gc import GcCandidate, check_prefix
from tests.apps import sqlite_app
from tests.client._records import sample_examples
from tests.service.test_gc import age

pytest.importorskip("fastapi")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    path.mkdir()
    return path


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'registry.db'}"


@pytest.fixture
def client(database_url: str, store: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[rk.Client]:
    root = store.as_uri()
    monkeypatch.setenv("RECORDKEEPER_ALLOWED_ROOTS", root)  # the collector's own roots
    with sqlite_app(store.parent, database_url=database_url, storage_root=root) as http:
        yield rk.Client(http_client=http)


def crashed_writer(client: rk.Client, sizes: tuple[int, ...] = (100, 20)) -> tuple[str, Path]:
    """Stage a version and write objects under its prefix without committing (a crash)."""
    version = client.stage("coco")
    prefix = Path(version.storage_prefix[len("file://") :])
    for i, size in enumerate(sizes):
        target = prefix / ("_incomplete" if i else "") / f"train-{i:05d}.tfrecord"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"x" * size)
    return version.name, prefix


def committed(client: rk.Client, start: int = 0) -> rk.DatasetVersion:
    with client.writer("coco") as w:
        for record in sample_examples(20, start):
            w.write(record, split="train")
    return w.version


def test_dry_run_then_delete(client: rk.Client, database_url: str) -> None:
    trained = committed(client)
    client.register_checkpoint(model="det", checkpoint="ckpt-1", step=1, data={"train": trained})
    kept = committed(client, 100)  # a second committed version, not in use
    stale, stale_dir = crashed_writer(client)
    age(database_url, stale, 2 * 3600)  # crashed two hours ago
    gone, gone_dir = crashed_writer(client, (7,))
    client.abandon(gone)
    active, active_dir = crashed_writer(client, (5,))  # another writer, still at work

    assert [c.name for c in client.gc_candidates(staged_older_than=86400)] == [gone]
    assert [c.name for c in client.gc_candidates(staged_older_than=0)] == [stale, gone]

    dry = client.collect_garbage(staged_older_than=0)
    assert dry.dry_run and dry.ok
    assert [(i.name, i.action, i.objects, i.bytes) for i in dry.items] == [
        (stale, "would_delete", 2, 120),
        (gone, "would_delete", 1, 7),
    ]
    assert (dry.objects, dry.bytes) == (3, 127)
    assert stale_dir.exists() and client.resolve(stale).state == "staged"

    report = client.collect_garbage(staged_older_than=0, dry_run=False)
    assert report.ok and (report.objects, report.bytes) == (3, 127)
    assert {i.action for i in report.items} == {"deleted"}
    assert not stale_dir.exists() and not gone_dir.exists()
    assert client.resolve(stale).state == "abandoned"  # abandoned before its files went
    assert client.gc_candidates(staged_older_than=0) == []
    assert client.collect_garbage(staged_older_than=0, dry_run=False).items == []
    assert active_dir.exists() and client.resolve(active).state == "staged"

    # Committed versions — the one a checkpoint trained on too — and their shards survive.
    for version in (trained, kept):
        again = client.resolve(version.name)
        assert again.state == "committed"
        assert again.verify(deep=True).ok
    assert client.lineage("det/ckpt-1").versions[0] == trained.name


def test_a_dry_run_counts_what_another_version_references_as_kept(client: rk.Client) -> None:
    """A staged version registers a file under an abandoned one's prefix, in place: the dry run
    says that file is kept (as the deleting run then keeps it), not counted as would-delete."""
    from recordkeeper.dataset import ShardFile
    from recordkeeper.publish import scan_file
    from tests.client._records import frame

    gone, gone_dir = crashed_writer(client, (7,))  # one junk object
    client.abandon(gone)
    shard = gone_dir / "train-00000-of-00001.tfrecord"
    shard.write_bytes(frame(sample_examples(3)))
    other = client.stage("coco")
    registration = scan_file(ShardFile("train", 0, 1, shard.as_uri()), None)
    client.registry.register_shards(other.name, [registration])

    dry = client.collect_garbage(staged_older_than=86400)
    (item,) = dry.items
    assert (item.name, item.action, item.objects, item.bytes, item.kept) == (
        gone,
        "would_delete",
        1,
        7,
        1,
    )
    assert (dry.objects, dry.kept) == (1, 1) and client.resolve(gone).data_state == "stored"
    report = client.collect_garbage(staged_older_than=86400, dry_run=False)
    (done,) = report.items
    assert (done.objects, done.bytes, done.kept) == (item.objects, item.bytes, item.kept)
    assert shard.exists() and not (gone_dir / "train-00000.tfrecord").exists()


def test_fresh_staged_versions_are_left_alone(client: rk.Client) -> None:
    name, prefix = crashed_writer(client)
    report = client.collect_garbage(dry_run=False)
    assert report.items == []
    assert prefix.exists() and client.resolve(name).state == "staged"


def _candidate(prefix: str, name: str = "coco_20260101_v1") -> GcCandidate:
    return GcCandidate(name, "coco", "abandoned", "2026-01-01T00:00:00Z", prefix, 0)


@pytest.mark.parametrize(
    "prefix",
    [
        "file:///elsewhere/coco/coco_20260101_v1/",  # outside the allowed roots
        "file:///store/coco/",  # not {root}/{dataset}/{name}/
        "file:///store/coco/coco_20260101_v2/",  # another version's prefix
        "file:///store/../coco/coco_20260101_v1/",
        "file:///store//coco/coco_20260101_v1/",
        "file:///store/coco/coco_20260101_v1",  # no trailing slash
        "/store/coco/coco_20260101_v1/",
    ],
)
def test_unsafe_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(ValueError):
        check_prefix(_candidate(prefix), ["file:///store"])


def test_safe_prefixes() -> None:
    assert check_prefix(_candidate("file:///store/coco/coco_20260101_v1/"), ["file:///store/"])
    assert check_prefix(
        _candidate("s3://b/datasets/coco/coco_20260101_v1/"), ["file:///x", "s3://b/datasets"]
    )
    with pytest.raises(ValueError):  # a root must match whole segments
        check_prefix(_candidate("s3://b/datasets2/coco/coco_20260101_v1/"), ["s3://b/datasets"])


def test_refused_prefix_is_reported_not_deleted(
    client: rk.Client, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    name, prefix = crashed_writer(client)
    age(database_url, name, 2 * 3600)
    monkeypatch.setattr(client.registry, "info", lambda: {"allowed_roots": ["file:///nowhere"]})
    report = client.collect_garbage(staged_older_than=0, dry_run=False)
    assert not report.ok and report.objects == 0
    (item,) = report.items
    assert item.name == name and item.action == "refused" and "allowed roots" in (item.error or "")
    # The server claimed (and so abandoned) it; the client refused to delete outside the roots.
    assert prefix.exists() and client.resolve(name).state == "abandoned"


def test_deleted_objects_are_counted_when_not_recorded_collected(
    client: rk.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary counts what was deleted, even if gc-done fails afterwards."""
    name, prefix = crashed_writer(client)
    client.abandon(name)
    api = client.registry.http.api

    def failing_gc_done(method: str, path: str, **kwargs: object) -> object:
        if path.endswith("/gc-done"):
            raise Conflict("no")
        return api(method, path, **kwargs)

    monkeypatch.setattr(client.registry.http, "api", failing_gc_done)
    report = client.collect_garbage(dry_run=False)
    assert not report.ok and (report.objects, report.bytes, report.versions) == (2, 120, 1)
    (item,) = report.items
    assert item.action == "deleted" and "not recorded collected" in (item.error or "")
    assert not prefix.exists()

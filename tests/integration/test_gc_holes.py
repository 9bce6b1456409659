"""The collector never hurts live data, over real sockets (issue 22, holes 1 and 2; issue 21,
item 7's gc part).

* Hole 1: a version's (or its dataset's) directory replaced by a symbolic link to a folder
  outside the roots, then abandoned: ``recordkeeper gc --delete`` used to delete the folder's
  files and report "removed 1 object(s)".  A link planted at the writer's predictable temp path
  made it overwrite the link's target.
* Hole 2: a staged version registered a file under an abandoned version's prefix; gc deleted it;
  the version then committed and ``verify`` found the shard missing.  The race variant
  (registration after the claim, before the deletion) ended the same way, over two real
  processes against PostgreSQL here.
* A lying ``/info`` (``allowed_roots: ["file:///"]``) made the collector delete an outside file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from recordkeeper.dataset import ShardFile
from recordkeeper.errors import StorageReleased, StorageRootNotAllowed, UnsafeStoragePath
from recordkeeper.publish import scan_file
from tests.apps import migrated
from tests.client._records import sample_examples, write_tfrecord
from tests.integration._serve import serve
from tests.integration.conftest import LiveService
from tests.service._helpers import API

pytest.importorskip("fastapi")


def gc_delete(url: str, root: Path, *extra: str) -> dict[str, Any]:
    """``recordkeeper gc --older-than 0 --delete --root ROOT --json`` against ``url``."""
    args = ["--url", url, "gc", "--older-than", "0", "--delete", "--root", root.as_uri()]
    result = CliRunner().invoke(app, [*args, "--json", *extra])
    assert result.exit_code in (0, 1), result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def tree(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def prefix_path(version: rk.DatasetVersion) -> Path:
    return Path(version.storage_prefix.removeprefix("file://"))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``recordkeeper serve`` in its own process (SQLite), and its storage root."""
    store = tmp_path / "store"
    store.mkdir()
    url = migrated(f"sqlite:///{tmp_path / 'registry.db'}")
    with serve(database_url=url, storage_root=store.as_uri(), log=tmp_path / "serve.log") as s:
        yield s.url, store


def test_gc_never_deletes_through_a_symlink(served: tuple[str, Path], tmp_path: Path) -> None:
    url, store = served
    client = rk.Client(url=url)
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "sub").mkdir()
    (outside / "a.tfrecord").write_bytes(b"keep me")
    (outside / "sub" / "b.tfrecord").write_bytes(b"keep me too")
    before = tree(outside)

    # 1. The version's own directory is a link to the outside folder.
    linked_version = client.stage("coco")
    prefix_path(linked_version).parent.mkdir(parents=True, exist_ok=True)
    prefix_path(linked_version).symlink_to(outside, target_is_directory=True)
    client.abandon(linked_version.name)
    # 2. Inside a real version directory: a link to an outside file and one to the folder.
    inner = client.stage("coco")
    directory = prefix_path(inner)
    (directory / "_incomplete").mkdir(parents=True)
    (directory / "_incomplete" / "train-00000.tfrecord").write_bytes(b"junk")
    (directory / "train-00001.tfrecord").symlink_to(outside / "a.tfrecord")
    (directory / "more").symlink_to(outside, target_is_directory=True)
    client.abandon(inner.name)

    report = gc_delete(url, store)
    items = {i["name"]: i for i in report["items"]}
    assert tree(outside) == before  # nothing outside the root was touched
    assert items[linked_version.name]["action"] == "refused"
    assert "outside the allowed roots" in items[linked_version.name]["error"]
    assert prefix_path(linked_version).is_symlink()  # left as it was
    # The inner links were removed as links: the junk file and two links, never their targets.
    assert items[inner.name]["action"] == "deleted" and items[inner.name]["objects"] == 3
    assert not directory.exists()
    assert not report["ok"]  # a refusal is reported, never "removed" silently

    # 3. The dataset's directory replaced by a link (after staging, before gc).
    other = client.stage("other")
    prefix_path(other).mkdir(parents=True)
    (prefix_path(other) / "x.tfrecord").write_bytes(b"x")
    client.abandon(other.name)
    dataset_dir = store / "other"
    moved = tmp_path / "moved-away"
    dataset_dir.rename(moved)
    dataset_dir.symlink_to(moved, target_is_directory=True)
    report = gc_delete(url, store)
    (item,) = report["items"]
    assert item["name"] == other.name and item["action"] == "refused"
    assert (moved / other.name / "x.tfrecord").read_bytes() == b"x"


def test_writer_refuses_a_planted_link(served: tuple[str, Path], tmp_path: Path) -> None:
    """The temp path is predictable; a link planted there is refused, its target untouched."""
    url, _store = served
    client = rk.Client(url=url)
    target = tmp_path / "victim.txt"
    target.write_bytes(b"original")
    first = client.stage("coco")  # ..._staged1, no number; the writer reserves v1
    client.abandon(first.name)
    upcoming = prefix_path(first).parent / first.name.replace("staged1", "v1")
    (upcoming / "_incomplete").mkdir(parents=True)
    planted = upcoming / "_incomplete" / "train-00000.tfrecord"
    planted.symlink_to(target)

    with pytest.raises(UnsafeStoragePath) as caught, client.writer("coco") as w:
        for record in sample_examples(5):
            w.write(record, split="train")
    assert caught.value.code == "unsafe_storage_path"
    assert caught.value.extra["reason"] == "symlink"
    assert target.read_bytes() == b"original" and planted.is_symlink()
    assert client.versions("coco", state="committed") == []

    # A link in place of the temp directory: refused as well (the failed writer's v1 is a gap).
    third = client.stage("coco")
    client.abandon(third.name)
    nxt = prefix_path(third).parent / third.name.replace("staged3", "v2")
    nxt.mkdir(parents=True)
    away = tmp_path / "away"
    away.mkdir()
    (nxt / "_incomplete").symlink_to(away, target_is_directory=True)
    with pytest.raises(UnsafeStoragePath), client.writer("coco") as w:
        w.write(sample_examples(1)[0], split="train")
    assert list(away.iterdir()) == []


def test_publishing_a_symlink_in_place_is_refused(
    live_service: LiveService, data_dir: Path, tmp_path: Path
) -> None:
    client = rk.Client(url=live_service.url)
    real = write_tfrecord(data_dir / "real.tfrecord", sample_examples(3))
    (data_dir / "train-00000-of-00001.tfrecord").symlink_to(real)
    with pytest.raises(UnsafeStoragePath) as caught:
        client.publish(
            rk.Dataset.from_files("coco", [data_dir / "train-00000-of-00001.tfrecord"]),
            progress=False,
        )
    assert caught.value.extra["reason"] == "symlink"
    outside = tmp_path / "outside"
    outside.mkdir()
    write_tfrecord(outside / "train-00000-of-00001.tfrecord", sample_examples(3))
    (data_dir / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafeStoragePath) as caught:
        client.publish(
            rk.Dataset.from_files("coco", [data_dir / "linked" / "train-00000-of-00001.tfrecord"]),
            progress=False,
        )
    assert caught.value.extra["reason"] == "outside_roots"


def _abandoned_with_a_foreign_shard(
    client: rk.Client, start: int = 0
) -> tuple[rk.DatasetVersion, rk.DatasetVersion, Path, dict[str, Any]]:
    """Abandoned version A with junk; staged B whose shard file lies under A's prefix."""
    a = client.stage("coco")
    a_dir = prefix_path(a)
    (a_dir / "_incomplete").mkdir(parents=True)
    (a_dir / "_incomplete" / "train-00000.tfrecord").write_bytes(b"junk")
    shard = write_tfrecord(a_dir / "train-00000-of-00001.tfrecord", sample_examples(4, start))
    client.abandon(a.name)
    b = client.stage("coco")
    registration = scan_file(ShardFile("train", 0, 1, shard.as_uri()), None)
    return a, b, shard, registration


def test_a_file_another_staged_version_registered_survives_gc(
    live_service_factory: Callable[..., LiveService],
) -> None:
    service = live_service_factory()
    store = Path(service.storage_root.removeprefix("file://"))
    client = rk.Client(url=service.url)
    a, b, shard, registration = _abandoned_with_a_foreign_shard(client)
    client.registry.register_shards(b.name, [registration])

    report = gc_delete(service.url, store)
    assert shard.exists(), "gc deleted a file a staged version references"
    committed = client.commit(b.name)
    assert committed.verify(deep=True).ok
    (item,) = report["items"]
    assert item["name"] == a.name and item["action"] == "deleted"
    assert (item["objects"], item["kept"]) == (1, 1)  # the junk went, B's shard was kept
    assert report["kept"] == 1 and report["ok"]
    # A's storage is released: nothing more may be registered there, by anyone.
    c = client.stage("coco")
    late = write_tfrecord(prefix_path(a) / "late.tfrecord", sample_examples(2))
    with pytest.raises(StorageReleased) as caught:
        client.registry.register_shards(
            c.name, [scan_file(ShardFile("train", 0, 1, late.as_uri()), None)]
        )
    assert caught.value.extra["released_by"] == a.name


def test_registration_after_the_claim_is_refused(
    live_service_factory: Callable[..., LiveService],
) -> None:
    """The race variant, in sequence: B registers after A's claim, before the deletion."""
    service = live_service_factory()
    client = rk.Client(url=service.url)
    a, b, _shard, registration = _abandoned_with_a_foreign_shard(client)
    claimed = httpx.post(f"{service.url}{API}/gc/claims", json={"staged_older_than": 0})
    assert [c["name"] for c in claimed.json()["data"]] == [a.name]
    with pytest.raises(StorageReleased):
        client.registry.register_shards(b.name, [registration])
    assert client.resolve(b.name).shard_count == 0


_RACER = """
import json, sys
import recordkeeper as rk
from recordkeeper.errors import RecordkeeperError
url, name, registration = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
client = rk.Client(url=url)
try:
    client.registry.register_shards(name, [registration])
    version = client.commit(name)
    print(json.dumps({"committed": version.name}))
except RecordkeeperError as exc:
    print(json.dumps({"refused": exc.code}))
"""


def test_claim_and_registration_race_over_two_processes_on_postgresql(
    postgres_database_url: str, tmp_path: Path
) -> None:
    """A collector process and a writer process, each through its own ``serve`` process on one
    PostgreSQL database, race on the same file: whatever the interleaving, a version that
    commits has its file, and a file that was deleted is referenced by no committed version."""
    store = tmp_path / "store"
    store.mkdir()
    url = migrated(postgres_database_url)
    env = {**os.environ, "RECORDKEEPER_ALLOWED_ROOTS": store.as_uri()}
    with (
        serve(database_url=url, storage_root=store.as_uri(), log=tmp_path / "a.log") as one,
        serve(database_url=url, storage_root=store.as_uri(), log=tmp_path / "b.log") as two,
    ):
        client = rk.Client(url=one.url)
        outcomes = []
        for round_ in range(6):  # bounded; each round is one race
            a, b, shard, registration = _abandoned_with_a_foreign_shard(client, 10 * round_)
            gc = [sys.executable, "-m", "recordkeeper.cli", "--url", one.url, "gc"]
            gc += ["--older-than", "0", "--delete", "--json"]
            racer = [sys.executable, "-c", _RACER, two.url, b.name, json.dumps(registration)]
            collector = subprocess.Popen(gc, env=env, stdout=subprocess.PIPE, text=True)
            writer = subprocess.Popen(racer, env=env, stdout=subprocess.PIPE, text=True)
            gc_out, _ = collector.communicate(timeout=120)
            writer_out, _ = writer.communicate(timeout=120)
            assert collector.returncode in (0, 1), gc_out
            result = json.loads(writer_out)
            report = json.loads(gc_out)
            if "committed" in result:
                assert shard.exists(), "a committed version points at a deleted file"
                assert client.resolve(result["committed"]).verify(deep=True).ok
            else:
                assert result == {"refused": "storage_released"}
                assert not shard.exists()  # released, nobody references it: deleted
            # The claim took A, or skipped it while the registration held it (no waiting):
            # then the next run takes it.  Either way B's file is kept if B references it.
            assert [i["name"] for i in report["items"]] in ([a.name], [])
            if not report["items"]:
                (item,) = gc_delete(one.url, store)["items"]
                assert item["name"] == a.name
                assert item["kept"] == (1 if "committed" in result else 0)
            assert client.resolve(a.name).state == "abandoned"
            collected = httpx.get(f"{one.url}{API}/versions/{a.name}").json()
            assert collected["state"] == "abandoned"
            assert shard.exists() == ("committed" in result)
            outcomes.append((next(iter(result)), bool(report["items"])))
        assert outcomes  # the interleavings seen are the scheduler's; each one was consistent


class _LyingService(BaseHTTPRequestHandler):
    """Answers crafted JSON: ``/info`` claims every file is inside its roots, and one claimed
    version's storage prefix lies outside anything the real service would allow."""

    prefix: ClassVar[str] = ""
    requests: ClassVar[list[str]] = []

    def _answer(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        type(self).requests.append(f"GET {self.path}")
        if self.path.startswith("/api/v1/info"):
            self._answer({"allowed_roots": ["file:///"], "storage_root": "file:///"})
        else:
            self._answer({"data": [], "count": 0, "limit": 100, "offset": 0})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        type(self).requests.append(f"POST {self.path}")
        if self.path.endswith("/gc/claims"):
            first = sum(r.endswith("/gc/claims") for r in type(self).requests) == 1
            candidate = {
                "name": "coco_20260101_staged1",
                "dataset": "coco",
                "state": "abandoned",
                "created_at": "2026-01-01T00:00:00Z",
                "storage_prefix": type(self).prefix,
                "shard_count": 0,
            }
            self._answer({"data": [candidate] if first else []})
        elif self.path.endswith("/gc-objects"):
            self._answer({"version": "x", "delete": body["uris"], "keep": []})
        else:
            self._answer({})


def test_gc_does_not_trust_the_roots_a_lying_service_reports(tmp_path: Path) -> None:
    victim_dir = tmp_path / "home" / "coco" / "coco_20260101_staged1"
    victim_dir.mkdir(parents=True)
    (victim_dir / "thesis.tex").write_bytes(b"years of work")
    store = tmp_path / "store"
    store.mkdir()
    handler = type("Lying", (_LyingService,), {"prefix": victim_dir.as_uri() + "/", "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        client = rk.Client(url=url, retries=0)
        # Its own roots: the service's file:/// widens nothing.
        report = client.collect_garbage(
            staged_older_than=0, dry_run=False, allowed_roots=[store.as_uri()]
        )
        assert (victim_dir / "thesis.tex").read_bytes() == b"years of work"
        (item,) = report.items
        assert item.action == "refused" and "outside the allowed roots" in (item.error or "")
        assert not [r for r in handler.requests if r.endswith(("/gc-objects", "/gc-done"))]
        handler.requests.clear()
        # No roots of its own: refused before anything is claimed.
        with pytest.MonkeyPatch.context() as mp:
            mp.delenv("RECORDKEEPER_ALLOWED_ROOTS", raising=False)
            with pytest.raises(StorageRootNotAllowed):
                client.collect_garbage(staged_older_than=0, dry_run=False)
        assert not [r for r in handler.requests if r.endswith("/gc/claims")]
        # And a local root of file:/// is refused as too wide.
        with pytest.raises(StorageRootNotAllowed):
            client.collect_garbage(staged_older_than=0, dry_run=False, allowed_roots=["file:///"])
    finally:
        server.shutdown()
        server.server_close()

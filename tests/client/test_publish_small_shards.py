"""Small shards at the hash limit (issue 23, item 7): what publishing a few KiB costs is the
file's read and hash, not a thread per shard.  These tests pin the mechanism (no timing):
a shard read in one piece is hashed in the calling thread, small local shards published in
place are read whole without a worker pool, and the digests are the same either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from recordkeeper import formats, streaming
from recordkeeper import publish as publish_module
from recordkeeper.dataset import ShardFile
from tests.client._records import frame
from tests.client.test_client_app import client, roots  # noqa: F401 (fixtures)
from tests.client.test_format_digests_pinned import fixed_records

pytest.importorskip("fastapi")


class _NoThreads:
    """Stands in for ThreadPoolExecutor where no thread may start."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a worker thread was started")


def _small_files(directory: Path, n: int) -> list[Path]:
    paths = []
    for i in range(n):
        path = directory / f"train-{i:05d}-of-{n:05d}.tfrecord"
        path.write_bytes(frame(fixed_records(4, salt=i)))
        paths.append(path)
    return paths


def test_a_one_piece_shard_is_hashed_without_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _small_files(tmp_path, 1)[0]
    shard = ShardFile("train", 0, 1, path.as_uri())  # format and compression detected
    expected = publish_module.scan_file(shard, None)
    monkeypatch.setattr(streaming, "ThreadPoolExecutor", _NoThreads)
    # the format sniff's first 64 bytes come back with the rest of the file: one piece
    assert publish_module.scan_file(shard, None) == expected
    # (the patch does catch a thread: a shard read in two pieces starts one)
    with pytest.raises(AssertionError, match="worker thread"):
        formats.get("tfrecord").scan(_TwoPieces(path.read_bytes()), "none")


class _TwoPieces:
    """A source that answers its bytes in two reads."""

    def __init__(self, data: bytes) -> None:
        self._pieces = [data[:100], data[100:]]

    def read(self, size: int = -1) -> bytes:
        return self._pieces.pop(0) if self._pieces else b""


def test_the_prefixed_reader_answers_head_and_rest_in_one_piece(tmp_path: Path) -> None:
    path = tmp_path / "x"
    path.write_bytes(bytes(range(200)))
    with path.open("rb") as fh:
        head = fh.read(64)
        reader = publish_module._Prefixed(head, fh)
        assert reader.read(150) == bytes(range(150))
        assert reader.read(-1) == bytes(range(150, 200))
    with path.open("rb") as fh:
        head = fh.read(64)
        reader = publish_module._Prefixed(head, fh)
        assert reader.read(10) == bytes(range(10))  # smaller than the head: still in order
        assert reader.read(100) == bytes(range(10, 110))


def test_small_local_shards_publish_in_place_without_worker_threads(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = roots[1]
    paths = _small_files(data, 12)
    expected = [
        publish_module.scan_file(ShardFile("train", i, len(paths), p.as_uri()), None)
        for i, p in enumerate(paths)
    ]
    monkeypatch.setattr(streaming, "ThreadPoolExecutor", _NoThreads)
    monkeypatch.setattr("recordkeeper._parallel.ThreadPoolExecutor", _NoThreads)
    v = client.publish(rk.Dataset.from_directory(data, name="tiny"), progress=False)
    assert v.shard_count == len(paths)
    shards = sorted(v.shards, key=lambda s: s.index)
    for shard, want in zip(shards, expected, strict=True):
        for field in ("sha256", "crc32c", "records_sha256", "record_count", "size", "format"):
            assert getattr(shard, field) == want[field], field
        assert shard.storage_identity == want["storage_identity"]
    monkeypatch.undo()
    assert v.verify(deep=True, progress=False).ok and v.verify().ok


def test_a_small_local_shard_that_changes_while_read_inline_is_refused(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = roots[1]
    paths = _small_files(data, 3)
    real_stat = publish_module.stat_file

    def stat_after_a_rewrite(uri: str, path: str) -> Any:
        if path == str(paths[1]):
            paths[1].write_bytes(frame(fixed_records(5, salt=99)))
        return real_stat(uri, path)

    monkeypatch.setattr(publish_module, "stat_file", stat_after_a_rewrite)
    with pytest.raises(rk.StorageError, match="changed while it was being read"):
        client.publish(rk.Dataset.from_directory(data, name="tiny"), progress=False)


def test_the_in_place_check_resolves_each_directory_once_and_still_refuses_links(
    tmp_path: Path,
) -> None:
    from recordkeeper import local_files

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    outside.mkdir()
    (root / "d" / "a.tfrecord").write_bytes(b"")
    (outside / "b.tfrecord").write_bytes(b"")
    (root / "via").symlink_to(outside)  # a directory on the path is a link out of the root
    (root / "d" / "link.tfrecord").symlink_to(root / "d" / "a.tfrecord")
    real_roots = local_files.real_roots([root.as_uri()])
    real_dirs: dict[str, str] = {}
    local_files.check_in_place(str(root / "d" / "a.tfrecord"), real_roots, real_dirs)
    assert real_dirs == {str(root / "d"): str((root / "d").resolve())}
    with pytest.raises(rk.RecordkeeperError, match="outside the allowed roots"):
        local_files.check_in_place(str(root / "via" / "b.tfrecord"), real_roots, real_dirs)
    with pytest.raises(rk.RecordkeeperError, match="symbolic link"):
        local_files.check_in_place(str(root / "d" / "link.tfrecord"), real_roots, real_dirs)

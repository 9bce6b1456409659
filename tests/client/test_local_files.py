"""``recordkeeper.local_files``: nothing is written, moved or deleted through a link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from recordkeeper import local_files
from recordkeeper.errors import StorageError, UnsafeStoragePath


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


def roots(root: Path) -> list[str]:
    return local_files.real_roots([root.as_uri()])


def test_create_is_exclusive_and_never_follows_a_link(root: Path, tmp_path: Path) -> None:
    with local_files.create_exclusive(str(root / "a" / "b" / "x"), roots(root)) as f:
        f.write(b"data")
    assert (root / "a" / "b" / "x").read_bytes() == b"data"
    with pytest.raises(UnsafeStoragePath) as caught:
        local_files.create_exclusive(str(root / "a" / "b" / "x"), roots(root))
    assert caught.value.extra["reason"] == "exists"
    victim = tmp_path / "victim"
    victim.write_bytes(b"v")
    (root / "link").symlink_to(victim)
    with pytest.raises(UnsafeStoragePath) as caught:
        local_files.create_exclusive(str(root / "link"), roots(root))
    assert caught.value.extra["reason"] == "symlink" and victim.read_bytes() == b"v"
    (root / "dirlink").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(UnsafeStoragePath) as caught:
        local_files.create_exclusive(str(root / "dirlink" / "new"), roots(root))
    assert caught.value.extra["reason"] == "outside_roots"
    assert not (tmp_path / "new").exists()


def test_move_refuses_a_planted_destination(root: Path, tmp_path: Path) -> None:
    src, dst = root / "tmp" / "s", root / "final"
    src.parent.mkdir()
    src.write_bytes(b"shard")
    (root / "final").symlink_to(tmp_path / "victim")
    with pytest.raises(UnsafeStoragePath):
        local_files.move_exclusive(str(src), str(dst), roots(root))
    assert src.exists() and not (tmp_path / "victim").exists()
    os.unlink(dst)
    local_files.move_exclusive(str(src), str(dst), roots(root))
    assert dst.read_bytes() == b"shard" and not src.exists()
    with pytest.raises(StorageError) as caught:  # a retried move: the source is gone
        local_files.move_exclusive(str(src), str(dst), roots(root))
    assert caught.value.extra["reason"] == "missing"


def test_walk_and_delete_remove_links_as_links(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "f").write_bytes(b"keep")
    prefix = root / "ds" / "v"
    (prefix / "sub").mkdir(parents=True)
    (prefix / "sub" / "a").write_bytes(b"12345")
    (prefix / "flink").symlink_to(outside / "deep" / "f")
    (prefix / "dlink").symlink_to(outside, target_is_directory=True)
    listed = local_files.walk_objects(str(prefix), roots(root))
    assert [(o.relative, o.link) for o in listed] == [
        ("dlink", True),
        ("flink", True),
        ("sub/a", False),
    ]
    assert listed[2].size == 5
    deleted = local_files.delete_objects(str(prefix), roots(root), [o.relative for o in listed])
    assert sorted(deleted) == ["dlink", "flink", "sub/a"]
    assert local_files.remove_empty_directories(str(prefix), roots(root))
    assert not prefix.exists() and (outside / "deep" / "f").read_bytes() == b"keep"
    with pytest.raises(UnsafeStoragePath):
        local_files.walk_objects(str(root / "ds" / "x"), local_files.real_roots(["file:///nope"]))

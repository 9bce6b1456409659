"""Per-file work of publishing small local shards in place (issue 23, item 7, session 11).

Each test pins one mechanism by counting what it does (calls, reads, allocations), never by
timing it: the record indexes publish holds are stored once and not read back, an index
already stored with the same bytes is kept, a shard URI is normalised once when the service
validates it, a few identities are sorted without the radix table, a local file is stat'ed
once per identity, and the Riegeli sniff of every shard's head answers as the byte loop did.
"""

from __future__ import annotations

import os
import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from recordkeeper import _native, storage
from recordkeeper.core import roots as roots_module
from recordkeeper.core.errors import InvalidShard
from recordkeeper.core.roots import AllowedRoots
from recordkeeper.core.shards import validate_shard
from recordkeeper.formats.riegeli import FILE_SIGNATURE, looks_like_riegeli
from recordkeeper.record_ids import index_uri, sort_identities
from tests.client.test_client_app import client, roots  # noqa: F401 (fixtures)
from tests.client.test_publish_small_shards import _small_files

pytest.importorskip("fastapi")


def _shard_body(tmp_path: Path, *, count: int) -> dict[str, Any]:
    """A shard registration's body for ``tmp_path/a.tfrecord`` (shard 0 of ``count``)."""
    return {
        "split": "train",
        "index": 0,
        "count": count,
        "uri": (tmp_path / "a.tfrecord").as_uri(),
        "compression": "none",
        "size": 10,
        "sha256": "0" * 64,
        "crc32c": "0" * 8,
        "records_sha256": "0" * 64,
        "record_count": 1,
    }


def _index_path(shard: Path) -> Path:
    return Path(index_uri(shard.as_uri())[len("file://") :])


def test_publish_builds_the_lookup_from_the_indexes_it_holds(
    client: rk.Client,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    paths = _small_files(tmp_path / "data", 5)
    opened: list[str] = []
    real_open_read = storage.open_read

    def counting_open_read(uri: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(uri)
        return real_open_read(uri, *args, **kwargs)

    from recordkeeper import record_sets

    monkeypatch.setattr(record_sets, "open_read", counting_open_read)
    v = client.publish(rk.Dataset.from_directory(tmp_path / "data", name="small"), progress=False)
    assert not [u for u in opened if u.endswith(".rkidx")]  # no index read back
    assert rk.record_sets.is_registered(client.http, v)
    # the lookup is the one built from the stored indexes
    lookup = Path(record_sets.lookup_uri(v)[len("file://") :]).read_bytes()
    Path(record_sets.lookup_uri(v)[len("file://") :]).unlink()
    monkeypatch.setattr(record_sets, "open_read", real_open_read)
    record_sets.build_version_lookup(v, "bytes", 16)
    assert Path(record_sets.lookup_uri(v)[len("file://") :]).read_bytes() == lookup
    assert all(_index_path(p).exists() for p in paths)


def test_an_index_stored_with_the_same_bytes_is_kept_and_another_is_rewritten(
    client: rk.Client,  # noqa: F811
    tmp_path: Path,
) -> None:
    paths = _small_files(tmp_path / "data", 3)
    dataset = rk.Dataset.from_directory(tmp_path / "data", name="small")
    client.publish(dataset, progress=False)
    first = [_index_path(p) for p in paths]
    kept = {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns, p.read_bytes()) for p in first}
    good = first[1].read_bytes()
    first[1].write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # damaged: not the same bytes
    damaged = os.stat(first[1]).st_mtime_ns
    os.utime(first[1], ns=(damaged - 10**9, damaged - 10**9))  # so a rewrite shows
    client.publish(
        rk.Dataset.from_directory(tmp_path / "data", name="small"),
        progress=False,
        force_new=True,
    )
    for p in (first[0], first[2]):  # the same bytes: the file as it was (not rewritten)
        assert (os.stat(p).st_ino, os.stat(p).st_mtime_ns, p.read_bytes()) == kept[p]
    assert first[1].read_bytes() == good  # rewritten whole
    assert os.stat(first[1]).st_mtime_ns != damaged - 10**9


def test_write_objects_keeps_equal_files_only_when_asked(tmp_path: Path) -> None:
    target = tmp_path / "d" / "x.bin"
    storage.write_objects([(target.as_uri(), b"abc")])
    assert target.read_bytes() == b"abc"
    os.utime(target, ns=(10**9, 10**9))
    storage.write_objects([(target.as_uri(), b"abc")], keep_equal=True)
    assert os.stat(target).st_mtime_ns == 10**9
    storage.write_objects([(target.as_uri(), b"abc")])  # without keep_equal: written again
    assert os.stat(target).st_mtime_ns != 10**9
    storage.write_objects([(target.as_uri(), b"ab")], keep_equal=True)  # a prefix is not equal
    assert target.read_bytes() == b"ab"
    storage.write_objects([(target.as_uri(), b"abcd")], keep_equal=True)
    assert target.read_bytes() == b"abcd"


def test_a_shard_uri_is_normalised_once_when_validated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed = AllowedRoots.of([tmp_path.as_uri(), "s3://bucket/data"])
    raw = _shard_body(tmp_path, count=1)
    expected = validate_shard(raw, allowed)
    calls: list[str] = []
    real = roots_module.normalize_uri

    def counting(uri: str) -> str:
        calls.append(uri)
        return real(uri)

    monkeypatch.setattr(roots_module, "normalize_uri", counting)
    assert validate_shard(raw, allowed) == expected
    assert calls == [raw["uri"]]  # was five: check, allows, check_object_uri, two roots


@pytest.mark.skipif(
    _native.speedups is None or not hasattr(_native.speedups, "sort_ids"),
    reason="the C extension is not built",
)
def test_a_few_identities_are_sorted_without_the_radix_table() -> None:
    rng = random.Random(7)
    few = [rng.randbytes(16) for _ in range(4)]
    tracemalloc.start()
    try:
        assert sort_identities(b"".join(few), 16) == b"".join(sorted(few))
        _, peak_few = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        many = [rng.randbytes(16) for _ in range(5000)]
        joined = b"".join(many)
        tracemalloc.reset_peak()
        assert sort_identities(joined, 16) == b"".join(sorted(many))
        _, peak_many = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    table = 65536 * 8  # the radix pass's bucket counts
    assert peak_few < 64 * 1024 < table <= peak_many
    # around the switch, with shared prefixes and duplicates: the same order as sorted()
    for n in (2047, 2048, 2049):
        items = [rng.randbytes(16) for _ in range(n)]
        items += [b"\x00" * 8 + rng.randbytes(8) for _ in range(n // 8)] + items[: n // 8]
        rng.shuffle(items)
        assert sort_identities(b"".join(items), 16) == b"".join(sorted(items))


def test_a_local_file_is_stated_once_for_its_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "x"
    path.write_bytes(b"12345")
    calls: list[Any] = []
    real = os.stat

    def counting(p: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(p)
        return real(p, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting)
    got = storage.stat_file(path.as_uri(), str(path))
    assert got.size == 5 and got.identity["ino"] == real(path).st_ino
    assert len(calls) == 1
    with pytest.raises(FileNotFoundError, match="is not a file"):
        storage.stat_file(tmp_path.as_uri(), str(tmp_path))
    with pytest.raises(FileNotFoundError):
        storage.stat_file((tmp_path / "missing").as_uri(), str(tmp_path / "missing"))


def test_the_riegeli_sniff_answers_as_the_byte_loop() -> None:
    def by_bytes(head: bytes) -> bool:
        if len(head) < len(FILE_SIGNATURE):
            return False
        return sum(a == b for a, b in zip(head, FILE_SIGNATURE, strict=False)) >= 48

    rng = random.Random(11)
    for _ in range(3000):
        head = bytearray(FILE_SIGNATURE + rng.randbytes(16))
        for _ in range(rng.randrange(0, 24)):
            head[rng.randrange(len(head))] = rng.randrange(256)
        for cut in (rng.randrange(0, 80), 63, 64, 80):
            assert looks_like_riegeli(bytes(head[:cut])) == by_bytes(bytes(head[:cut]))
        other = rng.randbytes(rng.randrange(0, 80))
        assert looks_like_riegeli(other) == by_bytes(other)


def _tree(root: Path) -> Path:
    (root / "a" / "b").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "x.tfrecord").write_bytes(b"1")
    (root / "a" / "y.tfrecord").write_bytes(b"2")
    (root / "a" / "b" / ".hidden").write_bytes(b"3")
    (root / "a" / "b" / "z").write_bytes(b"4")
    os.symlink(root / "x.tfrecord", root / "link-to-file")
    os.symlink(root / "a", root / "link-to-dir")  # an entry, never walked into
    os.symlink(root / "missing", root / "a" / "broken")
    os.mkfifo(root / "a" / "fifo")
    return root


def test_local_listing_finds_what_fsspec_finds_without_an_info_per_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fsspec.implementations.local import LocalFileSystem

    from recordkeeper.backends.local import find_files

    root = _tree(tmp_path / "t")
    fs = LocalFileSystem()
    assert find_files(str(root)) == fs.find(str(root))
    assert find_files(str(root / "a")) == fs.find(str(root / "a"))
    assert find_files(str(root / "link-to-dir")) == fs.find(str(root / "link-to-dir"))
    assert find_files(str(root / "x.tfrecord")) == fs.find(str(root / "x.tfrecord"))
    assert find_files(str(root / "nothing")) == fs.find(str(root / "nothing")) == []
    before = storage.list_files(root.as_uri())
    infos: list[Any] = []
    real_info = LocalFileSystem.info

    def counting_info(self: Any, path: Any, **kwargs: Any) -> Any:
        infos.append(path)
        return real_info(self, path, **kwargs)

    monkeypatch.setattr(LocalFileSystem, "info", counting_info)
    assert storage.list_files(root.as_uri()) == before
    assert len(infos) <= 2  # the isdir check of the root; none per entry (was one each)
    assert before == sorted(
        "file://" + p
        for p in (
            f"{root}/x.tfrecord",
            f"{root}/link-to-file",
            f"{root}/link-to-dir",
            f"{root}/a/y.tfrecord",
            f"{root}/a/broken",
            f"{root}/a/fifo",
            f"{root}/a/b/.hidden",
            f"{root}/a/b/z",
        )
    )


def test_validation_reads_the_field_definitions_once_per_record_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from recordkeeper.core import shards as shards_module

    allowed = AllowedRoots.of([tmp_path.as_uri()])
    raw = _shard_body(tmp_path, count=2)
    first = validate_shard(raw, allowed)
    calls: list[Any] = []
    real = dataclasses.fields

    def counting(obj: Any) -> Any:
        calls.append(obj)
        return real(obj)

    monkeypatch.setattr(shards_module.dataclasses, "fields", counting)
    for index in range(2):
        assert validate_shard({**raw, "index": index}, allowed) == dataclasses.replace(
            first, index=index
        )
    assert calls == []  # was one call per shard
    with pytest.raises(InvalidShard, match="sha256 is missing"):
        validate_shard({k: v for k, v in raw.items() if k != "sha256"}, allowed)

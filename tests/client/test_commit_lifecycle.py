"""A writer or a derivation after its commit: a change made then is refused (it would be left
out of the committed version without a word), and ``abort()`` — a cleanup path calling it
after a successful commit — keeps the committed version's objects."""

from __future__ import annotations

import pytest

import recordkeeper as rk

pytest.importorskip("fastapi")


def _base(client: rk.Client) -> rk.DatasetVersion:
    with client.writer("coco", code=None, shard_size=1) as w:
        for i in range(4):
            w.write(f"record-{i}".encode(), split=("train", "test")[i % 2])
    return w.version


def test_abort_after_the_writer_committed_deletes_nothing(client: rk.Client) -> None:
    v = _base(client)
    with client.writer("coco", code=None, desc="second") as w:
        w.write(b"another record", split="train")
    w.abort()  # e.g. a `finally:` that aborts whatever is left
    assert client.resolve(w.version.name).verify(deep=True).ok
    assert client.resolve(v.name).verify(deep=True).ok


def test_a_committed_derivation_refuses_changes_and_abort_keeps_its_data(
    client: rk.Client,
) -> None:
    base = _base(client)
    d = client.derive(base.name, code=None, desc="more")
    d.write(b"a new record", split="train")
    d.remove_split("test")
    v = d.commit()
    for change, args in (
        (d.write, (b"late record", "train")),
        (d.remove_split, ("train",)),
        (d.rename_split, ("train", "t2")),
        (d.remove_shards, ("train:0",)),
        (d.add_files, ("train", [base.splits["train"].shards[0].uri])),
    ):
        with pytest.raises(rk.VersionImmutable, match="is committed"):
            change(*args)
    assert d.commit() == v  # committing again answers the committed version
    d.abort()
    again = client.resolve(v.name)
    assert again.verify(deep=True).ok  # the written shard is still there
    assert {name: s.shard_count for name, s in again.splits.items()} == {"train": 3}
    assert client.versions("coco", state="staged") == []


def test_an_abandoned_derivation_refuses_changes(client: rk.Client) -> None:
    base = _base(client)
    d = client.derive(base.name, code=None)
    d.remove_split("test")
    d.abort()
    with pytest.raises(rk.InvalidRequest, match="abandoned"):
        d.commit()
    with pytest.raises(rk.InvalidRequest, match="abandoned"):
        d.write(b"x", split="train")
    assert [x.name for x in client.versions("coco")] == [base.name]

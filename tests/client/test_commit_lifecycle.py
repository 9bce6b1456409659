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


@pytest.mark.parametrize("kind", ["writer", "derivation"])
def test_a_failure_after_the_service_committed_keeps_the_data(
    client: rk.Client, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sample sent after commit fails (the service went away, say): close()/commit() raise,
    and the caller's cleanup abort() must not delete what the committed version holds."""
    import recordkeeper.derive as derive_module
    import recordkeeper.writer as writer_module

    base = _base(client)

    def fails(*_args: object, **_kwargs: object) -> None:
        raise rk.ServiceUnavailable("the service went away after the commit")

    monkeypatch.setattr(writer_module, "sample_committed", fails)
    monkeypatch.setattr(derive_module.Derivation, "_send_sample", fails)
    work = (
        client.writer("coco", code=None, desc="third")
        if kind == "writer"
        else client.derive(base.name, code=None, desc="third")
    )
    work.write(b"a third record", split="train")
    with pytest.raises(rk.ServiceUnavailable):
        work.close() if isinstance(work, rk.VersionWriter) else work.commit()
    work.abort()
    committed = client.resolve("coco@latest")
    assert committed.name.endswith("_third")
    assert committed.verify(deep=True).ok


def test_a_write_after_close_or_abort_is_refused_with_a_code(client: rk.Client) -> None:
    with client.writer("coco", code=None) as w:
        w.write(b"one", split="train")
    with pytest.raises(rk.VersionImmutable):
        w.write(b"too late", split="train")
    aborted = client.writer("coco", code=None)
    aborted.write(b"one", split="train")
    aborted.abort()
    with pytest.raises(rk.InvalidRequest):
        aborted.write(b"too late", split="train")


def test_a_derived_version_still_staged_is_not_compared(client: rk.Client) -> None:
    base = _base(client)
    derivation = client.derive(base.name, code=None, desc="pending")
    derivation.write(b"one more", split="train")
    derivation.end_shard("train")
    staged = derivation.staged or derivation._writer.staged
    assert staged is not None and staged.state == "staged"
    for a, b in ((base, staged), (staged.name, base.name)):
        with pytest.raises(rk.VersionIncomplete, match="still staged"):
            client.diff(a, b)
    derivation.commit()
    assert [c.change for c in client.diff(base, derivation.version).shards] == ["added"]

"""What a derivation's commit does *not* do (issue 24 item 2: cost in proportion to the change):
it fetches none of the committed version's shard pages (they come when first read) and reads no
base shard (the sample of a kept split is the base's stored sample).  Counted, not timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from recordkeeper import storage
from recordkeeper.registry import Registry
from tests.client._records import example_bytes

pytest.importorskip("fastapi")


def _labels(sample: dict[str, Any], split: str) -> list[Any]:
    records = next(s["records"] for s in sample["splits"] if s["split"] == split)
    return [r["features"].get("label") for r in records]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """The shard pages the client asks for and the objects it opens for reading."""
    seen: dict[str, list[str]] = {"pages": [], "opened": []}
    page, open_read = Registry._shard_page, storage.open_read

    def counted_page(self: Registry, path: str, *args: Any) -> Any:
        seen["pages"].append(path)
        return page(self, path, *args)

    def counted_open(uri: str, *args: Any, **kwargs: Any) -> Any:
        seen["opened"].append(uri)
        return open_read(uri, *args, **kwargs)

    monkeypatch.setattr(Registry, "_shard_page", counted_page)
    monkeypatch.setattr(storage, "open_read", counted_open)
    return seen


def test_derive_fetches_no_page_and_reads_no_base_shard(
    client: rk.Client, counted: dict[str, list[str]]
) -> None:
    with client.writer("coco", shard_size="1kB", record_index=False) as w:
        for i in range(40):
            w.write(example_bytes({"label": [i], "blob": [bytes(100)]}), split="train")
    base = w.version
    base_uris = set(base.files("train"))
    assert len(base_uris) > 2
    counted["pages"].clear()
    counted["opened"].clear()

    with client.derive(base.name) as d:
        d.write(example_bytes({"label": [100]}), split="train")
        d.write(example_bytes({"label": [200]}), split="extra")
    v = d.version
    assert counted["pages"] == []  # the commit answered the version without its shards
    assert not set(counted["opened"]) & base_uris  # no base shard read (the sample neither)
    assert v.shard_count == base.shard_count + 2 and v.content_digest is not None
    assert isinstance(v.splits, rk.values.FetchedSplits) and not v.splits.fetched

    # first read: the pages, once; the same shards as a resolve answers
    assert v.files("train")[: len(base_uris)] == base.files("train")
    fetched = len(counted["pages"])
    assert fetched >= 1 and v.splits.fetched
    assert v.shards == client.resolve(v.name).shards
    assert sorted(v.splits) == ["extra", "train"] and len(counted["pages"]) == fetched

    # the kept split's sample is the base's; the added split's, the record written
    sample = client.sample(v.name)
    assert sample is not None
    assert _labels(sample, "train") == _labels(client.sample(base.name) or {}, "train")
    assert _labels(sample, "train") == [[0], [1], [2]] and _labels(sample, "extra") == [[200]]


def test_a_kept_split_without_a_base_sample_is_not_sampled(
    client: rk.Client, counted: dict[str, list[str]], tmp_path: Path
) -> None:
    with client.writer("coco", sample_records=0, record_index=False) as w:
        for i in range(5):
            w.write(example_bytes({"label": [i]}), split="train")
    assert client.sample(w.version.name) is None
    counted["opened"].clear()
    with client.derive(w.version.name) as d:
        d.write(example_bytes({"label": [7]}), split="train")
    assert counted["opened"] == []
    assert client.sample(d.version.name) is None  # the base has none, and none is read

    # a split replaced by an added file: its first records are read from that file
    with client.writer("other", record_index=False) as other:
        other.write(example_bytes({"label": [42]}), split="train")
    added = other.version.files("train")[0]
    counted["opened"].clear()
    with client.derive(w.version.name) as d2:
        d2.replace_split("train", [added])
    assert added in counted["opened"]
    sample = client.sample(d2.version.name)
    assert sample is not None and _labels(sample, "train") == [[42]]

"""Sampled records found by identity and decoded (``recordkeeper.record_finder``): only the
shards holding them are read, a shard only until its records were seen, and a record that
cannot be read gets a reason instead of failing the whole answer."""

from __future__ import annotations

import dataclasses
import os

import fsspec
import pytest

import recordkeeper as rk
from recordkeeper import tfrecord
from recordkeeper.core.record_identity import record_hash
from recordkeeper.record_finder import find_records
from recordkeeper.record_sets import index_uri, lookup_uri
from tests.client._records import example_bytes

pytest.importorskip("fastapi")


class _Counter:
    def __init__(self) -> None:
        self.bytes = 0

    def advance(self, nbytes: int) -> None:
        self.bytes += nbytes


def _write(client: rk.Client, splits: dict[str, list[bytes]], **kw: object) -> rk.DatasetVersion:
    with client.writer("finds", **kw) as w:  # type: ignore[arg-type]
        for split, records in splits.items():
            for record in records:
                w.write(record, split=split)
    return client.resolve(w.version.name)


def test_a_record_is_found_decoded_and_its_shard_read_only_until_then(
    client: rk.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tfrecord, "_READ_SIZE", 1 << 16)  # the shard takes several reads
    first = example_bytes({"label": [1], "caption": [b"first"]})
    filler = [os.urandom(1024) for _ in range(400)]
    version = _write(client, {"train": [first, *filler]})
    (shard,) = version.splits["train"].shards
    counter = _Counter()
    h = record_hash(first).hex()
    rows = find_records(version, "train", [h], progress=counter)
    assert rows[h] == {
        "record": h,
        "shard": shard.uri,
        "position": 0,
        "size": len(first),
        "kind": "example",
        "features": {"caption": ["first"], "label": [1]},
    }
    assert 0 < counter.bytes < shard.size  # stopped once the record was seen
    last = record_hash(filler[-1]).hex()
    row = find_records(version, "train", [last])[last]
    assert row["kind"] == "bytes" and row["position"] == 400
    assert row["features"].startswith("<1024 bytes: ")  # a hex prefix, as head shows it


def test_only_shards_holding_a_sampled_record_are_read(client: rk.Client) -> None:
    records = [example_bytes({"label": [i], "text": [b"x" * 200]}) for i in range(60)]
    version = _write(client, {"train": records}, shard_size="2KB")
    shards = version.splits["train"].shards
    assert len(shards) > 4
    wanted = [record_hash(records[3]).hex(), record_hash(records[57]).hex()]
    for drop_lookup in (False, True):  # through the version's lookup, then shard by shard
        if drop_lookup:
            os.remove(fsspec.core.url_to_fs(lookup_uri(version))[1])
        counter = _Counter()
        rows = find_records(version, "train", wanted, progress=counter)
        assert [rows[h]["features"]["label"] for h in wanted] == [[3], [57]]
        holding = {rows[h]["shard"] for h in wanted}
        assert len(holding) == 2
        assert counter.bytes <= sum(s.size for s in shards if s.uri in holding)


def test_what_cannot_be_read_says_why(client: rk.Client) -> None:
    records = [example_bytes({"label": [i]}) for i in range(40)]
    version = _write(client, {"train": records, "test": records[:3]}, shard_size="300B")
    absent = "ab" * 16
    h0, h39 = record_hash(records[0]).hex(), record_hash(records[39]).hex()
    rows = find_records(version, "train", [absent, h0])
    assert rows[absent] == {"record": absent, "error": "no shard index of the split holds it"}
    assert rows[h0]["features"] == {"label": [0]}
    # the shard holding a record is gone: that record says so, the others are still found
    holding = rows[h0]["shard"]
    os.remove(fsspec.core.url_to_fs(holding)[1])
    rows = find_records(version, "train", [h0, h39])
    assert "cannot be read" in rows[h0]["error"] and holding in rows[h0]["error"]
    assert rows[h39]["features"] == {"label": [39]}
    # indexes gone (and no lookup): nothing located, no shard read
    os.remove(fsspec.core.url_to_fs(lookup_uri(version))[1])
    for shard in version.splits["train"].shards:
        fs, path = fsspec.core.url_to_fs(index_uri(shard.uri))
        if fs.exists(path):
            fs.rm(path)
    counter = _Counter()
    rows = find_records(version, "train", [h39], progress=counter)
    assert rows[h39]["error"].startswith("the index of ") and counter.bytes == 0
    # a split the version does not have
    assert "no split 'nope'" in find_records(version, "nope", [h39])[h39]["error"]


def test_a_version_whose_data_was_deleted_answers_a_reason_per_sample(client: rk.Client) -> None:
    records = [example_bytes({"label": [i]}) for i in range(3)]
    version = _write(client, {"train": records})
    # as the service answers a version after retention deleted its data
    gone = dataclasses.replace(
        version, data_state="deleted", data_deleted_reason="retention", data_deleted_at=None
    )
    ids = [record_hash(r).hex() for r in records[:2]]
    rows = find_records(gone, "train", ids)
    assert [rows[h]["record"] for h in ids] == ids
    assert all("cannot be read" in rows[h]["error"] for h in ids)

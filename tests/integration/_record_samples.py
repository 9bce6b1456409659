"""Decoded samples of record diffs and leakage, and ``@records:`` references, over a live
service: one scenario, run per storage backend."""

from __future__ import annotations

import json
from typing import Any

import fsspec
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from recordkeeper.core.record_identity import record_hash
from recordkeeper.core.record_sample import record_row
from recordkeeper.record_sets import lookup_uri
from tests.client._records import example_bytes, sample_examples
from tests.integration._record_identity import _Counter, _options
from tests.integration._record_identity import _write as write_version
from tests.integration.conftest import LiveService


def _write(
    client: rk.Client, root: str, opts: dict[str, Any], splits: dict[str, list[bytes]], **kw: Any
) -> rk.DatasetVersion:
    return write_version(client, root, opts, splits, "samp", **kw)


def _features(record: bytes) -> Any:
    return record_row(0, record)["features"]


def scenario(service: LiveService, root: str, opts: dict[str, Any]) -> None:
    client = service.client(storage_options=opts)
    records = sample_examples(200)
    train, test = records[:180], records[180:]
    v1 = _write(client, root, opts, {"train": train, "test": test}, shard_size="4KB")
    assert v1.splits["train"].shard_count > 3

    # One record changed: the diff shows the added and the removed Example decoded.
    changed = example_bytes({"label": [7], "image": [b"changed"], "score": [0.5]})
    v2 = _write(
        client, root, opts, {"train": [*train[:90], changed, *train[91:]], "test": test},
        shard_size="4KB",
    )  # fmt: skip
    counter = _Counter()
    d = client.diff(v1.name, v2.name, records=True, progress=counter)
    t = d.splits["train"]
    assert (t.added, t.removed) == (1, 1)
    (added,) = t.decoded_added
    (removed,) = t.decoded_removed
    assert added["record"] == record_hash(changed).hex() == t.sample_added[0]
    assert added["kind"] == "example" and added["features"]["image"] == ["changed"]
    assert added["features"]["label"] == [7]
    assert added["shard"] in {s.uri for s in v2.splits["train"].shards}
    assert removed["record"] == record_hash(train[90]).hex()
    assert removed["features"] == _features(train[90])
    assert removed["features"]["image"] == ["img-90"]
    assert removed["shard"] in {s.uri for s in v1.splits["train"].shards}
    # bounded: only the two shards holding a sampled record were read (and not all of them)
    held = {s.uri: s.size for s in [*v1.shards, *v2.shards]}
    assert 0 < counter.bytes <= held[added["shard"]] + held[removed["shard"]]
    assert d.to_dict()["splits"][1]["decoded_added"] == [added]
    assert not d.splits["test"].decoded_added and not d.splits["test"].decoded_removed
    plain = client.diff(v1.name, v2.name, records=True, decode=False)
    assert plain.splits["train"].sample_added == t.sample_added
    assert plain.splits["train"].decoded_added == []

    # Leakage: a training record copied into the test split, decoded from the test split.
    v3 = _write(client, root, opts, {"train": train, "test": [*test, train[5]]}, shard_size="4KB")
    (pair,) = client.check_leakage(v3.name)
    assert pair.leaked == 1 and pair.sample == [record_hash(train[5]).hex()]
    (leak,) = pair.decoded
    assert leak["features"] == _features(train[5])
    assert leak["shard"] in {s.uri for s in v3.splits["test"].shards}
    assert pair.to_dict()["decoded"] == [leak]

    # The CLI: decoded under each split, identities only with --no-decode, JSON carries them.
    runner = CliRunner()
    base = ["--url", service.url]
    o = _options(opts)
    r = runner.invoke(app, [*base, "diff", v1.name, v2.name, "--records", *o])
    assert r.exit_code == 0, r.output
    assert f"+ {added['record']}" in r.stdout and 'image: ["changed"]' in r.stdout
    assert f"- {removed['record']}" in r.stdout and 'image: ["img-90"]' in r.stdout
    r = runner.invoke(app, [*base, "diff", v1.name, v2.name, "--records", "--no-decode", *o])
    assert r.exit_code == 0, r.output
    assert f"+ {added['record']}" in r.stdout and "image:" not in r.stdout
    r = runner.invoke(app, [*base, "diff", v1.name, v2.name, "--records", "--json", *o])
    train_json = {s["split"]: s for s in json.loads(r.stdout)["splits"]}["train"]
    assert train_json["decoded_added"] == [added]
    r = runner.invoke(app, [*base, "check-leakage", v3.name, *o])
    assert r.exit_code == 4 and 'image: ["img-5"]' in r.stdout, r.output
    r = runner.invoke(app, [*base, "check-leakage", v3.name, "--json", *o])
    assert json.loads(r.stdout)["pairs"][0]["decoded"] == [leak]

    # `DATASET@records:<digest>`: the newest committed version with exactly these records,
    # whatever its sharding; wherever a reference is taken.
    digest = next(e["records_digest"] for e in client.record_sets(v1.name) if e["kind"] == "bytes")
    ref = f"samp@records:{digest}"
    assert client.resolve(ref).name == v1.name
    assert client.resolve(f"samp@records:{digest[:19]}").name == v1.name  # 12 hex digits
    v1b = _write(client, root, opts, {"train": train, "test": test})  # same records, resharded
    assert v1b.content_digest != v1.content_digest
    assert client.resolve(ref).name == v1b.name
    assert client.diff(ref, v2.name, records=True).splits["train"].added == 1
    assert client.diff(f"samp@v{v1.number}", ref, records=True).identical
    r = runner.invoke(app, [*base, "show", ref, "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["name"] == v1b.name, r.output
    r = runner.invoke(app, [*base, "show", "samp@records:sha256:" + "0" * 64, "--json"])
    assert r.exit_code != 0 and "version_not_found" in r.output, r.output
    assert "Traceback" not in r.output

    # Without the versions' record lookups each shard index of the split is searched instead.
    for v in (v1, v2):
        fs, path = fsspec.core.url_to_fs(lookup_uri(v), **opts)
        fs.rm(path)
    counter = _Counter()
    again = client.diff(v1.name, v2.name, records=True, progress=counter).splits["train"]
    assert (again.decoded_added, again.decoded_removed) == ([added], [removed])
    assert 0 < counter.bytes <= held[added["shard"]] + held[removed["shard"]]

    # A sample whose shard is gone says so; the rest of the diff is still answered.
    fs, path = fsspec.core.url_to_fs(removed["shard"], **opts)
    fs.rm(path)
    gone = client.diff(v1.name, v2.name, records=True).splits["train"]
    assert "error" in gone.decoded_removed[0] and "features" not in gone.decoded_removed[0]
    assert gone.decoded_removed[0]["record"] == removed["record"]
    assert gone.decoded_added == [added]
    r = runner.invoke(app, [*base, "diff", v1.name, v2.name, "--records", *o])
    assert r.exit_code == 0, r.output
    assert f"- {removed['record']}  (not read: " in r.stdout and 'image: ["changed"]' in r.stdout

    # Identity of kind example (its index replaces the bytes one beside each shard): the same
    # records found by their canonical Example identity.
    for v in (v2, v3):
        client.index(v.name, kind="example")
    e = client.diff(v3.name, v2.name, records=True, kind="example").splits["train"]
    assert e.decoded_added[0]["features"] == added["features"]
    assert e.decoded_added[0]["record"] == record_hash(changed, "example").hex()
    assert e.decoded_removed[0]["features"] == removed["features"]

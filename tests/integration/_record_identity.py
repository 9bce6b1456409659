"""Record identity end to end over a live service: one scenario, run per storage backend."""

from __future__ import annotations

import json
import random
from typing import Any

import fsspec
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from recordkeeper.core.record_identity import record_hash
from recordkeeper.record_sets import index_uri
from tests.client._records import example_bytes, sample_examples
from tests.integration.conftest import LiveService


class _Counter:
    def __init__(self) -> None:
        self.bytes = 0

    def advance(self, nbytes: int) -> None:
        self.bytes += nbytes


def _write(
    client: rk.Client,
    root: str,
    opts: dict[str, Any],
    splits: dict[str, list[bytes]],
    dataset: str = "ident",
    **kw: Any,
) -> rk.DatasetVersion:
    with client.writer(dataset, root=f"{root}/datasets", storage_options=opts, **kw) as w:
        for split, records in splits.items():
            for record in records:
                w.write(record, split=split)
    return w.version.with_storage_options(opts)


def scenario(service: LiveService, root: str, opts: dict[str, Any]) -> None:
    client = service.client(storage_options=opts)
    records = sample_examples(400)
    train, test = records[:360], records[360:]
    v1 = _write(client, root, opts, {"train": train, "test": test}, shard_size="8KB")
    assert v1.splits["train"].shard_count > 2

    # Resharded (one shard), reshuffled and recompressed: same records, other content.
    rng = random.Random(7)
    train2, test2 = train[:], test[:]
    rng.shuffle(train2)
    rng.shuffle(test2)
    v2 = _write(
        client,
        root,
        opts,
        {"train": train2, "test": test2},
        compression="gzip",
        record_index=False,
    )
    assert v2.splits["train"].shard_count == 1
    assert v1.content_digest != v2.content_digest
    assert client.record_sets(v2.name) == []

    # The writer indexed v1 as it wrote it and registered its record identity: the indexes
    # are byte for byte what `recordkeeper index` builds from the stored shards afterwards.
    inline = client.record_sets(v1.name)
    assert len(inline) == 1
    written = {}
    for shard in v1.shards:
        with fsspec.open(index_uri(shard.uri), "rb", **opts) as fh:
            written[shard.uri] = fh.read()
        fsspec.open(index_uri(shard.uri), **opts).fs.rm(index_uri(shard.uri))
    counter = _Counter()
    r1 = client.index(v1.name, progress=counter)
    assert counter.bytes == v1.size  # every shard read once
    assert r1["records_digest"] == inline[0]["records_digest"]
    for shard in v1.shards:
        with fsspec.open(index_uri(shard.uri), "rb", **opts) as fh:
            assert fh.read() == written[shard.uri]
    # Deep verify of v2 (written without identity) indexes it in the read that checks it.
    report = v2.verify(deep=True, record_index=True)
    assert report.ok
    assert report.record_index == {"written": len(v2.shards), "registered": 1}
    assert v2.verify(deep=True, record_index=True).record_index["matched"] == len(v2.shards)
    again = _Counter()
    r2 = client.index(v2.name, progress=again)
    assert again.bytes == 0  # the indexes deep verify stored are the ones index builds
    assert client.record_sets(v2.name)[0]["records_digest"] == r2["records_digest"]

    # Publish v1's shard files in place as a new version: indexed by publish's scan.
    prefix = v1.shards[0].uri.rsplit("/", 1)[0]
    published = client.publish(
        rk.Dataset.from_directory(prefix, name="ident-pub", storage_options=opts),
        progress=False,
        storage_options=opts,
    )
    (pub,) = client.record_sets(published.name)
    assert pub["records_digest"] == inline[0]["records_digest"]
    assert r1["records_digest"] == r2["records_digest"]
    assert {s["split"]: s["records"] for s in r1["splits"]} == {"train": 360, "test": 40}
    found = {r["version"] for r in client.versions_with_records(r1["records_digest"])}
    assert found == {v1.name, v2.name, published.name}

    # Resumable: a second run reads no shard (every index is there and matches).
    again = _Counter()
    assert client.index(v1.name, progress=again)["records_digest"] == r1["records_digest"]
    assert again.bytes == 0
    assert client.record_sets(v1.name)[0]["records_digest"] == r1["records_digest"]

    same = client.diff(v1.name, v2.name, records=True)
    assert same.identical and same.splits["train"].common == 360
    assert not client.diff(v1.name, v2.name).same_content  # the shard diff sees a change

    # One record changed.
    changed = example_bytes({"label": [3], "image": [b"changed"], "score": [0.5]})
    train3 = [*train[:100], changed, *train[101:]]
    v3 = _write(client, root, opts, {"train": train3, "test": test}, shard_size="8KB")
    client.index(v3.name)
    d = client.diff(v1.name, v3.name, records=True)
    t = d.splits["train"]
    assert (t.added, t.removed, t.common) == (1, 1, 359)
    assert t.sample_added == [record_hash(changed).hex()]
    assert t.sample_removed == [record_hash(train[100]).hex()]
    assert not d.splits["test"].changed and (d.new, d.gone) == (1, 1)
    # ... and stored its summary in the registry (the UI's compare page shows it)
    (stored,) = client.record_diffs(v1.name, v3.name)
    train_stored = next(s for s in stored["splits"] if s["split"] == "train")
    assert (train_stored["added"], train_stored["sample_added"]) == (1, t.sample_added)

    # An injected overlap: 7 training records copied into the test split, one of them twice.
    leaked = [train[5], train[50], train[150], train[200], train[250], train[300], train[359]]
    test4 = test + leaked + [train[5]]
    v4 = _write(client, root, opts, {"train": train, "test": test4}, shard_size="8KB")
    client.index(v4.name)
    pairs = {(p.split, p.other_ref, p.other_split): p for p in client.check_leakage(v4.name)}
    p = pairs[("test", v4.name, "train")]
    assert (p.records, p.leaked, p.distinct) == (48, 8, 7)
    assert abs(p.rate - 8 / 48) < 1e-12
    assert not client.check_leakage(v1.name)[0].leaked
    # Across versions: v1's test split against v4's training split (no overlap), and v4's
    # test split against v1's training split (the same 7 records).
    cross = client.check_leakage(v4.name, [v1.name])
    p = next(p for p in cross if p.other_ref == v1.name)
    assert (p.leaked, p.distinct) == (8, 7)

    # The CLI: exit code for CI, JSON, JSON lines.
    runner = CliRunner()
    base = ["--url", service.url]
    o = _options(opts)
    r = runner.invoke(app, [*base, "check-leakage", v4.name, "--json", *o])
    assert r.exit_code == 4, r.output
    assert json.loads(r.stdout)["ok"] is False
    r = runner.invoke(app, [*base, "check-leakage", v1.name, *o])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, [*base, "check-leakage", v4.name, "--max-rate", "0.2", *o])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, [*base, "diff", v1.name, v3.name, "--records", "--json", *o])
    assert r.exit_code == 0, r.output
    splits = {s["split"]: s for s in json.loads(r.stdout)["splits"]}
    assert (splits["train"]["added"], splits["train"]["removed"]) == (1, 1)
    r = runner.invoke(app, [*base, "verify", v2.name, "--deep", "--record-index", "--json", *o])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["record_index"] == {"matched": len(v2.shards), "registered": 1}
    r = runner.invoke(app, [*base, "verify", v2.name, "--record-index", *o])
    assert r.exit_code == 1 and "--deep" in r.output, r.output
    shard_dir = v3.shards[0].uri.rsplit("/", 1)[0]
    for flag, indexed in (("--no-record-index", False), ("--record-index", True)):
        args = ["publish", shard_dir, "--name", f"cli{int(indexed)}", flag, "--no-code"]
        r = runner.invoke(app, [*base, *args, "--json", *o])
        assert r.exit_code == 0, r.output
        assert bool(client.record_sets(json.loads(r.stdout)["name"])) is indexed
    r = runner.invoke(app, [*base, "index", v1.name, "--json", *o])
    assert r.exit_code == 0 and json.loads(r.stdout)["records_digest"] == r1["records_digest"]

    # A version that was never indexed is refused with a stable code.
    v5 = _write(client, root, opts, {"train": train[:10]}, record_index=False)
    r = runner.invoke(app, [*base, "diff", v1.name, v5.name, "--records", "--json", *o])
    assert r.exit_code == 1 and '"code": "invalid_request"' in r.output, r.output
    assert index_uri(v1.shards[0].uri).endswith(".rkidx")


def _options(opts: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for key, value in opts.items():
        if isinstance(value, dict):
            for sub, subvalue in value.items():
                args += ["-o", f"{key}.{sub}={subvalue}"]
        else:
            args += ["-o", f"{key}={value}"]
    return args

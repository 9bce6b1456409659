"""A dataset's leakage policy end to end: the real client over a live service, real files.

A version whose test split holds 8 copies of 7 training records (48 test records) is
refused under ``refuse`` with those counts, committed with a warning under ``warn``; a
version written without record identity gets its own code; publish in place checks the same
way from the indexes its scan computes; the results are served by ``GET
/versions/{ref}/leakage``; ``check-leakage`` stores its result; the CLI sets the policy.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from recordkeeper.storage import list_files
from tests.client._records import sample_examples
from tests.integration.conftest import LiveService

RECORDS = sample_examples(400)
TRAIN, TEST = RECORDS[:360], RECORDS[360:]
LEAKED = [TRAIN[i] for i in (5, 50, 150, 200, 250, 300, 359)]
LEAKY_TEST = TEST + LEAKED + [TRAIN[5]]  # 48 records, 8 of them training records (7 distinct)


def _write(client: rk.Client, dataset: str, test: list[bytes], **kw: Any) -> rk.DatasetVersion:
    with client.writer(dataset, shard_size="8KB", **kw) as w:
        for record in TRAIN:
            w.write(record, split="train")
        for record in test:
            w.write(record, split="test")
    return w.version


def _overlap(pairs: list[dict[str, Any]]) -> tuple[str, str, int, int, int]:
    (pair,) = pairs
    return (pair["split"], pair["other_split"], pair["records"], pair["leaked"], pair["distinct"])


def test_writer_under_refuse_and_warn(live_service: LiveService, tmp_path: Path) -> None:
    client = live_service.client()
    assert client.leakage_policy("leaky")["mode"] == "off"
    client.set_leakage_policy("leaky", "refuse")
    assert client.leakage_policy("leaky")["mode"] == "refuse"

    with pytest.raises(rk.SplitOverlap) as refused:
        _write(client, "leaky", LEAKY_TEST)
    assert _overlap(refused.value.extra["pairs"]) == ("test", "train", 48, 8, 7)
    assert refused.value.extra["pairs"][0]["rate"] == pytest.approx(8 / 48)
    assert "test in train: 8/48 records" in refused.value.detail
    # nothing was committed; the writer abandoned what it staged and deleted its shards
    assert client.versions("leaky", state="committed") == []
    staged = client.versions("leaky", state="abandoned")
    assert len(staged) == 1
    assert [f for f in list_files(staged[0].storage_prefix) if "tfrecord" in f] == []

    clean = _write(client, "leaky", TEST)
    (pair,) = client.version_leakage(clean.name)
    assert (pair["split"], pair["other_ref"], pair["other_split"]) == ("test", clean.name, "train")
    assert (pair["records"], pair["leaked"], pair["source"]) == (40, 0, "commit")

    # no record identity: nothing to check from, refused with its own code
    with pytest.raises(rk.LeakageCheckMissing, match="record_index"):
        _write(client, "leaky", TEST[:20], record_index=False)

    client.set_leakage_policy("leaky", "warn")
    with pytest.warns(rk.LeakageWarning, match=r"test in train: 8/48 records \(16\.67%\)"):
        leaky = _write(client, "leaky", LEAKY_TEST)
    assert leaky.state == "committed"
    stored = client.version_leakage(leaky.name)
    assert _overlap(stored) == ("test", "train", 48, 8, 7)
    events = client.http.api("GET", "/events", params={"action": "version.leakage_warning"})
    assert [e["version"] for e in events["data"]] == [leaky.name]
    with pytest.warns(rk.LeakageWarning, match="without a leakage check"):
        _write(client, "leaky", TEST[:20], record_index=False)

    # a tolerated rate: 8/48 is under 20 %
    client.set_leakage_policy("leaky", "refuse", max_rate=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", rk.LeakageWarning)
        tolerated = _write(client, "leaky", LEAKY_TEST[:-1])  # 7/47
    assert client.version_leakage(tolerated.name)[0]["leaked"] == 7


def test_publish_in_place_under_refuse_and_warn(live_service: LiveService, data_dir: Path) -> None:
    client = live_service.client()
    source = _write(client, "source", LEAKY_TEST, root=data_dir.as_uri())  # policy off
    prefix = source.shards[0].uri.rsplit("/", 1)[0]
    before = sorted(list_files(prefix))

    def publish() -> rk.DatasetVersion:
        dataset = rk.Dataset.from_directory(prefix, name="pub")
        return client.publish(dataset, progress=False)

    client.set_leakage_policy("pub", "refuse")
    with pytest.raises(rk.SplitOverlap) as refused:
        publish()
    assert _overlap(refused.value.extra["pairs"]) == ("test", "train", 48, 8, 7)
    assert client.versions("pub", state="committed") == []
    assert sorted(list_files(prefix)) == before  # in place: the files are the user's

    client.set_leakage_policy("pub", "warn")
    with pytest.warns(rk.LeakageWarning, match="8/48"):
        published = publish()
    assert _overlap(client.version_leakage(published.name)) == ("test", "train", 48, 8, 7)

    # the CLI: the policy, publish's warning, check-leakage's stored result
    runner = CliRunner()
    base = ["--url", live_service.url]
    r = runner.invoke(app, [*base, "leakage-policy", "pub", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["mode"] == "warn", r.output
    r = runner.invoke(app, [*base, "leakage-policy", "cli", "--set", "refuse", "--max-rate", "0.5"])
    assert r.exit_code == 0 and "refuse, max rate 50.00%" in r.stdout, r.output
    r = runner.invoke(app, [*base, "leakage-policy", "cli"])
    assert "leakage policy refuse" in r.stdout, r.output
    r = runner.invoke(app, [*base, "leakage-policy", "cli", "--set", "block"])
    assert r.exit_code != 0
    args = ["publish", prefix, "--name", "pub", "--force-new", "--no-code", "--json"]
    r = runner.invoke(app, [*base, *args])
    assert r.exit_code == 0, r.output
    assert "8/48" in json.loads(r.stdout)["leakage_warnings"][0]
    assert "warning:" in r.stderr and "8/48" in r.stderr
    client.set_leakage_policy("pub", "refuse")
    r = runner.invoke(app, [*base, *args])
    assert r.exit_code != 0 and "split_overlap" in r.output, r.output

    r = runner.invoke(app, [*base, "check-leakage", source.name, "--against", published.name])
    assert r.exit_code == 4, r.output
    stored = {p["other_ref"]: p for p in client.version_leakage(source.name)}
    assert stored[published.name]["source"] == "check"
    assert (stored[published.name]["leaked"], stored[source.name]["leaked"]) == (8, 8)


def test_distributed_write_checks_from_the_stored_indexes(live_service: LiveService) -> None:
    from recordkeeper import distributed

    client = live_service.client()
    client.set_leakage_policy("dist", "refuse")

    plan = distributed.plan_write(client, "dist", shard_size="4KB")
    written = [
        *plan.write_shard("train", 0, TRAIN[:200]),
        *plan.write_shard("train", 1, TRAIN[200:]),
        *plan.write_shard("test", 0, LEAKY_TEST),
    ]
    with pytest.raises(rk.SplitOverlap) as refused:
        plan.commit(client, written)
    assert _overlap(refused.value.extra["pairs"]) == ("test", "train", 48, 8, 7)
    assert client.versions("dist", state="staged")[0].name == plan.staged  # still staged
    client.set_leakage_policy("dist", "warn")
    with pytest.warns(rk.LeakageWarning, match="8/48"):
        version = plan.commit(client, written)
    assert _overlap(client.version_leakage(version.name)) == ("test", "train", 48, 8, 7)


def test_derive_checks_the_derived_splits(live_service: LiveService) -> None:
    client = live_service.client()
    base = _write(client, "derived", TEST)  # policy off: train and a clean test split
    client.set_leakage_policy("derived", "refuse")
    # a new split `holdout` of training records (an evaluation split: not train…)
    with pytest.raises(rk.SplitOverlap) as refused, client.derive(base.name) as d:
        for record in LEAKED:
            d.write(record, split="holdout")
    pairs = {(p["split"], p["other_split"]): p for p in refused.value.extra["pairs"]}
    assert set(pairs) == {("holdout", "train")}
    assert (pairs["holdout", "train"]["records"], pairs["holdout", "train"]["leaked"]) == (7, 7)
    # the base's test split renamed `valid` and records added to it that are clean: committed
    with client.derive(base.name) as d:
        d.rename_split("test", "valid")
        d.write(sample_examples(1, start=1000)[0], split="valid")
    stored = {(p["split"], p["other_split"]): p for p in client.version_leakage(d.version.name)}
    assert stored["valid", "train"]["records"] == 41 and stored["valid", "train"]["leaked"] == 0

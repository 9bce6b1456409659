"""Record diffs and leakage checks given arguments or versions at their limits, over a live
service: a bad ``sample`` is a plain ``InvalidInput`` (not the C merge's ``ValueError`` or an
``OverflowError``, and the pure-Python merge refuses it alike), and a diff of more splits than
the registry keeps is printed, with one ``warning:`` line saying why it was not stored; a
version whose record identity registration is refused after its commit is still returned."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from recordkeeper.core.record_diff import MAX_SAMPLE, diff_records, leakage
from recordkeeper.core.record_diff_summary import MAX_DIFF_SPLITS
from tests.client._records import sample_examples
from tests.integration.conftest import LiveService


def _write(client: rk.Client, root: str, splits: dict[str, list[bytes]]) -> rk.DatasetVersion:
    with client.writer("lim", root=f"{root}/datasets") as w:
        for split, records in splits.items():
            for record in records:
                w.write(record, split=split)
    return w.version


@pytest.mark.parametrize("sample", [-1, MAX_SAMPLE + 1, 2**31, 2**63, True, 1.5, "5", None])
def test_a_bad_sample_is_invalid_input(live_service: LiveService, sample: Any) -> None:
    client = live_service.client()
    records = sample_examples(12)
    root = live_service.storage_root
    v1 = _write(client, root, {"train": records[:10], "test": records[10:]})
    v2 = _write(client, root, {"train": records[1:10], "test": records[10:]})
    with pytest.raises(rk.InvalidInput, match=f"sample must be an integer from 0 to {MAX_SAMPLE}"):
        client.diff(v1.name, v2.name, records=True, sample=sample)
    with pytest.raises(rk.InvalidInput, match="sample must be an integer"):
        client.check_leakage(v1.name, sample=sample)
    # the pure-Python merges (no compiler, RECORDKEEPER_PURE_PYTHON=1) take the same rule
    with pytest.raises(rk.InvalidInput, match="sample must be an integer"):
        diff_records([], [], 16, sample=sample)
    with pytest.raises(rk.InvalidInput, match="sample must be an integer"):
        leakage([], [], 16, sample=sample)
    assert client.record_diffs(v1.name, v2.name) == []  # nothing computed, nothing stored
    # the bounds themselves are fine
    assert client.diff(v1.name, v2.name, records=True, sample=0).splits["train"].removed == 1
    d = client.diff(v1.name, v2.name, records=True, sample=MAX_SAMPLE, decode=False)
    assert d.splits["train"].sample_removed


def test_a_diff_of_more_splits_than_stored_prints_and_warns_once(
    live_service: LiveService,
) -> None:
    client = live_service.client()
    n = MAX_DIFF_SPLITS  # + train: one split more than a stored diff keeps
    records = sample_examples(n + 2)
    splits = {f"s{i:03d}": [records[i]] for i in range(n)}
    v1 = _write(client, live_service.storage_root, {**splits, "train": [records[n]]})
    v2 = _write(client, live_service.storage_root, {**splits, "train": [records[n + 1]]})
    with pytest.warns(rk.NotStoredWarning, match=rf"at most {n} splits \(this one has {n + 1}\)"):
        d = client.diff(v1.name, v2.name, records=True, decode=False)
    assert (d.splits["train"].added, d.splits["train"].removed) == (1, 1)
    assert client.record_diffs(v1.name, v2.name) == []

    with warnings.catch_warnings():
        warnings.simplefilter("always")  # shown each time, as in a fresh process
        refs = [f"lim@v{v1.number}", "lim@latest"]
        r = CliRunner().invoke(
            app, ["--url", live_service.url, "diff", *refs, "--records", "--no-decode"]
        )
    assert r.exit_code == 0, r.output
    # the versions compared are named, not the references given
    assert r.stdout.startswith(f"{v1.name} → {v2.name} records\n"), r.stdout
    assert f"new to {v2.name}: 1; gone from {v1.name}: 1" in r.stdout
    assert "train        1 → 1: +1 -1 =0" in r.stdout
    lines = [line for line in r.stderr.splitlines() if "not stored" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: the record diff "), r.stderr
    assert f"at most {n} splits (this one has {n + 1})" in lines[0]
    assert "RuntimeWarning" not in r.stderr and "NotStoredWarning" not in r.stderr


def test_a_committed_version_whose_record_identity_is_refused_is_still_returned(
    live_service: LiveService,
) -> None:
    # More splits than a record identity registration takes: the writer indexed every shard
    # and committed, then the registration was refused.  The with-block raised that refusal,
    # the version committed but unusable through the writer (w.version: RuntimeError).
    client = live_service.client()
    records = sample_examples(1001)
    w = client.writer("wide", root=f"{live_service.storage_root}/datasets")
    with pytest.warns(rk.NotStoredWarning, match="record identity was not registered"), w:
        for i, record in enumerate(records):
            w.write(record, split=f"s{i:04d}")
    assert w.version.state == "committed" and len(w.version.splits) == 1001
    assert w.record_set is None and client.record_sets(w.version.name) == []
    assert client.record_sample(w.version.name)  # what follows the registration still ran

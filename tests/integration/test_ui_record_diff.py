"""Record diffs stored by the client and shown on the compare page (real shards on local disk,
the service under uvicorn, Debian Chromium via Playwright).

The client computes each record diff from the versions' per-shard record indexes (the service
never reads storage) and stores its summary; a read token computes it all the same and stores
nothing.  The compare page shows, per split, whether both versions hold the same records (their
split set digests, registered when they were written) — "same records, resharded" when the
shards differ — and the stored diff's counts and sample identities.
"""

from __future__ import annotations

import json
import random
import warnings
from dataclasses import dataclass
from typing import Any

import httpx
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from recordkeeper.core.record_identity import record_hash
from tests.client._records import example_bytes, sample_examples
from tests.integration._browser import browser, chromium_path, expect, page, shot
from tests.integration.conftest import LiveService

__all__ = ["browser", "chromium_path", "page"]  # fixtures used by the tests below

CHANGED = example_bytes({"label": [3], "image": [b"changed"], "score": [0.5]})


@dataclass
class Versions:
    v1: str  # train 50, test 10, several shards per split
    v2: str  # the same records reshuffled, one shard per split
    v3: str  # train[3] changed, train[7] moved to test, test[0] held twice
    v4: str  # v1's records, written without record identity
    records: list[bytes]


def _write(client: rk.Client, splits: dict[str, list[bytes]], **kw: Any) -> str:
    with client.writer("coco", **kw) as w:
        for split, records in splits.items():
            for record in records:
                w.write(record, split=split)
    return w.version.name


def _versions(service: LiveService) -> Versions:
    records = sample_examples(60)
    train, test = records[:50], records[50:]
    shuffled = train[:]
    random.Random(5).shuffle(shuffled)
    train3 = [r for i, r in enumerate(train) if i != 7]
    train3[3] = CHANGED
    with service.client() as client:
        v1 = _write(client, {"train": train, "test": test}, shard_size="1kB")
        v2 = _write(client, {"train": shuffled, "test": test[::-1]})
        v3 = _write(client, {"train": train3, "test": [*test, train[7], test[0]]}, shard_size="1kB")
        v4 = _write(client, {"train": train, "test": test}, record_index=False)
        assert client.resolve(v1).splits["train"].shard_count > 1
    return Versions(v1, v2, v3, v4, records)


def _token(service: LiveService, scope: str) -> str:
    answer = httpx.post(
        f"{service.url}/api/v1/tokens", json={"name": f"diff-{scope}", "scope": scope}, timeout=30
    )
    answer.raise_for_status()
    return str(answer.json()["token"])


def _stored(service: LiveService, a: str, b: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{service.url}/api/v1/versions/{a}/record-diffs/{b}", timeout=30)
    assert answer.status_code == 200, answer.text
    data: list[dict[str, Any]] = answer.json()["data"]
    return data


def test_the_client_stores_the_record_diff_it_computed(live_service: LiveService) -> None:
    v = _versions(live_service)
    train = v.records[:50]
    reader = live_service.client(token=_token(live_service, "read"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a read token stores nothing, and says nothing
        computed = reader.diff(v.v1, v.v3, records=True)
    assert (computed.splits["train"].added, computed.splits["train"].removed) == (1, 2)
    assert reader.record_diffs(v.v1, v.v3) == [] and _stored(live_service, v.v1, v.v3) == []
    reader.close()

    runner = CliRunner()
    result = runner.invoke(app, ["--url", live_service.url, "diff", v.v1, v.v3, "--records"])
    assert result.exit_code == 0, result.output
    (stored,) = _stored(live_service, v.v1, v.v3)
    assert (stored["a"], stored["b"], stored["kind"], stored["width"]) == (v.v1, v.v3, "bytes", 16)
    assert (stored["new"], stored["gone"], stored["identical"]) == (1, 1, False)
    splits = {s["split"]: s for s in stored["splits"]}
    counts = ("records_a", "records_b", "added", "removed", "common", "moved_in", "moved_out")
    assert [splits["train"][k] for k in counts] == [50, 49, 1, 2, 48, 0, 1]
    assert [splits["test"][k] for k in counts] == [10, 12, 2, 0, 10, 1, 0]
    assert (splits["test"]["duplicates_a"], splits["test"]["duplicates_b"]) == (0, 1)
    assert splits["train"]["sample_added"] == [record_hash(CHANGED).hex()]
    assert splits["train"]["sample_removed"] == sorted(
        record_hash(r).hex() for r in (train[3], train[7])
    )
    assert stored["recorded_by"] and stored["recorded_at"].endswith("Z")
    # the Python API stores the same summary (replacing the row) and reads it back
    with live_service.client() as client:
        again = client.diff(v.v1, v.v3, records=True)
        assert client.record_diffs(v.v1, v.v3)[0]["splits"] == stored["splits"]
        assert again.splits["test"].duplicates_b == 1
        assert client.diff(v.v1, v.v2, records=True).identical
    (same,) = _stored(live_service, v.v1, v.v2)
    assert same["identical"] and all(s["common"] == s["records_a"] for s in same["splits"])
    result = runner.invoke(
        app, ["--url", live_service.url, "diff", v.v1, v.v3, "--records", "--json"]
    )
    assert result.exit_code == 0 and json.loads(result.stdout)["splits"], result.output


def test_compare_page_shows_the_records_and_the_stored_diff(
    live_service: LiveService, page: Any
) -> None:
    v = _versions(live_service)
    with live_service.client() as client:
        client.diff(v.v1, v.v2, records=True)
        client.diff(v.v1, v.v3, records=True)
    base = f"{live_service.url}/#/compare"

    page.goto(f"{base}?old={v.v1}&new={v.v2}")
    expect(page.get_by_test_id("records-summary")).to_contain_text(
        "Same records, resharded: equal records digests, different content digests."
    )
    rows = page.get_by_test_id("records-splits").locator("tbody tr")
    expect(rows).to_have_count(2)
    for i, split in enumerate(("test", "train")):
        expect(rows.nth(i)).to_contain_text(split)
        expect(rows.nth(i)).to_contain_text("same records, resharded")
    expect(rows.nth(1)).to_contain_text("indexed · 50 records")
    expect(page.get_by_test_id("record-diff-meta")).to_contain_text(
        "No record added or removed: the same records in every split."
    )
    page.get_by_test_id("records-splits").scroll_into_view_if_needed()
    shot(page, "compare-records-resharded")

    page.goto(f"{base}?old={v.v1}&new={v.v3}")
    expect(page.get_by_test_id("records-summary")).to_contain_text("Different records")
    expect(page.get_by_test_id("records-splits").locator("tbody tr").nth(1)).to_contain_text(
        "different records"
    )
    diff = page.get_by_test_id("record-diff")
    train = diff.locator("tbody tr", has_text="train")
    test = diff.locator("tbody tr", has_text="test")
    expect(train.locator("td")).to_have_text(
        ["train", "50", "49", "+1", "-2", "48", "0", "1", "0 → 0"]
    )
    expect(test.locator("td")).to_have_text(
        ["test", "10", "12", "+2", "0", "10", "1", "0", "0 → 1"]
    )
    expect(page.get_by_test_id("record-diff-meta")).to_contain_text(
        f"1 new to {v.v3}, 1 gone from {v.v1}"
    )
    by = page.get_by_test_id("record-diff-by")
    expect(by).to_contain_text(f"from bytes/16 record identities: recordkeeper diff {v.v1} {v.v3}")
    expect(by).to_contain_text("Computed by anonymous at 20")
    samples = page.get_by_test_id("record-samples-train")
    expect(samples).to_contain_text("+ " + record_hash(CHANGED).hex())
    expect(samples).to_contain_text("- " + record_hash(v.records[7]).hex())
    diff.scroll_into_view_if_needed()
    shot(page, "compare-record-diff")

    page.goto(f"{base}?old={v.v1}&new={v.v4}")  # v4 has no record identity
    rows = page.get_by_test_id("records-splits").locator("tbody tr")
    expect(rows.first).to_contain_text(f"not indexed: recordkeeper index {v.v4}")
    expect(rows.first).to_contain_text("indexed · 10 records")  # v1's side
    expect(page.get_by_test_id("records-summary")).to_contain_text(
        f"{v.v4} has no record identity yet: recordkeeper index {v.v4}"
    )
    expect(page.get_by_test_id("record-diff-none")).to_contain_text(
        f"recordkeeper diff {v.v1} {v.v4} --records computes it once both versions are indexed"
    )
    page.get_by_test_id("records-splits").scroll_into_view_if_needed()
    shot(page, "compare-records-not-indexed")

    page.goto(f"{base}?old={v.v3}&new={v.v1}")  # the other direction was never computed
    expect(page.get_by_test_id("record-diff-none")).to_contain_text(
        f"recordkeeper diff {v.v3} {v.v1} --records computes it from both versions' record indexes"
    )

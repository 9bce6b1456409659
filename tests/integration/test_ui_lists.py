"""The UI's lists are complete (issue 26, items 5, 6, 7b; Chromium via Playwright): every
consumer of a version, a page at a time with "showing N to M of T", searchable, sortable and
exported as CSV/JSON; aliases on version rows; a title per page; deprecated data and deleted
checkpoints (with their exports) marked; sizes in binary units."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from typing import Any

import pytest

import recordkeeper as rk
from tests.client._records import example_bytes
from tests.integration._browser import browser, chromium_path, expect, page, shot
from tests.integration.conftest import LiveService

__all__ = ["browser", "chromium_path", "page"]  # fixtures used by the tests below

pytestmark = pytest.mark.slow

RUNS = ("run-a", "run-b", "run-c")
PER_RUN = 20  # 60 consumers: more than one page of 50
DASH = "\u2013"  # the en dash the page writes between the first and last row


@pytest.fixture
def service(live_service_factory: Callable[..., LiveService]) -> Any:
    service = live_service_factory()
    client = service.client()
    names = []
    for k in range(2):
        with client.writer("coco", desc=f"d{k}") as w:
            for i in range(20):
                w.write(example_bytes({"label": [i + k], "caption": [b"c%d" % i]}), split="train")
        names.append(w.version.name)
    v1, v2 = names
    client.set_alias("coco", "prod", v1)
    for run in RUNS:
        for step in range(1, PER_RUN + 1):
            client.register_checkpoint(
                model="det",
                checkpoint=f"ckpt-{step}",
                step=step,
                run=run,
                data={"train": v1},
                saved_models=[{"name": "serving", "uri": f"file:///m/{run}/ckpt-{step}/serving"}],
                metrics={"loss": round(2.0 / step, 4), "accuracy": round(step / PER_RUN, 4)},
            )
    client.mark_checkpoint_deleted("det@run-a/ckpt-1", reason="max_to_keep")
    client.deprecate(v2, reason="labels were wrong")
    with pytest.warns(rk.DeprecatedVersionWarning):
        client.register_checkpoint(
            model="ft", checkpoint="ckpt-1", step=1, run="r1", data={"train": v2}
        )
    client.close()
    service.v1, service.v2 = v1, v2
    return service


def test_version_consumers_are_complete_paged_searchable_sortable_exportable(
    service: Any, page: Any
) -> None:
    page.goto(f"{service.url}/#/versions/{service.v1}")
    showing = page.get_by_test_id("consumers-showing")
    expect(showing).to_have_text(f"showing 1{DASH}50 of 60 checkpoints")
    table = page.get_by_test_id("consumers")
    expect(table.locator("tbody tr")).to_have_count(50)
    expect(page).to_have_title(f"{service.v1} · recordkeeper")
    # every label names the run (three runs have a ckpt-1)
    for run in RUNS:
        expect(table).to_contain_text(f"det@{run}/ckpt-1")
    page.get_by_test_id("consumers-search").scroll_into_view_if_needed()
    shot(page, "consumers-paged")
    nav = page.get_by_role("navigation", name="checkpoints pages")
    nav.get_by_role("button", name="next →").click()
    expect(showing).to_have_text(f"showing 51{DASH}60 of 60 checkpoints")
    expect(table.locator("tbody tr")).to_have_count(10)
    nav.get_by_role("button", name="← previous").click()
    expect(showing).to_have_text(f"showing 1{DASH}50 of 60 checkpoints")
    # substring search
    page.get_by_test_id("consumers-search").fill("run-b/ckpt-1")
    expect(showing).to_have_text(
        f"showing 1{DASH}11 of 11 matching \u201crun-b/ckpt-1\u201d (60 checkpoints in all)"
    )  # ckpt-1, ckpt-10..19
    # sort by step, descending on the second click
    page.get_by_test_id("consumers-search").fill("")
    header = table.get_by_role("button", name="Step")
    header.click()
    expect(table.locator("tbody tr").first).to_contain_text("ckpt-1")
    table.get_by_role("button", name="Step ▲").click()
    expect(table.locator("tbody tr").first).to_contain_text(f"ckpt-{PER_RUN}")
    # the deleted checkpoint is marked
    page.get_by_test_id("consumers-search").fill("run-a/ckpt-1")
    row = table.locator("tbody tr").filter(
        has=page.get_by_role("link", name="det@run-a/ckpt-1", exact=True)
    )
    expect(row).to_contain_text("deleted")
    # export what matches, all of it (not only the page shown)
    page.get_by_test_id("consumers-search").fill("run-c")
    with page.expect_download() as caught:
        page.get_by_test_id("consumers-csv").click()
    with open(caught.value.path(), encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == PER_RUN and {r["Run"] for r in rows} == {"run-c"}
    assert caught.value.suggested_filename == f"{service.v1}-consumers.csv"
    page.get_by_test_id("consumers-search").fill("")
    with page.expect_download() as caught:
        page.get_by_test_id("consumers-json").click()
    with open(caught.value.path(), encoding="utf-8") as fh:
        exported = json.load(fh)
    assert len(exported) == 60 and {"Checkpoint", "Run", "Step", "State"} <= set(exported[0])


def test_dataset_page_shows_aliases_on_rows_and_binary_sizes(service: Any, page: Any) -> None:
    page.goto(f"{service.url}/#/datasets/coco")
    versions = page.get_by_test_id("versions")
    row = versions.locator("tr", has_text=service.v1)
    expect(row.get_by_test_id("version-aliases")).to_have_text(
        "latest prod"
    )  # v2 is deprecated: latest is v1
    expect(
        versions.locator("tr", has_text=service.v2).get_by_test_id("version-aliases")
    ).to_have_text("")
    expect(row).to_contain_text(" KiB")
    assert " kB" not in versions.inner_text()
    expect(page).to_have_title("coco · recordkeeper")
    shot(page, "dataset-aliases")


def test_model_page_marks_deprecated_data_and_deleted_checkpoints(service: Any, page: Any) -> None:
    page.goto(f"{service.url}/#/models/ft")
    badge = page.get_by_test_id("run-r1").get_by_test_id("deprecated-data")
    expect(badge).to_have_text("deprecated: labels were wrong")
    shot(page, "model-deprecated-data")
    page.goto(f"{service.url}/#/models/ft/checkpoints/ckpt-1?run=r1")
    data = page.get_by_test_id("lineage-data")
    expect(data.locator("tr", has_text=service.v2)).to_contain_text("deprecated")
    assert data.locator(".badge-deprecated").count() == 1

    page.goto(f"{service.url}/#/models/det")
    run = page.get_by_test_id("run-run-a")
    row = run.locator("tbody tr").filter(has=page.get_by_role("link", name="ckpt-1", exact=True))
    expect(row.get_by_test_id("checkpoint-deleted")).to_contain_text("deleted 20")
    expect(row.get_by_test_id("checkpoint-deleted")).to_contain_text("(max_to_keep)")
    expect(row).to_contain_text("deleted with the checkpoint")
    row.scroll_into_view_if_needed()
    shot(page, "model-deleted-checkpoint")
    row.get_by_role("link", name="ckpt-1", exact=True).click()
    expect(page.get_by_test_id("checkpoint-ref")).to_have_text("det@run-a/ckpt-1")
    expect(page.get_by_test_id("checkpoint-deleted")).to_contain_text("(max_to_keep)")
    expect(page.get_by_test_id("export-deleted")).to_have_text("deleted with the checkpoint")
    expect(page).to_have_title("det@run-a/ckpt-1 · recordkeeper")
    shot(page, "checkpoint-deleted")


def test_shard_impact_lists_every_checkpoint(service: Any, page: Any) -> None:
    with service.client() as client:
        sha = client.resolve(service.v1).splits["train"].shards[0].sha256
    page.goto(f"{service.url}/#/impact?sha256={sha}")
    expect(page.get_by_test_id("impact-checkpoints-showing")).to_have_text(
        f"showing 1{DASH}50 of 60 checkpoints"
    )
    expect(page).to_have_title("Shard impact · recordkeeper")


def test_version_page_of_an_in_place_publish_names_where_the_shards_are(
    live_service_factory: Callable[..., LiveService], page: Any, tmp_path: Any
) -> None:
    from tests.client._records import sample_examples, write_tfrecord

    data = tmp_path / "data"
    (data / "coco").mkdir(parents=True)
    write_tfrecord(data / "coco" / "train.tfrecord", sample_examples(3))
    service = live_service_factory(allowed_roots=[data.as_uri()])
    with service.client() as client:
        version = client.publish(
            rk.Dataset.from_directory(data / "coco", name="coco"), progress=False
        )
    page.goto(f"{service.url}/#/versions/{version.name}")
    location = page.get_by_test_id("shard-location")
    expect(location).to_have_text(f"{(data / 'coco').as_uri()}/ — registered in place, not copied")
    assert version.storage_prefix not in page.locator("dl.facts").first.inner_text()
    shot(page, "version-in-place")


def test_run_page_charts_each_metric_by_step(service: Any, page: Any) -> None:
    page.goto(f"{service.url}/#/models/det")
    page.get_by_test_id("run-page-run-b").click()
    expect(page.locator("h1")).to_have_text("det · run run-b")
    expect(page).to_have_title("det · run run-b · recordkeeper")
    for metric in ("accuracy", "loss"):
        chart = page.get_by_test_id(f"chart-{metric}")
        expect(chart.locator("circle")).to_have_count(PER_RUN)
        assert (
            chart.locator("svg").get_attribute("aria-label")
            == f"{metric} by step: {PER_RUN} checkpoints"
        )
    first = page.get_by_test_id("chart-loss").locator("circle title").first
    assert first.text_content() == "step 1: loss = 2"
    expect(page.get_by_test_id("run-checkpoints-showing")).to_have_text(
        f"showing 1{DASH}{PER_RUN} of {PER_RUN} checkpoints"
    )
    shot(page, "run-charts")

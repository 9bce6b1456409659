"""The web UI marks a version whose data retention deleted (Chromium via Playwright)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration._browser import browser, chromium_path, page, shot
from tests.integration.conftest import LiveService

__all__ = ["browser", "chromium_path", "page"]  # fixtures used by the test below

pytestmark = pytest.mark.slow


def test_version_page_and_list_show_data_deleted(
    live_service_factory: Callable[..., LiveService], page: Any
) -> None:
    from playwright.sync_api import expect

    service = live_service_factory()
    client = service.client()
    names = []
    for k in range(2):
        with client.writer("coco") as w:
            w.write(b"record %d" % k, split="train")
        names.append(w.version.name)
    client.set_retention_policy("coco", keep_last=1)
    assert client.apply_retention("coco", allowed_roots=[service.storage_root]).ok

    page.goto(f"{service.url}/#/versions/{names[0]}")
    status = page.get_by_test_id("data-status")
    expect(status).to_contain_text("data deleted 20")
    expect(status).to_contain_text("(retention)")
    assert page.get_by_test_id("version-name").inner_text() == names[0]
    assert page.get_by_test_id("shards-train").locator("tbody tr").count() == 1  # history kept
    shot(page, "version-data-deleted")

    page.goto(f"{service.url}/#/versions/{names[1]}")
    page.get_by_test_id("version-name").wait_for()
    assert page.get_by_test_id("data-status").count() == 0

    page.goto(f"{service.url}/#/datasets/coco")
    row = page.get_by_test_id("versions").locator("tr", has_text=names[0])
    expect(row).to_contain_text("data deleted")


def test_lineage_page_and_graph_mark_a_version_whose_data_was_deleted(
    live_service_factory: Callable[..., LiveService], page: Any
) -> None:
    """A checkpoint trained on a version retention then deleted (forced): its lineage table,
    its model's run table and the graph (node class, label, panel) mark the version, with the
    deleted badge of the version page; the kept lineage answer read before does not hide it."""
    from playwright.sync_api import expect

    service = live_service_factory()
    client = service.client()
    names = []
    for k in range(2):
        with client.writer("coco") as w:
            w.write(b"record %d" % k, split="train")
        names.append(w.version.name)
    old, new = names
    client.register_checkpoint(
        model="det", checkpoint="ckpt-1", step=1, run="r1", data={"train": old}
    )
    client.register_checkpoint(
        model="det",
        checkpoint="ckpt-2",
        step=2,
        run="r1",
        parent="det@r1/ckpt-1",
        data={"train": new},
    )
    page.goto(f"{service.url}/#/models/det/checkpoints/ckpt-2?run=r1")
    data = page.get_by_test_id("lineage-data")
    expect(data.locator("tr", has_text=old)).to_be_visible()  # read (and kept) before
    assert data.get_by_test_id("data-status").count() == 0

    client.set_retention_policy("coco", keep_last=1, keep_trained=False)
    applied = client.apply_retention(
        "coco", force=True, reason="bad labels", allowed_roots=[service.storage_root]
    )
    assert applied.ok and [i.name for i in applied.items] == [old]

    page.goto(f"{service.url}/#/models/det")
    expect(page.get_by_test_id("run-r1").locator("tr", has_text=old)).to_contain_text(
        "data deleted 20"
    )
    page.goto(f"{service.url}/#/models/det/checkpoints/ckpt-2?run=r1")
    data = page.get_by_test_id("lineage-data")
    status = data.locator("tr", has_text=old).get_by_test_id("data-status")
    expect(status).to_contain_text("data deleted 20")
    expect(status).to_contain_text("(retention)")
    assert status.get_attribute("class") == "badge badge-data-deleted"  # the version page's
    assert data.locator("tr", has_text=new).get_by_test_id("data-status").count() == 0
    shot(page, "lineage-data-deleted")

    page.goto(f"{service.url}/#/graph?checkpoint=det@r1/ckpt-1")
    page.wait_for_selector("[data-testid=graph-canvas][data-ready=true]")
    node = f"version:{old}"
    assert page.evaluate(
        "id => window.recordkeeperGraph.cy.getElementById(id).hasClass('data-deleted')", node
    )
    panel = page.get_by_test_id("graph-panel")
    # with the producer's commit when the test runs in a git checkout: `… @ 3f2a9c1 (data deleted)`
    label = re.compile(rf"{re.escape(old)}( @ [0-9a-f]{{7}}(\+dirty)?)? \(data deleted\)")
    panel.get_by_role("button", name=re.compile(f"← {label.pattern}")).click()
    expect(panel.get_by_test_id("selected-node")).to_have_text(label)
    expect(panel.get_by_test_id("data-status")).to_contain_text("data deleted 20")
    shot(page, "graph-data-deleted")

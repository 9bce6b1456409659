"""The web UI marks a version whose data retention deleted (Chromium via Playwright)."""

from __future__ import annotations

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

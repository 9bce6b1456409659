"""The web UI's checkpoint page names the end of a chain as the CLI does (Chromium)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integration._browser import browser, chromium_path, page
from tests.integration.conftest import LiveService

__all__ = ["browser", "chromium_path", "page"]  # fixtures used by the tests below

pytestmark = pytest.mark.slow


def test_a_chain_cut_at_an_unregistered_parent_says_so(
    live_service_factory: Callable[..., LiveService], page: Any
) -> None:
    """A checkpoint recording a parent the service never got (metadata.unregistered_parent,
    as the offline queue registers it) ends its chain with 'parent not registered: <ref>', on
    its own page and on its children's; a checkpoint trained from scratch ends at 'root'."""
    from playwright.sync_api import expect

    service = live_service_factory()
    client = service.client()
    client.register_checkpoint(
        model="det",
        checkpoint="ckpt-2",
        step=2,
        run="r1",
        metadata={"unregistered_parent": "det@r1/ckpt-1"},
    )
    client.register_checkpoint(
        model="det", checkpoint="ckpt-3", step=3, run="r1", parent="det@r1/ckpt-2"
    )
    client.register_checkpoint(model="scratch", checkpoint="ckpt-1", step=1, run="r1")

    for checkpoint in ("ckpt-2", "ckpt-3"):
        page.goto(f"{service.url}/#/models/det/checkpoints/{checkpoint}?run=r1")
        chain = page.get_by_test_id("chain")
        last = chain.locator("tbody tr").last
        expect(last).to_contain_text("det@r1/ckpt-2")
        expect(last.get_by_test_id("unregistered-parent")).to_have_text(
            "parent not registered: det@r1/ckpt-1"
        )
        assert "root" not in last.inner_text()
    page.goto(f"{service.url}/#/models/scratch/checkpoints/ckpt-1?run=r1")
    last = page.get_by_test_id("chain").locator("tbody tr").last
    expect(last).to_contain_text("root")
    assert last.get_by_test_id("unregistered-parent").count() == 0

"""Malformed or unknown ``#/…`` fragments in the web UI (Debian Chromium via Playwright, a live
service on a real socket): the page says what is wrong with the link, never a raw script error
("URI malformed", "Cannot read properties of null")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integration._browser import browser, chromium_path, page
from tests.integration.conftest import LiveService

__all__ = ["browser", "chromium_path", "page"]  # fixtures used by the tests below

pytestmark = pytest.mark.slow

RAW_SCRIPT_ERRORS = (
    "Cannot read properties",
    "is not a function",
    "URI malformed",
    "undefined",
    "TypeError",
)

FRAGMENTS = [
    "#/versions/%E0%A4%A",  # a broken %-escape
    "#/datasets/%",
    "#/models/m/checkpoints/%ZZ",
    "#/graph?checkpoint=%",
    "#/graph?version=",
    "#/compare?old=&new=%",
    "#/impact?version=",
]


@pytest.fixture
def service(live_service_factory: Callable[..., LiveService]) -> LiveService:
    return live_service_factory()  # SQLite, open loopback access: no sign-in


@pytest.mark.parametrize("fragment", FRAGMENTS)
def test_a_malformed_fragment_gets_a_clear_message(
    service: LiveService, page: Any, fragment: str
) -> None:
    page.goto(service.url + "/" + fragment)
    main = page.locator("#main")
    main.locator("h1, [data-testid=error], p.muted, table").first.wait_for()
    page.wait_for_function("() => !document.getElementById('main').hasAttribute('aria-busy')")
    text = main.inner_text()
    assert not any(raw in text for raw in RAW_SCRIPT_ERRORS), (fragment, text)
    if fragment in FRAGMENTS[:3]:  # broken %-escapes in the path
        error = main.get_by_test_id("error")
        assert "malformed_link" in error.inner_text() and "link" in error.inner_text(), text
    page.problems.clear()  # 404s of the API for names that do not exist are expected


def test_an_unknown_fragment_says_no_page(service: LiveService, page: Any) -> None:
    page.goto(service.url + "/#/nowhere/at/all")
    page.get_by_role("heading", name="Not found").wait_for()
    assert "No page at /nowhere/at/all" in page.locator("#main").inner_text()

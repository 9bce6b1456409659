"""Browser fixtures for the web UI tests: Debian's Chromium driven by Playwright (from PyPI).

Playwright's own browser download cannot work on these machines, so the system ``chromium`` is
launched by path.  The fixture installs what it can: Chromium with ``apt-get`` when it is missing
and the tests run as root with apt available.  Otherwise — Playwright not importable, or no
Chromium and no way to install it — the test is skipped with a loud reason, or fails under CI
(:func:`tests.servers.plugin.skip_or_fail`).

Screenshots go to ``artifacts/ui/`` at the repository root (git-ignored).  Every page records
console errors and uncaught exceptions; :func:`page` fails the test if any occurred.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers.plugin import skip_or_fail

__all__ = ["ARTIFACTS", "browser", "chromium_path", "page", "shot"]

CHROMIUM = os.environ.get("RECORDKEEPER_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "ui"
#: A laptop screen; tests switch to a wide one where it matters.
LAPTOP = {"width": 1366, "height": 800}
WIDE = {"width": 2200, "height": 1100}


def _apt_install_chromium() -> str | None:
    """Install Debian's chromium; None on success, else why it could not be done."""
    if os.geteuid() != 0:
        return "not running as root"
    apt = shutil.which("apt-get")
    if apt is None:
        return "apt-get is not available"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in ([apt, "update"], [apt, "install", "-y", "chromium"]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            return f"`{' '.join(command)}` failed: {done.stderr.strip()[-500:]}"
    return None


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The system Chromium (installed with apt-get when missing and possible)."""
    if not Path(CHROMIUM).exists():
        why = _apt_install_chromium()
        if why is not None or not Path(CHROMIUM).exists():
            skip_or_fail(
                f"Chromium is not installed at {CHROMIUM} and could not be installed ({why}); "
                "install it with `apt-get install -y chromium`"
            )
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Any]:
    """A headless Chromium for one test module.  Not for the session: Playwright's sync API
    keeps an event loop running in the main thread while it is started, and later tests that
    call ``asyncio.run`` (tests/service/test_fastpath.py) must not find one."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("the `playwright` package is not installed (pip install 'playwright>=1.40')")
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(
            executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS
        )
    except Exception as exc:  # a Chromium that does not start is an environment problem
        playwright.stop()
        skip_or_fail(f"Chromium at {chromium_path} did not start: {exc}")
    try:
        yield browser
    finally:
        browser.close()
        playwright.stop()


def expect(target: Any) -> Any:
    """Playwright's ``expect(locator)``: its assertions wait for the page to show what they
    assert (the UI renders what it fetches after the request answered), up to the page
    fixture's timeout.  Read a locator's text once with ``inner_text()`` only when it cannot
    change any more."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context and page (laptop size) that fails the test on any script error."""
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    page.set_default_timeout(30_000)
    from playwright.sync_api import expect as playwright_expect

    playwright_expect.set_options(timeout=30_000)  # a bound on a hang, not a timing assertion
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"uncaught: {exc}"))
    page.on(
        "console",
        lambda msg: (
            problems.append(f"console.{msg.type}: {msg.text}")
            if msg.type == "error" and "status of 40" not in msg.text
            else None
        ),
    )
    page.problems = problems  # tests that expect a failed request remove it themselves
    try:
        yield page
    finally:
        context.close()
    assert not problems, f"the page reported errors: {problems}"


def shot(page: Any, name: str) -> Path:
    """Save a screenshot of ``page`` as ``artifacts/ui/<name>.png``."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path

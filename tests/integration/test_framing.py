"""Clickjacking: a page of another site (another loopback port, so another origin) frames the
service's pages in a real browser (Debian Chromium via Playwright); Chromium must refuse to
draw every one of them (``X-Frame-Options: DENY`` / ``frame-ancestors 'none'``, the rule of
recordkeeper_service/protections.py).

Under open loopback access a framed ``/docs`` made invisible and clicked by the framing page
created an admin token: a frame that is never drawn cannot be clicked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.integration._browser import browser, chromium_path
from tests.integration.conftest import LiveService

__all__ = ["browser", "chromium_path"]  # fixtures used by the tests below

pytestmark = pytest.mark.slow

#: The service's pages a user's browser would draw: the UI, Swagger UI, ReDoc.
PAGES = ("/", "/docs", "/redoc", "/docs/oauth2-redirect")


def _attacker(target: str) -> Iterator[str]:
    """Serve, on a port of its own, a page framing every page of ``target``."""
    frames = "".join(
        f'<iframe name="f{i}" src="{target}{path}" style="opacity:0.01"></iframe>'
        for i, path in enumerate(PAGES)
    )
    body = f"<!doctype html><title>another site</title>{frames}".encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def attacker_page(live_service_factory: Callable[..., LiveService]) -> Iterator[tuple[str, str]]:
    service = live_service_factory()  # SQLite, open loopback access: the setting
    for url in _attacker(service.url):
        yield url, service.url


def test_another_sites_page_cannot_frame_the_services_pages(
    browser: Any, attacker_page: tuple[str, str]
) -> None:
    url, service_url = attacker_page
    context = browser.new_context()
    try:
        page = context.new_page()
        refused: list[str] = []
        page.on("console", lambda msg: refused.append(msg.text) if msg.type == "error" else None)
        page.goto(url, wait_until="load")  # every frame has loaded (or failed to)
        frames = {frame.name: frame for frame in page.frames if frame.name}
        assert sorted(frames) == [f"f{i}" for i in range(len(PAGES))]
        for i, path in enumerate(PAGES):
            frame = frames[f"f{i}"]
            # Chromium replaces a refused document by its error page: nothing of the service's
            # page is there to click.
            assert not frame.url.startswith(service_url), (path, frame.url)
            assert frame.url.startswith("chrome-error://"), (path, frame.url)
        assert len([text for text in refused if "frame" in text.lower()]) >= len(PAGES), refused
        # The same pages open normally at the top level.
        page.goto(service_url + "/docs", wait_until="load")
        page.locator(".swagger-ui").first.wait_for()
    finally:
        context.close()

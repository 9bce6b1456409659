"""The web UI's routes: the page and its assets from package data, public, with a strict CSP."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from importlib import resources

from fastapi.testclient import TestClient

from recordkeeper_service.routes.ui import CYTOSCAPE_STYLE
from tests.service._helpers import error

UI = resources.files("recordkeeper_service").joinpath("ui")


def test_index_is_the_single_page(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert '<script type="module" src="/ui/app.js"></script>' in response.text
    csp = response.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self';" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert response.headers["x-content-type-options"] == "nosniff"


def test_assets_are_served_from_the_package_and_revalidated(client: TestClient) -> None:
    script = client.get("/ui/app.js")
    assert script.status_code == 200
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    assert script.content == UI.joinpath("app.js").read_bytes()
    assert script.headers["cache-control"] == "no-cache"
    again = client.get("/ui/app.js", headers={"If-None-Match": script.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    vendored = client.get("/ui/vendor/cytoscape/cytoscape.esm.min.js")
    assert vendored.status_code == 200 and b'lf.version="3.35.0"' in vendored.content
    assert client.get("/ui/vendor/cytoscape/LICENSE.txt").text.startswith("Copyright")


def test_every_module_the_page_imports_exists(client: TestClient) -> None:
    """Relative imports between the page's modules resolve to served files (no CDN, no 404)."""
    for name in (
        "app.js",
        "api.js",
        "compare-records.js",
        "dom.js",
        "graph.js",
        "graph-edges.js",
        "lists.js",
        "pages-data.js",
        "pages-lineage.js",
        "pages-runs.js",
        "sample.js",
    ):
        text = client.get(f"/ui/{name}").text
        for target in re.findall(r'from "\./([^"]+)"', text):
            assert client.get(f"/ui/{target}").status_code == 200, (name, target)
        # the SVG namespace name is an identifier, never fetched
        text = text.replace('"http://www.w3.org/2000/svg"', "")
        assert "http://" not in text and "https://" not in text.replace("https://js.", "")


def test_unknown_assets_and_other_files_are_not_found(client: TestClient) -> None:
    error(client.get("/ui/nope.js"), 404, "not_found")
    error(client.get("/ui/vendor/cytoscape/fetch.sh"), 404, "not_found")  # not for browsers
    error(client.get("/ui/../routes/ui.py"), 404, "not_found")
    error(client.get("/ui/%2e%2e/routes/ui.py"), 404, "not_found")


def test_the_ui_needs_no_token(make_client: Callable[..., TestClient]) -> None:
    client = make_client(auth="required")
    assert client.get("/").status_code == 200
    assert client.get("/ui/app.css").status_code == 200
    error(client.get("/api/v1/whoami"), 401, "unauthorized")


def test_the_csp_allows_exactly_the_style_cytoscape_adds(client: TestClient) -> None:
    """The vendored bundle builds its one <style> text as below; upgrading Cytoscape.js must
    re-check it (the browser would refuse a changed text and log a CSP violation)."""
    bundle = UI.joinpath("vendor/cytoscape/cytoscape.esm.min.js").read_text()
    assert 's="__________cytoscape_container"' in bundle
    assert 'u.textContent="."+s+" { position: relative; }"' in bundle
    assert CYTOSCAPE_STYLE == ".__________cytoscape_container { position: relative; }"
    digest = base64.b64encode(hashlib.sha256(CYTOSCAPE_STYLE.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in client.get("/").headers["content-security-policy"]

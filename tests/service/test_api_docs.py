"""``/docs`` and ``/redoc`` reference only the service's own URLs, and those serve the vendored
Swagger UI / ReDoc files unchanged (routes/api_docs.py, static/api-docs/)."""

from __future__ import annotations

import hashlib
import json
import re
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient

from recordkeeper_service.routes.api_docs import ASSET_DIR, ASSETS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class _References(HTMLParser):
    """Every ``src``/``href`` attribute of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


def references(html: str) -> list[str]:
    parser = _References()
    parser.feed(html)
    return parser.urls


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("/docs", {"/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"}),
        ("/redoc", {"/docs/assets/redoc.standalone.js"}),
    ],
)
def test_pages_reference_only_local_assets_that_are_served(
    client: TestClient, page: str, expected: set[str]
) -> None:
    response = client.get(page)
    assert response.status_code == 200
    html = response.text
    urls = set(references(html))
    assert expected <= urls
    # Nothing from another host: no absolute URL anywhere in the page (scripts included).
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", html, re.IGNORECASE), html
    assert all(url.startswith("/") and not url.startswith("//") for url in urls), urls
    for url in urls:
        asset = client.get(url)
        assert asset.status_code == 200, url
        name = url.rsplit("/", 1)[1]
        assert asset.content == (ASSET_DIR / name).read_bytes()
        assert asset.headers["content-type"] == ASSETS[name]
    assert "/openapi.json" in html


def test_the_swagger_page_asks_no_validator_service(client: TestClient) -> None:
    assert '"validatorUrl": null' in client.get("/docs").text


def test_the_vendored_files_are_the_recorded_npm_files() -> None:
    manifest = json.loads((ASSET_DIR / "assets.json").read_text())
    assert set(manifest) == set(ASSETS)
    for name, entry in manifest.items():
        digest = hashlib.sha256((ASSET_DIR / name).read_bytes()).hexdigest()
        assert digest == entry["sha256"], name
    versions = {entry["package"]: entry["version"] for entry in manifest.values()}
    assert versions == {"swagger-ui-dist": "5.35.0", "redoc": "2.5.4"}
    # Each package's licence goes with its files.
    assert {"swagger-ui-LICENSE", "swagger-ui-NOTICE", "redoc-LICENSE"} <= set(manifest)


@pytest.mark.parametrize(
    "name", ["assets.json", "README.md", "swagger-ui.css.map", "%2e%2e%2fapp.py", "x.js"]
)
def test_only_the_listed_assets_are_served(client: TestClient, name: str) -> None:
    response = client.get(f"/docs/assets/{name}")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_the_docs_need_no_token(make_client) -> None:  # type: ignore[no-untyped-def]
    client = make_client(auth="required")
    for path in ("/docs", "/redoc", "/docs/assets/swagger-ui.css", "/openapi.json"):
        assert client.get(path).status_code == 200, path

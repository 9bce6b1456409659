"""``HEAD`` on every ``GET`` route: the ``GET``'s status and headers, no body (head.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service._helpers import API, error, publish
from tests.service.test_metrics import scrape, value
from tests.service.test_route_scopes import app_routes, concrete_path

#: Headers a HEAD must give exactly as the GET does.
SAME_HEADERS = ("content-length", "content-type", "etag", "cache-control", "x-error-code")
#: Answers that change with every request (the GET before the HEAD is counted in them).
CHANGING = {"/metrics"}


def _same_head(client: TestClient, path: str, **headers: str) -> Any:
    get = client.get(path, headers=headers)
    head = client.head(path, headers=headers)
    assert head.status_code == get.status_code, (path, head.status_code, get.status_code)
    assert head.content == b"", path
    for name in SAME_HEADERS:
        if name == "content-length" and path in CHANGING:
            continue
        assert head.headers.get(name) == get.headers.get(name), (path, name)
    return head


def test_every_get_route_answers_head(client: TestClient) -> None:
    """Every GET route of the app (enumerated from it), with and without data behind it."""
    publish(client, "coco")
    paths = sorted(
        {concrete_path(template) for method, template, _ in app_routes(client) if method == "GET"}
    )
    assert len(paths) > 20
    for path in paths:
        _same_head(client, path)
    for path in (f"{API}/versions/coco@latest", f"{API}/datasets/coco", "/healthz", "/"):
        assert _same_head(client, path).status_code == 200, path


def test_head_is_conditional_like_get(client: TestClient) -> None:
    publish(client, "coco")
    etag = client.get(f"{API}/versions/coco@latest").headers["etag"]
    head = client.head(f"{API}/versions/coco@latest", headers={"If-None-Match": etag})
    assert head.status_code == 304 and head.headers["etag"] == etag


def test_head_where_get_is_not_allowed_names_head(client: TestClient) -> None:
    response = client.head(f"{API}/datasets/coco/aliases/prod")
    assert response.status_code == 405
    assert response.headers["allow"] == "DELETE, PUT"
    assert response.headers["x-error-code"] == "method_not_allowed"
    body = error(client.patch(f"{API}/datasets/coco/aliases/prod"), 405, "method_not_allowed")
    assert "PATCH is not allowed" in body["detail"]
    assert client.patch(f"{API}/datasets").headers["allow"] == "GET, HEAD, POST"


def test_head_needs_what_get_needs(make_client: Callable[..., TestClient]) -> None:
    client = make_client(auth="required")
    response = client.head(f"{API}/datasets")
    assert response.status_code == 401 and response.content == b""
    assert response.headers["x-error-code"] == "unauthorized"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_head_is_logged_and_counted_as_head(client: TestClient) -> None:
    before = scrape(client)
    assert client.head(f"{API}/datasets").status_code == 200
    after = scrape(client)
    counted = "recordkeeper_http_requests_total"
    labels = {"route": f"{API}/datasets", "method": "HEAD", "status": "200"}
    assert value(after, counted, **labels) - value(before, counted, **labels) == 1

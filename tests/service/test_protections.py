"""Every response carries the browser protections its content type calls for
(recordkeeper_service/protections.py): every route of the app's route table is asked, with and
without a token, and its answer checked — a page added later cannot miss them."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from starlette.routing import BaseRoute

from recordkeeper_service.protections import DOCUMENT_TYPES, protection_headers

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: A value for every path parameter (an answer that is a 404 is checked as well).
PATH_VALUE = "x"
#: Paths whose parameter names a file that exists (the route table's ``x`` is a 404 there).
SERVED_FILES = ("/ui/app.js", "/ui/app.css", "/docs/assets/swagger-ui-bundle.js", "/")


def _paths(routes: list[BaseRoute]) -> list[tuple[str, str]]:
    out = []
    for route in iter_route_contexts(routes):
        if route.path is None:
            continue
        path = re.sub(r"\{[^}]+\}", PATH_VALUE, route.path)
        for method in sorted(route.methods or {"GET"}):
            if method != "HEAD":
                out.append((method, path))
    return out


def _check(response: object, where: str) -> None:
    headers = response.headers  # type: ignore[attr-defined]
    assert headers.get("x-content-type-options") == "nosniff", where
    media = headers.get("content-type", "").split(";", 1)[0].strip()
    if media in DOCUMENT_TYPES or not media:
        assert headers.get("x-frame-options") == "DENY", where
        assert "frame-ancestors 'none'" in headers.get("content-security-policy", ""), where


def test_every_route_answers_with_the_protections(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(auth="required")
    client.raise_server_exceptions = False
    admin = client.post("/api/v1/tokens", json={"name": "p-admin", "scope": "admin"})
    secret = admin.json()["token"] if admin.status_code == 201 else None
    paths = _paths(list(client.app.routes))  # type: ignore[attr-defined]
    assert ("GET", "/docs") in paths and ("GET", "/") in paths and len(paths) > 40
    paths += [(method, path) for method in ("GET", "HEAD") for path in SERVED_FILES]
    kinds: set[str] = set()
    for method, path in paths:
        for headers in ({}, {"Authorization": f"Bearer {secret}"} if secret else {}):
            response = client.request(method, path, headers=headers, json={})
            _check(response, f"{method} {path} → {response.status_code}")
            kinds.add(response.headers.get("content-type", "").split(";")[0])
    assert {"text/html", "application/json", "text/javascript"} <= kinds


@pytest.mark.parametrize("page", ["/docs", "/redoc", "/docs/oauth2-redirect", "/"])
def test_html_pages_cannot_be_framed(client: TestClient, page: str) -> None:
    response = client.get(page)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"


def test_json_answers_and_errors_are_not_sniffed(client: TestClient) -> None:
    for response in (
        client.get("/healthz"),
        client.get("/api/v1/nope"),
        client.get("/openapi.json"),
    ):
        assert response.headers["content-type"].startswith("application/json")
        assert response.headers["x-content-type-options"] == "nosniff"


def test_the_rule_keeps_a_policy_of_its_own_and_adds_framing_to_it() -> None:
    own = protection_headers(
        [(b"content-type", b"text/html"), (b"content-security-policy", b"default-src 'self'")]
    )
    assert (b"content-security-policy", b"default-src 'self'; frame-ancestors 'none'") in own
    strict = [
        (b"content-type", b"text/html"),
        (b"content-security-policy", b"frame-ancestors 'self'"),
    ]
    assert (b"content-security-policy", b"frame-ancestors 'self'") in protection_headers(strict)
    json_only = dict(protection_headers([(b"content-type", b"application/json")]))
    assert json_only == {
        b"content-type": b"application/json",
        b"x-content-type-options": b"nosniff",
    }

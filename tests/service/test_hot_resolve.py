"""The hot resolve route answers exactly as the declared ``GET /versions/{ref}`` route.

:class:`~recordkeeper_service.routes.versions.HotResolveRoute` takes the common forms of the
request without FastAPI's parameter machinery; everything else falls through to the declared
route.  Each request here is sent to the app as built and to the same app without the hot
route, on the same database: status, body and headers must be identical — and the hot route
must really have answered the common forms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from recordkeeper_service.routes import versions
from tests.service._helpers import publish, stage
from tests.service.test_auth import bearer, make_token

API = "/api/v1"
COMPARED_HEADERS = ("etag", "cache-control", "content-type", "x-error-code", "allow")


@pytest.fixture
def hot_and_plain(
    make_client: Callable[..., TestClient],
) -> Callable[..., tuple[TestClient, TestClient]]:
    def make(**settings: Any) -> tuple[TestClient, TestClient]:
        hot, plain = make_client(**settings), make_client(**settings)
        routes = plain.app.router.routes  # type: ignore[attr-defined]
        routes[:] = [r for r in routes if not isinstance(r, versions.HotResolveRoute)]
        assert len(routes) < len(hot.app.router.routes)  # type: ignore[attr-defined]
        return hot, plain

    return make


@pytest.fixture
def hot_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Paths the hot route answered (it authenticates through this module's get_principal;
    the declared route through its dependency)."""
    seen: list[str] = []
    original = versions.get_principal

    async def spy(request: Any) -> Any:
        seen.append(request.url.path)
        return await original(request)

    monkeypatch.setattr(versions, "get_principal", spy)
    return seen


def _without_request_id(response: Any) -> bytes:
    """The body, but an error's ``request_id`` (each request has its own)."""
    if response.headers.get("x-error-code") and response.content:
        body = response.json()
        assert body.pop("request_id") == response.headers["x-request-id"]
        return repr(sorted(body.items())).encode()
    return bytes(response.content)


def _same(hot: TestClient, plain: TestClient, method: str, url: str, **kw: Any) -> Any:
    a, b = hot.request(method, url, **kw), plain.request(method, url, **kw)
    assert a.status_code == b.status_code, (url, a.text, b.text)
    assert _without_request_id(a) == _without_request_id(b), url
    for name in COMPARED_HEADERS:
        assert a.headers.get(name) == b.headers.get(name), (url, name)
    return a


def test_same_answers_as_the_declared_route(
    hot_and_plain: Callable[..., tuple[TestClient, TestClient]], hot_calls: list[str]
) -> None:
    hot, plain = hot_and_plain()
    v1 = publish(hot, "coco")
    publish(hot, "coco", content="second")
    staged = stage(hot, "coco")
    digest = v1["content_digest"]
    common = [
        "coco@latest",
        "coco@latest?shards=false",
        "coco@latest?shards=true",
        "coco@v1",
        v1["name"],
        f"{v1['name']}?shards=false",
        staged["name"],  # no ETag: rendered per request
        f"coco@v1?expect_digest={digest}",
        "coco@v1?expect_digest=sha256:" + "0" * 64,  # 409: another digest
        "coco@v1?expect_digest=nonsense",  # 400
        "nope@latest",  # 404
        "coco@v9",
        "no%20such",
        "coco@latest?shards=false&expect_digest=" + digest.replace(":", "%3A"),
    ]
    for ref in common:
        _same(hot, plain, "GET", f"{API}/versions/{ref}")
    # HEAD is answered as GET without the body (head.py): the hot route answers it too
    _same(hot, plain, "HEAD", f"{API}/versions/coco@latest")
    assert len(hot_calls) == len(common) + 1

    delegated = [
        "coco@latest?shards=1",
        "coco@latest?shards=False",
        "coco@latest?shards=maybe",  # 422 from the declared route's validation
        "coco@latest?shards=",
        "coco@latest?shards=true&shards=false",
        "coco@latest?other=1",
        "coco@latest?&",
    ]
    for ref in delegated:
        _same(hot, plain, "GET", f"{API}/versions/{ref}")
    _same(hot, plain, "GET", f"{API}/versions/coco@latest", content=b"{}")
    assert len(hot_calls) == len(common) + 1  # none of those went through the hot route


def test_conditional_requests(
    hot_and_plain: Callable[..., tuple[TestClient, TestClient]], hot_calls: list[str]
) -> None:
    hot, plain = hot_and_plain()
    publish(hot, "coco")
    etag = hot.get(f"{API}/versions/coco@latest").headers["etag"]
    for header in (etag, f'W/"other", {etag}', 'W/"other"', "*"):
        _same(hot, plain, "GET", f"{API}/versions/coco@latest", headers={"If-None-Match": header})
    assert (
        hot.get(f"{API}/versions/coco@latest", headers={"If-None-Match": etag}).status_code == 304
    )
    publish(hot, "coco", content="newer")  # @latest moves: the old tag no longer matches
    answer = _same(
        hot, plain, "GET", f"{API}/versions/coco@latest", headers={"If-None-Match": etag}
    )
    assert answer.status_code == 200 and answer.json()["number"] == 2
    assert len(hot_calls) >= 6


def test_authentication_is_the_declared_routes(
    hot_and_plain: Callable[..., tuple[TestClient, TestClient]],
    hot_calls: list[str],
    database_url: str,
) -> None:
    secrets = {scope: make_token(database_url, scope) for scope in ("read", "write")}
    hot, plain = hot_and_plain(auth="required")
    publish_headers = bearer(secrets["write"])
    version = hot.post(f"{API}/datasets/coco/versions", json={}, headers=publish_headers)
    assert version.status_code == 201
    url = f"{API}/versions/{version.json()['name']}"
    for headers in (
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": "Basic abc"},
        bearer(secrets["read"]),
    ):
        _same(hot, plain, "GET", url, headers=headers)
    assert hot.get(url).status_code == 401
    assert hot.get(url, headers=bearer(secrets["read"])).status_code == 200
    assert hot_calls

"""The hot lineage routes answer exactly as the declared routes (``GET …/lineage``,
``GET /versions/{ref}/consumers``).

:class:`~recordkeeper_service.routes.lineage.HotLineageRoute` takes the common forms of the
requests without FastAPI's routing scan and parameter machinery; everything else falls through
to the declared routes.  Each request is sent to the app as built and to the same app without
the hot routes, on the same database: status, body and headers must be identical — and the hot
routes must really have answered the common forms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from recordkeeper_service.routes import lineage as lineage_routes
from recordkeeper_service.routes.lineage import ConsumersOut
from tests.service.test_hot_resolve import _same
from tests.service.test_lineage import _history, ok

API = "/api/v1"


@pytest.fixture
def hot_and_plain(make_client: Callable[..., TestClient]) -> tuple[TestClient, TestClient]:
    hot, plain = make_client(), make_client()
    routes = plain.app.router.routes  # type: ignore[attr-defined]
    routes[:] = [r for r in routes if not isinstance(r, lineage_routes.HotLineageRoute)]
    assert len(routes) == len(hot.app.router.routes) - 2  # type: ignore[attr-defined]
    return hot, plain


@pytest.fixture
def hot_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Paths the hot routes answered (they authenticate through this module's get_principal;
    the declared routes through their dependency)."""
    seen: list[str] = []
    original = lineage_routes.get_principal

    async def spy(request: Any) -> Any:
        seen.append(request.url.path)
        return await original(request)

    monkeypatch.setattr(lineage_routes, "get_principal", spy)
    return seen


def test_same_answers_as_the_declared_routes(
    hot_and_plain: tuple[TestClient, TestClient], hot_calls: list[str]
) -> None:
    hot, plain = hot_and_plain
    names = _history(hot)
    upstream = f"{API}/models/det/checkpoints/ckpt-4/lineage"
    consumers = f"{API}/versions/{names['v1']}/consumers"
    taken = [
        upstream,
        upstream + "?form=full",
        upstream + "?form=compact",
        upstream + "?form=packed",
        f"{API}/models/det/checkpoints/ckpt-9/lineage",  # 404
        f"{API}/models/nobody/checkpoints/ckpt-1/lineage",  # 404
        consumers,
        consumers + "?transitive=false",
        consumers + "?transitive=true&limit=1&offset=1",
        consumers + "?limit=10000&offset=0&transitive=false",
        f"{API}/versions/coco@v9/consumers",  # 404
        f"{API}/versions/coco@@/consumers",  # 400
    ]
    for url in taken:
        del hot_calls[:]
        _same(hot, plain, "GET", url)
        assert hot_calls == [url.split("?")[0]], url
    passed = [
        upstream + "?form=other",  # 422 from the declared route
        upstream + "?form=full&form=full",
        upstream + "?run=r1",
        upstream + "?form=",
        consumers + "?transitive=1",  # another spelling of a boolean
        consumers + "?limit=0",
        consumers + "?limit=10001",
        consumers + "?limit=010",
        consumers + "?offset=-1",
        consumers + "?extra=1",
    ]
    for url in passed:
        del hot_calls[:]
        _same(hot, plain, "GET", url)
        assert hot_calls == [], url
    # the ETag of an upstream answer held by the client: 304 from both
    etag = ok(hot.get(upstream)) and hot.get(upstream).headers["ETag"]
    _same(hot, plain, "GET", upstream, headers={"If-None-Match": etag})
    assert hot.get(upstream, headers={"If-None-Match": etag}).status_code == 304
    # HEAD is answered as GET by a middleware, through the hot route too
    _same(hot, plain, "HEAD", consumers)


def test_consumers_answer_is_the_response_model_rendering(client: TestClient) -> None:
    """The consumers routes render a record's JSON with orjson: the bytes must be those of
    ConsumersOut's rendering with ``exclude_unset`` (``shards`` only about a shard)."""
    model = TypeAdapter(ConsumersOut)
    names = _history(client)
    for url in (
        f"{API}/versions/{names['v1']}/consumers",
        f"{API}/versions/{names['v1']}/consumers?transitive=false&limit=2",
        f"{API}/versions/{names['v2']}/consumers?offset=1",
    ):
        served = client.get(url)
        assert served.status_code == 200
        assert served.content == model.dump_json(
            model.validate_python(served.json()), exclude_unset=True
        )

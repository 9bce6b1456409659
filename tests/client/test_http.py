"""The HTTP helper: retries only what is safe to replay, typed errors, clear connection errors."""

from __future__ import annotations

import contextlib

import httpx
import pytest

import recordkeeper as rk
from recordkeeper.http import HttpCore


def _core(handler, **kwargs) -> tuple[HttpCore, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request, len(seen))

    client = httpx.Client(transport=httpx.MockTransport(record))
    core = HttpCore("http://svc", "secret", http_client=client, backoff=0.001, **kwargs)
    return core, seen


def test_get_retries_5xx_then_succeeds() -> None:
    def handler(request, n):
        return httpx.Response(503 if n < 3 else 200, json={"ok": n})

    core, seen = _core(handler)
    assert core.request("GET", "/x") == {"ok": 3}
    assert len(seen) == 3
    assert seen[0].headers["Authorization"] == "Bearer secret"


@pytest.mark.parametrize("status", [408, 429, 500, 502, 504])
def test_retry_statuses(status: int) -> None:
    core, seen = _core(lambda r, n: httpx.Response(status if n == 1 else 200, json={}))
    core.request("GET", "/x")
    assert len(seen) == 2


def test_a_url_too_long_to_send_is_invalid_request_and_sends_nothing() -> None:
    """A query value past httpx's URL limits (``client.versions_from_source`` of a 70,000
    character URI, a log ``limit`` of that length) is refused as ``invalid_request``, not
    ``httpx.InvalidURL`` from inside."""
    core, seen = _core(lambda r, n: httpx.Response(200, json={}))
    with pytest.raises(rk.InvalidRequest, match="URL cannot be sent"):
        core.request("GET", "/sources/versions", params={"uri": "gs://" + "x" * 70_000})
    assert seen == []


def test_4xx_is_never_retried_and_is_typed() -> None:
    def handler(request, n):
        return httpx.Response(
            404,
            json={"code": "version_not_found", "detail": "coco has no version 7"},
            headers={"X-Error-Code": "version_not_found"},
        )

    core, seen = _core(handler)
    with pytest.raises(rk.VersionNotFound) as info:
        core.request("GET", "/x")
    assert len(seen) == 1
    assert info.value.detail == "coco has no version 7"
    assert isinstance(info.value, LookupError)


def test_extra_fields_are_kept() -> None:
    body = {"code": "duplicate_content", "detail": "same", "duplicate_of": "coco_20231015_v3"}
    core, _ = _core(lambda r, n: httpx.Response(409, json=body))
    with pytest.raises(rk.DuplicateContent) as info:
        core.request("POST", "/x", json={})
    assert info.value.extra["duplicate_of"] == "coco_20231015_v3"


def test_header_code_used_when_body_is_not_json() -> None:
    core, _ = _core(
        lambda r, n: httpx.Response(403, text="nope", headers={"X-Error-Code": "forbidden"})
    )
    with pytest.raises(rk.PermissionDenied, match="nope"):
        core.request("GET", "/x")


def test_post_is_not_replayed_unless_idempotent() -> None:
    core, seen = _core(lambda r, n: httpx.Response(503, json={"code": "x", "detail": "down"}))
    with pytest.raises(rk.RecordkeeperError):
        core.request("POST", "/stage", json={})
    assert len(seen) == 1
    core2, seen2 = _core(lambda r, n: httpx.Response(503 if n == 1 else 200, json={}))
    core2.request("POST", "/commit", json={}, idempotent=True)
    assert len(seen2) == 2


def test_retries_give_up_with_the_last_error() -> None:
    core, seen = _core(
        lambda r, n: httpx.Response(500, json={"code": "internal_error", "detail": "bug"}),
        retries=2,
    )
    with pytest.raises(rk.ServerError, match="bug"):
        core.request("GET", "/x")
    assert len(seen) == 3


def test_connection_failure_is_service_unavailable_with_url() -> None:
    def handler(request, n):
        raise httpx.ConnectError("refused", request=request)

    core, seen = _core(handler, retries=1)
    with pytest.raises(rk.ServiceUnavailable, match="http://svc"):
        core.request("GET", "/x")
    assert len(seen) == 2  # GET is replayed once
    core2, seen2 = _core(handler, retries=3)
    with pytest.raises(rk.ServiceUnavailable):
        core2.request("POST", "/x")
    assert len(seen2) == 1


def test_real_refused_port_names_the_url() -> None:
    client = rk.Client("http://127.0.0.1:9", retries=0)
    with pytest.raises(rk.ServiceUnavailable, match=r"127\.0\.0\.1:9"):
        client.datasets()


@pytest.mark.parametrize(
    "url",
    [
        "127.0.0.1:8080",
        "localhost:8080",
        "ftp://h",
        "http://",
        "http://h:99999",
        "http://h:x",
        "http://h/?a=1",
        "",
    ],
)
def test_a_malformed_service_url_is_refused_before_any_request(url: str) -> None:
    with pytest.raises(rk.InvalidRequest, match="not an http\\(s\\) URL"):
        rk.Client(url or " ")


def test_cli_names_a_malformed_url_at_once() -> None:
    from typer.testing import CliRunner

    from recordkeeper.cli import app

    result = CliRunner().invoke(app, ["--url", "127.0.0.1:8080", "ls"])
    assert result.exit_code == 1, result.output
    assert "[invalid_request]" in result.output and "request id" not in result.output


def test_non_json_success_is_a_clear_error() -> None:
    core, _ = _core(lambda r, n: httpx.Response(200, text="<html>"))
    with pytest.raises(rk.ServerError, match="not JSON"):
        core.request("GET", "/x")


def test_client_reads_environment_when_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECORDKEEPER_URL", "http://example.invalid:1234/")
    monkeypatch.setenv("RECORDKEEPER_TOKEN", "tok")
    client = rk.Client()
    assert client.url == "http://example.invalid:1234"
    assert client.token == "tok"
    monkeypatch.delenv("RECORDKEEPER_URL")
    monkeypatch.delenv("RECORDKEEPER_TOKEN")
    assert rk.Client().url == "http://127.0.0.1:8080"
    assert rk.Client().token is None


def test_refs_are_percent_encoded_and_checked_locally() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        return httpx.Response(404, json={"code": "version_not_found", "detail": "no"})

    http = httpx.Client(transport=httpx.MockTransport(handler))
    client = rk.Client("http://svc", http_client=http)
    with pytest.raises(rk.VersionNotFound):
        client.resolve("coco@latest")
    assert seen[0].startswith("/api/v1/versions/coco%40latest")
    with pytest.raises(rk.InvalidReference):
        client.resolve("Not A Ref")
    assert len(seen) == 1


def _list_service(total: int, pages: list[tuple[int, int]]):
    """A handler answering ``GET /api/v1/items`` from ``total`` items, recording (limit, offset)."""

    def handler(request: httpx.Request, n: int) -> httpx.Response:
        assert request.url.path == "/api/v1/items"
        limit = int(request.url.params["limit"])
        offset = int(request.url.params["offset"])
        pages.append((limit, offset))
        data = list(range(total))[offset : offset + limit]
        return httpx.Response(200, json={"data": data, "count": total, "extra": n})

    return handler


def test_paged_walks_every_page_until_count() -> None:
    pages: list[tuple[int, int]] = []
    core, _ = _core(_list_service(2500, pages))
    assert list(core.paged("/items")) == list(range(2500))
    assert pages == [(1000, 0), (1000, 1000), (1000, 2000)]


def test_paged_stops_at_the_limit_and_asks_no_more() -> None:
    pages: list[tuple[int, int]] = []
    core, _ = _core(_list_service(2500, pages))
    assert list(core.paged("/items", {"prefix": None}, limit=1200)) == list(range(1200))
    assert pages == [(1000, 0), (1000, 1000)]
    pages.clear()
    assert list(core.paged("/items", limit=5)) == list(range(5))
    assert pages == [(5, 0)]


def test_paged_stops_on_an_empty_page_and_sends_filters() -> None:
    seen_params: list[dict[str, str]] = []

    def handler(request: httpx.Request, n: int) -> httpx.Response:
        seen_params.append(dict(request.url.params))
        # The count claims more than the service then serves: stop at the empty page.
        return httpx.Response(200, json={"data": [1, 2] if n == 1 else [], "count": 10})

    core, seen = _core(handler)
    assert list(core.paged("/things", {"state": "committed", "prefix": None})) == [1, 2]
    assert len(seen) == 2
    assert seen_params[0] == {"state": "committed", "limit": "1000", "offset": "0"}
    assert seen_params[1]["offset"] == "2"


def test_pages_yield_whole_answers() -> None:
    pages: list[tuple[int, int]] = []
    core, _ = _core(_list_service(25, pages))
    answers = list(core.pages("/items", page=10))
    assert [a["data"][0] for a in answers] == [0, 10, 20]
    assert [a["extra"] for a in answers] == [1, 2, 3]  # fields besides data are kept


@pytest.mark.parametrize("status", [200, 404, 503])
def test_a_body_over_the_limit_is_refused(status: int) -> None:
    """Success or error answer: the body is read as a stream up to max_response_bytes."""
    core, seen = _core(
        lambda r, n: httpx.Response(status, content=b"x" * 101), max_response_bytes=100
    )
    with pytest.raises(rk.ResponseTooLarge, match="longer than 100 bytes") as caught:
        core.request("GET", "/x")
    assert caught.value.extra["limit"] == 100
    assert len(seen) == 1  # not retried
    core, _ = _core(lambda r, n: httpx.Response(status, json={"code": "x", "detail": "y"}))
    with pytest.raises(rk.RecordkeeperError) if status >= 400 else contextlib.nullcontext():
        core.request("GET", "/x")


def test_a_body_that_does_not_decode_is_an_invalid_response() -> None:
    core, _ = _core(
        lambda r, n: httpx.Response(200, content=b"not gzip", headers={"Content-Encoding": "gzip"})
    )
    with pytest.raises(rk.InvalidResponse, match="does not decode"):
        core.request("GET", "/x")


def test_request_urls_are_parsed_once_and_sent_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request URL (with its query) is parsed once per distinct pair and reused: the URLs sent
    are the ones built from text each time; list values are parsed every time; the kept URLs
    are bounded."""
    core, seen = _core(lambda r, n: httpx.Response(200, json={}))
    parsed: list[str] = []
    real = core._url_type

    def counting(url: str, **kw: object) -> httpx.URL:
        parsed.append(url)
        return real(url, **kw)

    monkeypatch.setattr(core, "_url_type", counting)
    for _ in range(3):
        core.request("GET", "/versions/coco%40latest", params={"shards": "false", "x": None})
    core.request("GET", "/versions/coco%40latest", params={"shards": "true"})
    core.request("GET", "/versions", params={"state": ["committed", "deprecated"]})
    core.request("GET", "/versions", params={"state": ["committed", "deprecated"]})
    assert [str(r.url) for r in seen] == [
        *["http://svc/versions/coco%40latest?shards=false"] * 3,
        "http://svc/versions/coco%40latest?shards=true",
        *["http://svc/versions?state=committed&state=deprecated"] * 2,
    ]
    assert len(parsed) == 4  # one per distinct URL and query; the list values each time
    monkeypatch.setattr("recordkeeper.http._URL_CACHE_SIZE", 2)
    for n in range(5):
        core.request("GET", f"/x/{n}")
    assert len(core._urls) <= 2

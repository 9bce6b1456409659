"""Request ids, the request log line and request metrics (recordkeeper_service.observe).

In-process (TestClient); the same over a real socket and real processes is in
tests/integration/test_operations.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from recordkeeper_service.logs import REQUEST_LOGGER, JsonFormatter, TextFormatter
from recordkeeper_service.routes.common import ErrorOut
from tests.service._helpers import API, publish

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def request_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The request log records captured, each rendered by the JSON formatter and parsed."""
    formatter = JsonFormatter()
    return [
        json.loads(formatter.format(record))
        for record in caplog.records
        if record.name == REQUEST_LOGGER
    ]


@pytest.fixture
def caplog_requests(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger=REQUEST_LOGGER)
    return caplog


def test_a_well_formed_request_id_is_answered_back(
    client: TestClient, caplog_requests: pytest.LogCaptureFixture
) -> None:
    response = client.get(f"{API}/versions/nosuch@latest", headers={"X-Request-ID": "trace-42"})
    assert response.status_code == 404
    assert response.headers["X-Request-ID"] == "trace-42"
    body = response.json()
    assert body["request_id"] == "trace-42"
    ErrorOut.model_validate(body)
    (line,) = request_lines(caplog_requests)
    assert line["request_id"] == "trace-42"
    assert line["route"] == f"{API}/versions/{{ref}}"
    assert line["path"] == f"{API}/versions/nosuch@latest"
    assert line["method"] == "GET" and line["status"] == 404
    assert line["duration_ms"] >= 0
    assert line["token"] == "anonymous"
    assert line["level"] == "info" and line["logger"] == REQUEST_LOGGER


@pytest.mark.parametrize(
    "sent",
    ["x" * 129, "two words", "évian", "a\x01b", ""],
    ids=["long", "space", "utf8", "ctl", "empty"],
)
def test_a_malformed_request_id_is_replaced(client: TestClient, sent: str) -> None:
    response = client.get("/healthz", headers={"X-Request-ID": sent.encode("utf-8")})
    answered = response.headers["X-Request-ID"]
    assert answered != sent
    assert len(answered) == 32 and int(answered, 16) >= 0


def test_every_response_gets_its_own_id(client: TestClient) -> None:
    ids = {client.get("/healthz").headers["X-Request-ID"] for _ in range(5)}
    assert len(ids) == 5


def test_refusals_before_routing_carry_the_id_and_the_route(
    make_client: Callable[..., TestClient], caplog_requests: pytest.LogCaptureFixture
) -> None:
    client = make_client(auth="required")
    # A body: the request gate refuses it before the router runs.
    response = client.post(
        f"{API}/datasets", json={"name": "coco"}, headers={"X-Request-ID": "gate-1"}
    )
    assert response.status_code == 401
    assert response.json()["request_id"] == "gate-1"
    assert response.headers["X-Request-ID"] == "gate-1"
    response = client.get("/no/such/route", headers={"X-Request-ID": "nowhere-1"})
    assert response.status_code == 404 and response.json()["request_id"] == "nowhere-1"
    lines = {line["request_id"]: line for line in request_lines(caplog_requests)}
    assert lines["gate-1"]["route"] == f"{API}/datasets"
    assert lines["gate-1"]["status"] == 401 and lines["gate-1"]["token"] is None
    assert lines["nowhere-1"]["route"] == "unmatched"


def test_the_log_names_the_token_never_its_secret(
    make_client: Callable[..., TestClient],
    caplog_requests: pytest.LogCaptureFixture,
    database_url: str,
) -> None:
    from recordkeeper_service.db import Database
    from recordkeeper_service.repository.tokens import TokenRepository

    database = Database(database_url, pool_size=1)
    try:
        _, secret = TokenRepository(database).create("nightly-ci", "write", actor="test")
    finally:
        database.dispose()
    client = make_client(auth="required")
    headers = {"Authorization": f"Bearer {secret}"}
    assert client.get(f"{API}/datasets", headers=headers).status_code == 200
    assert client.post(f"{API}/datasets", json={"name": "c"}, headers=headers).status_code == 201
    lines = request_lines(caplog_requests)
    assert [line["token"] for line in lines] == ["nightly-ci", "nightly-ci"]
    assert all(secret not in json.dumps(line) for line in lines)
    assert secret not in caplog_requests.text


def test_an_internal_error_carries_the_id(
    make_client: Callable[..., TestClient], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="recordkeeper_service")
    client = make_client()

    def boom() -> None:
        raise RuntimeError("a bug")

    client.app.add_api_route("/boom", boom)  # type: ignore[attr-defined]
    response = client.get("/boom", headers={"X-Request-ID": "bug-1"})
    assert response.status_code == 500
    assert response.json()["code"] == "internal_error"
    assert response.json()["request_id"] == "bug-1"
    assert response.headers["X-Request-ID"] == "bug-1"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and json.loads(JsonFormatter().format(errors[0]))["request_id"] == "bug-1"
    (line,) = request_lines(caplog)
    assert line["status"] == 500 and line["route"] == "/boom"


def test_the_request_log_can_be_turned_off(
    make_client: Callable[..., TestClient], caplog_requests: pytest.LogCaptureFixture
) -> None:
    client = make_client(request_log=False)
    assert client.get("/healthz").status_code == 200
    assert request_lines(caplog_requests) == []


def test_publishing_is_logged_by_route_template(
    client: TestClient, store: str, caplog_requests: pytest.LogCaptureFixture
) -> None:
    publish(client, "coco", count=2)
    routes = [(line["method"], line["route"]) for line in request_lines(caplog_requests)]
    assert ("POST", f"{API}/datasets/{{name}}/versions") in routes
    assert ("POST", f"{API}/versions/{{version_name}}/shards") in routes
    assert ("POST", f"{API}/versions/{{version_name}}/commit") in routes


def test_formats_render_one_line_per_record() -> None:
    record = logging.LogRecord(
        "recordkeeper_service", logging.WARNING, "", 0, "a\nb %s", ("c",), None
    )
    record.request_id = "r-1"
    as_json = JsonFormatter().format(record)
    assert "\n" not in as_json
    parsed = json.loads(as_json)
    assert parsed["message"] == "a\nb c" and parsed["request_id"] == "r-1"
    assert parsed["level"] == "warning" and parsed["time"].endswith("Z")
    text = TextFormatter().format(record)
    assert "warning recordkeeper_service: a\nb c request_id=r-1" in text

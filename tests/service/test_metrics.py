"""``GET /metrics`` in-process: what is counted, and who may scrape (RECORDKEEPER_METRICS).

Several worker processes (the multiprocess mode) over real sockets:
tests/integration/test_operations.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.service._helpers import API, commit, publish, register, shards, stage

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def scrape(
    client: TestClient, **headers: str
) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of ``/metrics``: (name, labels) → value."""
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_requests_are_counted_by_route_template(client: TestClient) -> None:
    route = f"{API}/versions/{{ref}}"
    before = scrape(client)
    for name in ("a", "b", "c"):
        assert client.get(f"{API}/versions/{name}@latest").status_code == 404
    assert client.get("/no/such/path").status_code == 404
    after = scrape(client)
    counted = "recordkeeper_http_requests_total"
    assert (
        value(after, counted, route=route, method="GET", status="404")
        - value(before, counted, route=route, method="GET", status="404")
        == 3
    )
    assert value(after, counted, route="unmatched", method="GET", status="404") == 1 + value(
        before, counted, route="unmatched", method="GET", status="404"
    )
    # No label holds a path or a dataset name.
    assert not any("nosuch" in str(key) or "/a@" in str(key) for key in after)
    latency = "recordkeeper_http_request_duration_seconds_count"
    assert value(after, latency, route=route, method="GET") == 3
    assert (
        value(
            after,
            "recordkeeper_http_request_duration_seconds_bucket",
            route=route,
            method="GET",
            le="+Inf",
        )
        == 3
    )


def test_unknown_methods_do_not_make_new_labels(client: TestClient) -> None:
    client.request("BREW", "/healthz")
    samples = scrape(client)
    methods = {
        dict(labels).get("method")
        for name, labels in samples
        if name == "recordkeeper_http_requests_total"
    }
    assert "BREW" not in methods and "OTHER" in methods


def test_commits_shards_and_bytes_are_counted_once(client: TestClient) -> None:
    version = publish(client, "coco", count=3)
    samples = scrape(client)
    assert value(samples, "recordkeeper_versions_committed_total") == 1
    assert value(samples, "recordkeeper_shards_registered_total") == 3
    assert value(samples, "recordkeeper_shard_bytes_registered_total") == version["size"] > 0
    # A repeated commit answers the same version and counts nothing.
    assert commit(client, version["name"]).status_code == 200
    # Registering the same shards again on a new staged version counts them; identical
    # re-registration on the same version does not.
    staged = stage(client, "coco")
    bodies = shards(staged["storage_prefix"], 2)
    assert register(client, staged["name"], bodies).status_code == 200
    assert register(client, staged["name"], bodies).json()["unchanged"] == 2
    samples = scrape(client)
    assert value(samples, "recordkeeper_versions_committed_total") == 1
    assert value(samples, "recordkeeper_shards_registered_total") == 5


def test_the_pool_gauges_return_to_zero_in_use(client: TestClient, backend: str) -> None:
    publish(client, "coco", count=2)
    samples = scrape(client)
    assert value(samples, "recordkeeper_db_pool_connections", state="in_use") == 0
    assert value(samples, "recordkeeper_db_pool_connections", state="open") >= 1
    assert value(samples, "recordkeeper_db_pool_limit") >= 2


def test_reported_verification_failures_are_counted_and_audited(client: TestClient) -> None:
    version = publish(client, "coco", count=3)
    body = {
        "mode": "deep",
        "checked": 3,
        "problems": [
            {"shard": "train-00000-of-00003", "reason": "corrupt"},
            {"shard": "train-00002-of-00003", "reason": "corrupt"},
            {"shard": "train-00001-of-00003", "reason": "missing"},
        ],
    }
    response = client.post(f"{API}/versions/coco@latest/verifications", json=body)
    assert response.status_code == 201, response.text
    assert response.json() == {
        "version": version["name"],
        "mode": "deep",
        "checked": 3,
        "problems": 3,
    }
    samples = scrape(client)
    failures = "recordkeeper_verification_failures_total"
    assert value(samples, failures, reason="corrupt", mode="deep") == 2
    assert value(samples, failures, reason="missing", mode="deep") == 1
    events = client.get(f"{API}/events", params={"action": "version.verification_failed"}).json()
    (event,) = events["data"]
    assert event["version"] == version["name"]
    assert event["detail"]["reasons"] == {"corrupt": 2, "missing": 1}
    assert event["detail"]["shards"][0] == "train-00000-of-00003"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (
            {"mode": "fast", "checked": 1, "problems": [{"shard": "s", "reason": "gone"}]},
            422,
            "invalid_request",
        ),
        ({"mode": "slow", "checked": 1, "problems": []}, 422, "invalid_request"),
        ({"mode": "fast", "checked": -1, "problems": []}, 422, "invalid_request"),
    ],
)
def test_bad_verification_reports_are_refused(
    client: TestClient, body: dict[str, object], status: int, code: str
) -> None:
    publish(client, "coco", count=1)
    response = client.post(f"{API}/versions/coco@latest/verifications", json=body)
    assert response.status_code == status and response.json()["code"] == code
    assert (
        value(
            scrape(client), "recordkeeper_verification_failures_total", reason="gone", mode="fast"
        )
        == 0
    )


def test_a_report_on_an_unknown_version_is_not_found(client: TestClient) -> None:
    body = {"mode": "fast", "checked": 1, "problems": [{"shard": "s", "reason": "missing"}]}
    response = client.post(f"{API}/versions/nosuch@latest/verifications", json=body)
    assert response.status_code == 404 and response.json()["code"] == "dataset_not_found"


def _token(database_url: str, scope: str) -> str:
    from recordkeeper_service.db import Database
    from recordkeeper_service.repository.tokens import TokenRepository

    database = Database(database_url, pool_size=1)
    try:
        return TokenRepository(database).create(f"scraper-{scope}", scope, actor="test")[1]
    finally:
        database.dispose()


def test_scraping_needs_a_read_token_by_default(
    make_client: Callable[..., TestClient], database_url: str
) -> None:
    client = make_client(auth="required")
    refused = client.get("/metrics")
    assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
    token = _token(database_url, "read")
    scrape(client, Authorization=f"Bearer {token}")


def test_public_metrics_need_no_token(make_client: Callable[..., TestClient]) -> None:
    client = make_client(auth="required", metrics="public")
    scrape(client)


def test_metrics_can_be_turned_off(make_client: Callable[..., TestClient]) -> None:
    client = make_client(metrics="off")
    response = client.get("/metrics")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_process_in_flight_and_cache_metrics(client: TestClient) -> None:
    """Issue 26, item 8: process CPU/memory (prometheus_client's ProcessCollector), requests in
    flight and the caches' look-ups by result, from which hit ratios are computed."""
    version = publish(client, "coco", count=2)
    samples = scrape(client)
    assert value(samples, "process_cpu_seconds_total") > 0
    assert value(samples, "process_resident_memory_bytes") > 0
    # the scrape itself is the one request being answered
    assert value(samples, "recordkeeper_http_requests_in_flight") == 1
    lookups = "recordkeeper_cache_lookups_total"
    before = {r: value(samples, lookups, cache="versions", result=r) for r in ("hit", "miss")}
    for _ in range(3):
        assert client.get(f"{API}/versions/{version['name']}").status_code == 200
    after = scrape(client)
    hits = value(after, lookups, cache="versions", result="hit") - before["hit"]
    misses = value(after, lookups, cache="versions", result="miss") - before["miss"]
    assert hits + misses >= 3 and hits >= 2  # the first read may miss, the next ones hit
    assert (lookups, frozenset({("cache", "rendered_pages"), ("result", "miss")})) in after or (
        lookups,
        frozenset({("cache", "rendered_pages"), ("result", "hit")}),
    ) in after

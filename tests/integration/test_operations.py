"""Operations over real sockets and real processes (``recordkeeper serve``) on PostgreSQL:

* ``/metrics`` of a two-worker server sums both workers (multiprocess mode) and moves with the
  requests; ``/docs`` works offline;
* one request id in the client's error, the response and the service's JSON log line;
* two separate ``serve`` processes on one database: 8 concurrent publishers spread over both
  get distinct version numbers, nothing is lost, either process serves every version.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

import recordkeeper as rk
from recordkeeper_service.db import Database
from recordkeeper_service.repository.tokens import TokenRepository
from tests.apps import migrated
from tests.client._records import sample_examples
from tests.integration._serve import serve
from tests.service.test_api_docs import references
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROUTE = "/api/v1/versions/{ref}"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str, **headers: str) -> Samples:
    response = httpx.get(f"{url}/metrics", headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def counted(url: str, expected: float) -> Samples | None:
    """A scrape of ``url`` once it counts ``expected`` ``GET {ROUTE}`` 404s, each with its
    latency (both recorded after the response is sent), else None."""
    samples = scrape(url)
    requests = value(
        samples, "recordkeeper_http_requests_total", route=ROUTE, method="GET", status="404"
    )
    latency = value(
        samples, "recordkeeper_http_request_duration_seconds_count", route=ROUTE, method="GET"
    )
    assert requests <= expected and latency <= expected, (requests, latency, expected)
    return samples if requests == latency == expected else None


def not_found_by_worker(metrics_dir: Path) -> dict[str, float]:
    """Per worker file: how many ``GET {ROUTE}`` 404s that worker counted."""
    counts = {}
    for path in sorted(metrics_dir.glob("counter_*.db")):
        samples = {
            (s.name, frozenset(s.labels.items())): s.value
            for family in MultiProcessCollector.merge([str(path)], accumulate=False)
            for s in family.samples
        }
        labels = {"route": ROUTE, "method": "GET", "status": "404"}
        counts[path.stem] = value(samples, "recordkeeper_http_requests_total", **labels)
    return counts


@pytest.fixture
def database_url(postgres_database_url: str) -> str:
    return migrated(postgres_database_url)


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = tmp_path / "store"
    path.mkdir()
    return path.as_uri() + "/"


def test_two_workers_metrics_are_summed_and_move_with_requests(
    database_url: str, store: str, tmp_path: Path
) -> None:
    metrics_dir = tmp_path / "metrics"
    env = {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), "RECORDKEEPER_METRICS": "public"}
    with serve(
        database_url=database_url,
        storage_root=store,
        log=tmp_path / "serve.log",
        workers=2,
        env=env,
    ) as served:
        sent = 0

        def miss(i: int) -> int:
            with httpx.Client(timeout=30) as fresh:  # a new connection: any worker may take it
                return fresh.get(f"{served.url}/api/v1/versions/nosuch{i}@latest").status_code

        # Concurrent bursts until each worker has answered some (bounded).
        with ThreadPoolExecutor(max_workers=8) as pool:
            while sent < 2000:
                assert set(pool.map(miss, range(sent, sent + 40))) == {404}
                sent += 40
                per_worker = not_found_by_worker(metrics_dir)
                if len(per_worker) == 2 and all(per_worker.values()):
                    break
        assert len(per_worker) == 2 and all(per_worker.values()), per_worker
        # a request is counted after its response was sent: wait until the last ones are
        wait_for(
            lambda: sum(not_found_by_worker(metrics_dir).values()) == sent,
            what=f"{sent} 404s counted by the workers",
        )

        # Whichever worker answers the scrape, it sums both.
        for _ in range(4):
            samples = wait_for(lambda: counted(served.url, sent), what=f"{sent} requests scraped")
        # Two live workers, each with a pool of 5 + 5 overflow.
        assert value(samples, "recordkeeper_db_pool_limit") == 20

        # The numbers move with the requests: publish a version through the client.
        client = rk.Client(served.url)
        with client.writer("moving", shard_size=2000) as writer:
            for record in sample_examples(200):
                writer.write(record, split="train")
        version = writer.version
        for _ in range(10):
            assert httpx.get(f"{served.url}/api/v1/versions/nosuch@latest").status_code == 404
        samples = wait_for(lambda: counted(served.url, sent + 10), what="10 more requests")
        assert value(samples, "recordkeeper_versions_committed_total") == 1
        assert value(samples, "recordkeeper_shards_registered_total") == version.shard_count > 1
        assert value(samples, "recordkeeper_shard_bytes_registered_total") == version.size

        # /docs works without internet: its assets come from the service.
        page = httpx.get(f"{served.url}/docs").text
        for url in references(page):
            assert url.startswith("/docs/assets/")
            assert httpx.get(f"{served.url}{url}").status_code == 200


def test_one_request_id_in_client_error_response_and_log_line(
    database_url: str, store: str, tmp_path: Path
) -> None:
    database = Database(database_url, pool_size=1)
    try:
        _, secret = TokenRepository(database).create("etl-bot", "write", actor="test")
    finally:
        database.dispose()
    responses: list[httpx.Response] = []

    def keep(response: httpx.Response) -> None:
        response.read()
        responses.append(response)

    env = {"RECORDKEEPER_AUTH": "required", "RECORDKEEPER_LOG_FORMAT": "json"}
    with serve(
        database_url=database_url, storage_root=store, log=tmp_path / "serve.log", env=env
    ) as served:
        http = httpx.Client(base_url=served.url, timeout=30, event_hooks={"response": [keep]})
        client = rk.Client(served.url, secret, http_client=http)
        with pytest.raises(rk.VersionNotFound) as info:
            client.resolve("coco@latest")
        request_id = info.value.request_id
        assert request_id is not None and request_id in str(info.value)
        (response,) = responses
        assert response.headers["X-Request-ID"] == request_id
        assert response.json()["request_id"] == request_id

        # the log line is written after the response was sent: wait for it
        served.wait_for_log(lambda line: line.get("request_id") == request_id)
        lines = [line for line in served.log_lines() if line.get("request_id") == request_id]
        (line,) = lines
        assert line["logger"] == "recordkeeper_service.requests"
        assert line["method"] == "GET" and line["route"] == ROUTE and line["status"] == 404
        assert line["path"] == "/api/v1/versions/coco@latest"
        assert line["token"] == "etl-bot" and line["duration_ms"] > 0
        http.close()
    log_text = served.log.read_text()
    assert secret not in log_text
    # Every line of the service and of uvicorn is JSON (the start banner aside).
    other = [t for t in log_text.splitlines() if t and not t.startswith("{")]
    assert all(t.startswith("recordkeeper serving on") for t in other), other


def _publish(url: str, i: int, start: threading.Barrier) -> rk.DatasetVersion:
    client = rk.Client(url)
    start.wait()
    with client.writer("shared", desc=f"publisher_{i}", shard_size=3000) as writer:
        for record in sample_examples(120, start=1000 * i):
            writer.write(record, split="train")
    return writer.version


def test_two_serve_processes_on_one_database(database_url: str, store: str, tmp_path: Path) -> None:
    env = {"RECORDKEEPER_METRICS": "public"}
    with (
        serve(database_url=database_url, storage_root=store, log=tmp_path / "a.log", env=env) as a,
        serve(database_url=database_url, storage_root=store, log=tmp_path / "b.log", env=env) as b,
    ):
        urls = [a.url, b.url]
        start = threading.Barrier(8)

        def publish(i: int) -> rk.DatasetVersion:  # publishers 0, 2, 4, 6 on a; 1, 3, 5, 7 on b
            return _publish(urls[i % 2], i, start)

        with ThreadPoolExecutor(max_workers=8) as pool:
            published = list(pool.map(publish, range(8)))

        numbers = sorted(v.number for v in published)
        assert numbers == list(range(1, 9)), numbers
        assert len({v.name for v in published}) == 8
        assert len({v.content_digest for v in published}) == 8
        for url in urls:
            client = rk.Client(url)
            listed = client.versions("shared")
            assert sorted(v.name for v in listed) == sorted(v.name for v in published)
            assert {v.state for v in listed} == {"committed"}
            for version in published:
                resolved = client.resolve(f"shared@v{version.number}")
                assert resolved.name == version.name
                assert resolved.content_digest == version.content_digest
                assert resolved.record_count == 120
            assert client.resolve("shared@latest").number == 8
        # Nothing lost: every version reads back intact.
        for version in published:
            assert rk.Client(b.url).resolve(version.name).verify(deep=True).ok
        committed = [value(scrape(url), "recordkeeper_versions_committed_total") for url in urls]
        assert sum(committed) == 8 and all(committed), committed  # both processes took some
        events = httpx.get(
            f"{a.url}/api/v1/events", params={"dataset": "shared", "action": "version.committed"}
        ).json()
        assert events["count"] == 8
        # The UI (when the service has one at /) and the API answer on both processes alike.
        answers = [httpx.get(f"{url}/").status_code for url in urls]
        assert answers[0] == answers[1] and answers[0] in (200, 404), answers
        for url in urls:
            assert httpx.get(f"{url}/readyz").status_code == 200

"""The service under real uvicorn (``recordkeeper serve --workers 2``) on PostgreSQL.

Concurrency is checked over real sockets against two worker processes sharing one database:

* 16 stage requests for one (new) dataset at once → 16 distinct staged names, no errors;
* 16 commits at once, half of them duplicating one content → version numbers 1..9 given to
  the distinct contents, none burnt by the duplicates (numbers are given at commit);
* 16 stagings at once declaring a content digest (publish --copy), half of it committed
  already → the duplicates answered and unnumbered, the others reserving 2..9;
* two commits of one version at once → one commits, the other answers the same version;
* 10,000 shards registered in one request, then committed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.apps import migrated
from tests.service._helpers import expected_digest, shards
from tests.waiting import answering, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

API = "/api/v1"


@dataclass
class Served:
    url: str
    storage_root: str
    process: subprocess.Popen[bytes]
    log: Path


@pytest.fixture
def postgres_url(postgres_database_url: str) -> str:
    """A fresh PostgreSQL database (tests/servers/plugin.py), migrated."""
    return migrated(postgres_database_url)


@pytest.fixture
def served(postgres_url: str, tmp_path: Path) -> Iterator[Served]:
    """``python -m recordkeeper_service serve --workers 2`` on a free loopback port."""
    port = free_port()
    store = (tmp_path / "store").as_uri() + "/"
    env = {
        **os.environ,
        "RECORDKEEPER_DATABASE_URL": postgres_url,
        "RECORDKEEPER_STORAGE_ROOT": store,
        "RECORDKEEPER_ALLOWED_ROOTS": store,
        "RECORDKEEPER_LOG_LEVEL": "warning",
    }
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "recordkeeper_service",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "2",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, log)
        yield Served(url=url, storage_root=store, process=process, log=log)
    finally:
        _stop(process)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    ready = answering(f"{url}/readyz", process=process, log=log)
    for _ in range(4):  # a few answers, likely from both workers
        wait_for(ready, timeout=60, what=f"the service on {url} ready")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


def _concurrently(
    n: int, url: str, call: Callable[[httpx.Client], httpx.Response]
) -> list[httpx.Response]:
    """Run ``call`` on ``n`` threads, each with its own open connection, released at once."""
    barrier = threading.Barrier(n)

    def one(_: int) -> httpx.Response:
        with httpx.Client(base_url=url, timeout=60) as client:
            client.get("/healthz")  # connect first, so the requests really race
            barrier.wait()
            return call(client)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(n)))


def test_sixteen_concurrent_stages_get_distinct_names(served: Served) -> None:
    responses = _concurrently(
        16, served.url, lambda c: c.post(f"{API}/datasets/race/versions", json={"date": "20240101"})
    )
    assert [r.status_code for r in responses] == [201] * 16, [r.text for r in responses]
    assert {r.json()["number"] for r in responses} == {None}  # numbers come at commit
    names = sorted(r.json()["name"] for r in responses)
    assert names == sorted(f"race_20240101_staged{k}" for k in range(1, 17))
    dataset = httpx.get(f"{served.url}{API}/datasets/race").json()
    assert dataset["name"] == "race"
    events = httpx.get(f"{served.url}{API}/events", params={"dataset": "race"}).json()
    actions = [e["action"] for e in events["data"]]
    assert actions.count("dataset.created") == 1
    assert actions.count("version.staged") == 16


def test_concurrent_commits_with_duplicates_burn_no_number(served: Served) -> None:
    """Issue 9, point 4 under concurrency: 16 staged versions, 8 of them with one content and
    8 with contents of their own, committed at once (``use_existing``) over two workers."""
    contents = ["same"] * 8 + [f"own-{i}" for i in range(8)]
    staged = []
    with httpx.Client(base_url=served.url, timeout=60) as client:
        for content in contents:
            version = client.post(f"{API}/datasets/dups/versions", json={"date": "20240101"})
            name = version.json()["name"]
            bodies = shards(version.json()["storage_prefix"], 2, content=content)
            response = client.post(f"{API}/versions/{name}/shards", json={"shards": bodies})
            assert response.status_code == 200, response.text
            staged.append(name)
    names = iter(staged)
    lock = threading.Lock()

    def commit(client: httpx.Client) -> httpx.Response:
        with lock:
            name = next(names)
        return client.post(f"{API}/versions/{name}/commit", json={"on_duplicate": "use_existing"})

    responses = _concurrently(16, served.url, commit)
    assert [r.status_code for r in responses] == [200] * 16, [r.text for r in responses]
    answers = [r.json() for r in responses]
    numbers = sorted({a["number"] for a in answers})
    assert numbers == list(range(1, 10))  # 9 distinct contents: 1..9, no gap
    assert sum(1 for a in answers if a["duplicate_of"]) == 7
    listed = httpx.get(f"{served.url}{API}/datasets/dups/versions").json()["data"]
    states = sorted((v["state"], v["number"]) for v in listed if v["state"] != "committed")
    assert states == [("abandoned", None)] * 7
    committed = sorted(v["number"] for v in listed if v["state"] == "committed")
    assert committed == list(range(1, 10))
    assert {v["name"] for v in listed if v["state"] == "committed"} == {
        f"dups_20240101_v{n}" for n in range(1, 10)
    }


def test_concurrent_declared_duplicates_take_no_number(served: Served) -> None:
    """publish --copy's stage: 16 stagings at once declaring a content (``content_digest``) that
    is committed already (8) or new (8), over two workers: the duplicates are answered with
    the existing version and take no number; the new ones reserve 2..9, named so."""
    with httpx.Client(base_url=served.url, timeout=60) as client:
        first = client.post(f"{API}/datasets/decl/versions", json={"date": "20240101"}).json()
        bodies = shards(first["storage_prefix"], 2, content="same")
        client.post(f"{API}/versions/{first['name']}/shards", json={"shards": bodies})
        v1 = client.post(f"{API}/versions/{first['name']}/commit", json={}).json()
    assert v1["number"] == 1
    digests = [v1["content_digest"]] * 8 + [
        expected_digest(shards("s3://x/decl/", 2, content=f"own-{i}")) for i in range(8)
    ]
    queue = iter(digests)
    lock = threading.Lock()

    def stage(client: httpx.Client) -> httpx.Response:
        with lock:
            digest = next(queue)
        body = {"date": "20240101", "content_digest": digest, "on_duplicate": "use_existing"}
        return client.post(f"{API}/datasets/decl/versions", json=body)

    responses = _concurrently(16, served.url, stage)
    assert [r.status_code for r in responses] == [201] * 16, [r.text for r in responses]
    answers = [r.json() for r in responses]
    duplicates = [a for a in answers if a["duplicate_of"]]
    assert len(duplicates) == 8 and {a["name"] for a in duplicates} == {v1["name"]}
    reserved = sorted(a["number"] for a in answers if not a["duplicate_of"])
    assert reserved == list(range(2, 10))  # no number burnt by a duplicate
    for a in answers:
        if not a["duplicate_of"]:
            assert a["state"] == "staged" and a["storage_prefix"].endswith(f"/decl/{a['name']}/")
    listed = httpx.get(f"{served.url}{API}/datasets/decl/versions").json()["data"]
    assert len(listed) == 9  # v1 and the 8 reservations; the duplicates staged nothing


def test_two_concurrent_commits_answer_the_same_version(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=60) as client:
        version = client.post(f"{API}/datasets/coco/versions", json={}).json()
        bodies = shards(version["storage_prefix"], 200)
        registered = client.post(
            f"{API}/versions/{version['name']}/shards", json={"shards": bodies}
        )
        assert registered.status_code == 200, registered.text

    responses = _concurrently(
        2, served.url, lambda c: c.post(f"{API}/versions/{version['name']}/commit", json={})
    )
    assert [r.status_code for r in responses] == [200, 200], [r.text for r in responses]
    first, second = (r.json() for r in responses)
    assert first["name"] == second["name"] == "coco_" + version["date"].replace("-", "") + "_v1"
    assert first["staged_name"] == second["staged_name"] == version["name"]
    assert first["state"] == second["state"] == "committed"
    assert first["content_digest"] == second["content_digest"] == expected_digest(bodies)
    events = httpx.get(
        f"{served.url}{API}/events",
        params={"version": version["name"], "action": "version.committed"},
    )
    assert events.json()["count"] == 1


def test_ten_thousand_shards_in_one_request(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=120) as client:
        version = client.post(f"{API}/datasets/big/versions", json={}).json()
        bodies = shards(version["storage_prefix"], 10_000)
        started = time.perf_counter()
        registered = client.post(
            f"{API}/versions/{version['name']}/shards", json={"shards": bodies}
        )
        register_seconds = time.perf_counter() - started
        assert registered.status_code == 200, registered.text
        assert registered.json() == {"registered": 10_000, "unchanged": 0, "shard_count": 10_000}
        started = time.perf_counter()
        committed = client.post(f"{API}/versions/{version['name']}/commit", json={})
        commit_seconds = time.perf_counter() - started
        assert committed.status_code == 200, committed.text
        body: dict[str, Any] = committed.json()
        assert body["shard_count"] == 10_000
        assert body["content_digest"] == expected_digest(bodies)
        resolved = client.get(f"{API}/versions/big@latest").json()
        assert resolved["splits"]["train"]["shard_count"] == 10_000
    print(f"\n10,000 shards: register {register_seconds:.2f} s, commit {commit_seconds:.2f} s")

"""Expensive reads beside cheap ones: the driver shared by ``bench/bench_read_load.py`` and
``tests/integration/test_read_load.py``.

The service runs as ``recordkeeper serve`` (``RECORDKEEPER_AUTH=required``, see
:func:`tests.integration._load.serve`).  :func:`populate` makes two committed versions of
``shards`` shards each that differ in every shard, and ``consumers`` checkpoints trained on the
first.  :func:`measure` then times ``GET /whoami`` with a read token from one probe thread (its
own keep-alive connection, one request after another) for ``seconds``: first alone, then while
``heavy_clients`` threads (a connection each) ask in a loop for the expensive answers — the diff
of the two versions and the lineage graph of the consumed one — with the same read token.

Bounded: every phase runs for ``seconds`` and every request has a timeout.  Nothing here asserts;
callers decide.
"""

from __future__ import annotations

import multiprocessing
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.integration._load import shard_bodies

__all__ = ["Phase", "ReadLoadReport", "Scenario", "heavy_paths", "measure", "populate"]

API = "/api/v1"
TIMEOUT = 120.0


@dataclass(frozen=True)
class Scenario:
    old: str
    new: str


def _ok(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 300:
        raise RuntimeError(
            f"{response.request.method} {response.request.url}: "
            f"{response.status_code} {response.text[:500]}"
        )
    return response


def _version(http: httpx.Client, dataset: str, shards: int, tag: str) -> str:
    staged = _ok(http.post(f"{API}/datasets/{dataset}/versions", json={"desc": tag})).json()
    bodies = shard_bodies(staged["storage_prefix"], shards, tag=tag)
    for start in range(0, shards, 10_000):
        _ok(
            http.post(
                f"{API}/versions/{staged['name']}/shards",
                json={"shards": bodies[start : start + 10_000]},
            )
        )
    return str(_ok(http.post(f"{API}/versions/{staged['name']}/commit", json={})).json()["name"])


def populate(url: str, write_token: str, *, shards: int, consumers: int) -> Scenario:
    """Two committed versions of ``shards`` shards (every shard differs), ``consumers``
    checkpoints trained on the first (registered from 4 threads)."""
    headers = {"Authorization": f"Bearer {write_token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT) as http:
        old = _version(http, "wide", shards, "old")
        new = _version(http, "wide", shards, "new")

    def register(part: int) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT) as http:
            for i in range(part, consumers, 4):
                _ok(
                    http.put(
                        f"{API}/models/m{i % 50}/checkpoints/ckpt-{i}",
                        json={"step": i, "run": "r", "data": [{"version": old}]},
                    )
                )

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(register, range(4)))
    return Scenario(old, new)


def heavy_paths(scenario: Scenario) -> list[str]:
    """The expensive answers the heavy clients ask for, in turn."""
    return [
        f"{API}/versions/{scenario.old}/diff/{scenario.new}",
        f"{API}/lineage/graph?version={scenario.old}&depth=1&direction=downstream",
    ]


@dataclass
class Phase:
    """One probe phase: ``whoami`` latencies (ms) and the heavy answers completed meanwhile."""

    probes_ms: list[float] = field(default_factory=list)
    heavy_done: int = 0
    heavy_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.probes_ms)

    @property
    def p90_ms(self) -> float:
        return statistics.quantiles(self.probes_ms, n=10)[-1]

    def summary(self) -> dict[str, float | int]:
        return {
            "whoami_requests": len(self.probes_ms),
            "whoami_median_ms": round(self.median_ms, 2),
            "whoami_p90_ms": round(self.p90_ms, 2),
            "heavy_requests": self.heavy_done,
            "heavy_median_ms": round(statistics.median(self.heavy_ms), 1) if self.heavy_ms else 0,
            "errors": len(self.errors),
        }


@dataclass
class ReadLoadReport:
    alone: Phase
    loaded: Phase

    @property
    def ratio(self) -> float:
        """Median ``whoami`` latency under the heavy load over the median alone."""
        return self.loaded.median_ms / self.alone.median_ms


def _probe(url: str, headers: dict[str, str], seconds: float, phase: Phase) -> None:
    with httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT) as http:
        _ok(http.get(f"{API}/whoami"))  # the connection is open before timing starts
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            response = http.get(f"{API}/whoami")
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                phase.errors.append(f"whoami {response.status_code}")
            phase.probes_ms.append(elapsed)
            time.sleep(0.005)  # a reader, not a flood: ~150 requests/s at most


def _heavy_client(
    url: str,
    headers: dict[str, str],
    paths: list[str],
    until: float,
    offset: int,
    out: list[tuple[str, int, float]],
) -> None:
    with httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT) as http:
        turn = offset
        while time.time() < until:
            path = paths[turn % len(paths)]
            turn += 1
            started = time.perf_counter()
            response = http.get(path)
            out.append((path, response.status_code, (time.perf_counter() - started) * 1000))


def _heavy_process(
    url: str, headers: dict[str, str], paths: list[str], clients: int, until: float, results: Any
) -> None:
    """The heavy clients: one thread each, in a process of their own (another GIL than the
    probe's), until the wall-clock time ``until``."""
    out: list[tuple[str, int, float]] = []
    threads = [
        threading.Thread(target=_heavy_client, args=(url, headers, paths, until, i, out))
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=TIMEOUT + until - time.time())
    results.put(out)


def measure(
    url: str,
    read_token: str,
    paths: list[str],
    *,
    heavy_clients: int,
    seconds: float,
    warmup: float = 2.0,
) -> ReadLoadReport:
    """``whoami`` alone for ``seconds``, then beside ``heavy_clients`` loops over ``paths``
    (started ``warmup`` seconds before the probe)."""
    headers = {"Authorization": f"Bearer {read_token}"}
    alone = Phase()
    _probe(url, headers, seconds, alone)
    loaded = Phase()
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    until = time.time() + warmup + seconds + 1.0
    process = context.Process(
        target=_heavy_process, args=(url, headers, paths, heavy_clients, until, results)
    )
    process.start()
    try:
        time.sleep(warmup)
        _probe(url, headers, seconds, loaded)
        done = results.get(timeout=TIMEOUT + seconds)
    finally:
        process.join(timeout=30)
        if process.is_alive():
            process.kill()
            process.join(timeout=10)
    for path, status, elapsed in done:
        loaded.heavy_done += 1
        loaded.heavy_ms.append(elapsed)
        if status != 200:
            loaded.errors.append(f"{path} {status}")
    return ReadLoadReport(alone, loaded)

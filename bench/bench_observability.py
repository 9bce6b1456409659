#!/usr/bin/env python3
"""What request ids, the JSON request log line and Prometheus metrics cost on the hot path.

``recordkeeper serve`` on PostgreSQL is loaded on ``GET /api/v1/versions/coco@latest`` (8
keep-alive connections, ``wrk`` when installed, else the Python load generator of
bench_service.py) in three configurations, interleaved round by round so that they share the
machine's state:

* **bare** (the peer): ``RECORDKEEPER_METRICS=off``, ``RECORDKEEPER_REQUEST_LOG=false``: only
  the request id remains;
* **metrics**: request counts and latency histograms, no request log;
* **default**: metrics and one JSON log line per request (level info, standard error to a file).

Two measurements, each of every configuration against the peer in the same run:

1. **In-process CPU per request** (the figure to quote on a shared machine): the app built by
   ``create_app`` on PostgreSQL is called directly as an ASGI application (no sockets, no HTTP
   parser, no load generator), ``--requests`` resolves per round, and the process's CPU time
   (``time.process_time``) per request is compared, the three apps taking turns in blocks of 100
   requests; the request log is formatted as JSON and written to a file, as ``serve`` would to
   standard error.  CPU time of this process only, so
   other jobs on the machine disturb it far less than throughput.
2. **Over a socket** (``--socket``): ``recordkeeper serve`` loaded with 8 keep-alive
   connections; req/s, p50 and worker CPU per request.  With ``--workers 2`` the metrics use the
   multiprocess directory the runner sets up.  Throughput on a loaded machine is noisy.

Printed: medians over the rounds, and each configuration as a ratio of the peer.

Usage::

    PYTHONPATH=client:service .venv/bin/python bench/bench_observability.py            # ~1 min
    PYTHONPATH=client:service .venv/bin/python bench/bench_observability.py --socket   # + ~5 min

Results are written to ``bench/out/bench_observability.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench_service import API, OUT, database, load, publish_small, serve  # noqa: E402

CONFIGURATIONS: dict[str, dict[str, str]] = {
    "bare": {"RECORDKEEPER_METRICS": "off", "RECORDKEEPER_REQUEST_LOG": "false"},
    "metrics": {"RECORDKEEPER_METRICS": "read", "RECORDKEEPER_REQUEST_LOG": "false"},
    "default": {
        "RECORDKEEPER_METRICS": "read",
        "RECORDKEEPER_REQUEST_LOG": "true",
        "RECORDKEEPER_LOG_LEVEL": "info",
        "RECORDKEEPER_LOG_FORMAT": "json",
    },
}


class _Asgi:
    """Calls an ASGI app directly: its lifespan, and GET requests."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._lifespan: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._events: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None

    async def _wait(self, kind: str) -> None:
        while not any(e["type"] == kind for e in self._events):
            if any(e["type"].endswith(".failed") for e in self._events):
                raise RuntimeError(self._events)
            await asyncio.sleep(0.01)

    async def start(self) -> None:
        async def send(message: dict[str, Any]) -> None:
            self._events.append(message)

        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        self._task = asyncio.create_task(self.app(scope, self._lifespan.get, send))
        await self._lifespan.put({"type": "lifespan.startup"})
        await self._wait("lifespan.startup.complete")

    async def stop(self) -> None:
        await self._lifespan.put({"type": "lifespan.shutdown"})
        await self._wait("lifespan.shutdown.complete")

    async def get(self, path: str) -> int:
        status = 0

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"127.0.0.1"), (b"accept", b"application/json")],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080),
            "state": {},
        }
        await self.app(scope, receive, send)
        return status


def _settings(url: str, workdir: Path, env: dict[str, str]) -> Any:
    from recordkeeper_service.settings import Settings

    store = (workdir / "store").as_uri() + "/"
    return Settings(
        database_url=url,
        storage_root=store,
        metrics=env["RECORDKEEPER_METRICS"],  # type: ignore[arg-type]
        request_log=env["RECORDKEEPER_REQUEST_LOG"] == "true",
    )


async def _interleaved(
    apps: dict[str, Any], path: str, requests: int, block: int
) -> dict[str, float]:
    """CPU microseconds per request of each app, measured in alternating blocks of ``block``
    requests (so that the machine's load drifts the same for every configuration)."""
    clients = {name: _Asgi(app) for name, app in apps.items()}
    for client in clients.values():
        await client.start()
    used = dict.fromkeys(apps, 0.0)
    try:
        for client in clients.values():
            for _ in range(200):  # warm-up: version cache, prepared statements
                assert await client.get(path) == 200
        for _ in range(max(1, requests // block)):
            for name, client in clients.items():
                started = time.process_time()
                for _ in range(block):
                    await client.get(path)
                used[name] += time.process_time() - started
    finally:
        for client in clients.values():
            await client.stop()
    done = max(1, requests // block) * block
    return {name: seconds / done * 1e6 for name, seconds in used.items()}


def bench_in_process(rounds: int, requests: int, workdir: Path) -> dict[str, dict[str, float]]:
    """Microseconds of CPU per resolve through the whole app, per configuration."""
    from recordkeeper_service.app import create_app
    from recordkeeper_service.logs import JsonFormatter

    handler = logging.FileHandler(workdir / "requests.log")
    handler.setFormatter(JsonFormatter())
    request_logger = logging.getLogger("recordkeeper_service.requests")
    request_logger.addHandler(handler)
    request_logger.setLevel(logging.INFO)
    request_logger.propagate = False
    path = f"{API}/versions/coco@latest"
    samples: dict[str, list[float]] = {name: [] for name in CONFIGURATIONS}
    try:
        with database("postgres", workdir) as url:
            with serve(url, 1, workdir) as server:
                publish_small(server.url)
            for _ in range(rounds):
                apps = {
                    name: create_app(_settings(url, workdir, env))
                    for name, env in CONFIGURATIONS.items()
                }
                for name, value in asyncio.run(_interleaved(apps, path, requests, 100)).items():
                    samples[name].append(value)
    finally:
        request_logger.removeHandler(handler)
        handler.close()
    lines = (workdir / "requests.log").read_text().count("\n")
    assert lines >= rounds * requests, lines  # the default configuration did log every request
    peer = statistics.median(samples["bare"])
    return {
        name: {
            "cpu_us_per_request": statistics.median(values),
            "ratio_to_bare": statistics.median(values) / peer,
            "rounds": len(values),
        }
        for name, values in samples.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--socket", action="store_true", help="also load servers over sockets")
    args = parser.parse_args()
    tool = "wrk" if shutil.which("wrk") else "python/httpx load generator"
    print(
        f"# observability overhead on resolve ({os.cpu_count()} CPUs, load: {tool}, "
        f"{args.connections} connections, {args.seconds:.0f} s x {args.rounds} rounds)"
    )
    print(f"# load average before: {os.getloadavg()[0]:.2f}\n")
    path = f"{API}/versions/coco@latest"
    report: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="rk-bench-obs-") as tmp:
        workdir = Path(tmp)
        cpu = bench_in_process(args.rounds, args.requests, workdir)
        for name, m in cpu.items():
            print(
                f"in-process {name:8s}: {m['cpu_us_per_request']:6.0f} us CPU per resolve "
                f"= {m['ratio_to_bare']:.2f}x bare "
                f"({args.requests} requests x {args.rounds} rounds)"
            )
        report["in-process"] = cpu
        for workers in (int(w) for w in args.workers.split(",")) if args.socket else ():
            runs: dict[str, list[tuple[float, float, float]]] = {c: [] for c in CONFIGURATIONS}
            with database("postgres", workdir) as url:
                published = False
                for _ in range(args.rounds):
                    for name, env in CONFIGURATIONS.items():
                        with serve(url, workers, workdir, env=env) as server:
                            if not published:  # one version, resolved by every server
                                publish_small(server.url)
                                published = True
                            load(server, path, args.connections, 1.0)  # warm-up
                            result = load(server, path, args.connections, args.seconds)
                            assert result.errors == 0 or name != "bare", result
                            runs[name].append(
                                (result.rps, result.p50_ms, result.cpu_us_per_request or 0.0)
                            )
            medians = {
                name: {
                    "rps": statistics.median(r[0] for r in values),
                    "p50_ms": statistics.median(r[1] for r in values),
                    "cpu_us_per_request": statistics.median(r[2] for r in values),
                }
                for name, values in runs.items()
            }
            peer = medians["bare"]["rps"]
            for name, m in medians.items():
                m["ratio_to_bare"] = m["rps"] / peer
                print(
                    f"workers={workers} {name:8s}: {m['rps']:7.0f} req/s  p50 {m['p50_ms']:5.2f} ms"
                    f"  worker CPU {m['cpu_us_per_request']:5.0f} us/req  "
                    f"= {m['ratio_to_bare']:.2f}x bare"
                )
            report[f"workers={workers}"] = medians
    print(f"\n# load average after: {os.getloadavg()[0]:.2f}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_observability.json").write_text(json.dumps(report, indent=2))
    print(f"# written to {OUT / 'bench_observability.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

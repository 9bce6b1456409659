#!/usr/bin/env python3
"""Benchmark of the registry service over real sockets.

1. **Resolve throughput**: ``recordkeeper serve`` (uvicorn) on PostgreSQL and on SQLite, with 1
   and with 2 worker processes; a small committed version is published, then
   ``GET /api/v1/versions/coco@latest`` is loaded from *another process* with 8 keep-alive
   connections for ~10 s (``wrk`` when installed, else a Python multi-process load generator).
   Reported: req/s, p50/p99 latency, worker CPU per request, and the same load on ``/healthz``
   of the same server as the peer (the framework's ceiling on this machine).  Keep-alive latency
   is measured separately with one connection and sequential requests from a Python client
   (``httpx``), next to fresh-connection latency, which exposes Nagle/delayed-ACK stalls.
2. **Bulk registration**: 10,000 shards registered in one request, then committed (seconds);
   ``--shards 100000`` registers in batches of 10,000 and reads the shards back in compact
   pages (a version too large for one answer).

Usage::

    .venv/bin/python bench/bench_service.py                 # everything (~2 min)
    .venv/bin/python bench/bench_service.py --quick         # 3 s loads, PostgreSQL only
    .venv/bin/python bench/bench_service.py --backends sqlite --workers 1

PostgreSQL: ``RECORDKEEPER_BENCH_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``)
names a database whose role may ``CREATE DATABASE``; a scratch database is created and dropped.
Results are printed and written to ``bench/out/bench_service.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from recordkeeper_service import migrate
from recordkeeper_service.db import Database

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
API = "/api/v1"
PG_ADMIN = os.environ.get(
    "RECORDKEEPER_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
#: The figure the issue quotes for MLflow's tracking server (runs/get) on this machine class.
MLFLOW_RUNS_GET_RPS = 140


# ------------------------------------------------------------------------------ databases


@contextlib.contextmanager
def database(backend: str, workdir: Path) -> Iterator[str]:
    """A fresh, migrated registry database URL on ``backend``; dropped afterwards."""
    if backend == "sqlite":
        url = f"sqlite:///{workdir / f'bench-{uuid.uuid4().hex[:8]}.db'}"
        _migrate(url)
        yield url
        return
    admin = Database(PG_ADMIN, pool_size=1)
    name = f"rk_bench_{uuid.uuid4().hex[:10]}"
    with admin.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
            f'CREATE DATABASE "{name}"'
        )
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    try:
        _migrate(url)
        yield url
    finally:
        with admin.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
            )
        admin.dispose()


def _migrate(url: str) -> None:
    db = Database(url, pool_size=1)
    try:
        migrate.upgrade(db)
    finally:
        db.dispose()


# ------------------------------------------------------------------------------ the server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    store: str

    def cpu_seconds(self) -> float:
        """CPU time (user + system) of the server and its worker processes."""
        total = 0.0
        tick = os.sysconf("SC_CLK_TCK")
        for pid in [self.process.pid, *_children(self.process.pid)]:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick
        return total


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            for child in map(int, text):
                found += [child, *_children(child)]
    return found


@contextlib.contextmanager
def serve(
    url: str,
    workers: int,
    workdir: Path,
    extra: list[str] | None = None,
    plain: bool = False,
    env: dict[str, str] | None = None,
) -> Iterator[Server]:
    """``recordkeeper serve`` (or, with ``plain``, bare ``uvicorn --workers``) on a free port;
    ``env`` overrides the environment (``RECORDKEEPER_LOG_LEVEL`` is ``warning`` unless set)."""
    port = _free_port()
    store = (workdir / "store").as_uri() + "/"
    env = {
        **os.environ,
        "RECORDKEEPER_DATABASE_URL": url,
        "RECORDKEEPER_STORAGE_ROOT": store,
        "RECORDKEEPER_LOG_LEVEL": "warning",
        **(env or {}),
    }
    log = open(workdir / f"serve-{port}.log", "wb")  # noqa: SIM115
    if plain:
        app = "recordkeeper_service.app:app_from_env"
        argv = [sys.executable, "-m", "uvicorn", "--factory", "--no-access-log", app]
    else:
        argv = [sys.executable, "-m", "recordkeeper_service", "serve"]
    process = subprocess.Popen(
        [*argv, "--port", str(port), "--workers", str(workers), *(extra or [])],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited: {(workdir / f'serve-{port}.log').read_text()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("server not ready after 60 s")
            time.sleep(0.1)
        time.sleep(0.5 * workers)  # let every worker finish its start-up
        yield Server(url=base, process=process, store=store)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


# ------------------------------------------------------------------------------ data


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def shard_bodies(prefix: str, count: int, split: str = "train") -> list[dict[str, Any]]:
    schema = {
        "record_type": "example",
        "record_count": 100,
        "features": [
            {
                "name": "image/encoded",
                "kind": "bytes",
                "min_count": 1,
                "max_count": 1,
                "present_count": 100,
            },
            {
                "name": "label",
                "kind": "int64",
                "min_count": 1,
                "max_count": 3,
                "present_count": 100,
            },
        ],
    }
    return [
        {
            "split": split,
            "index": i,
            "count": count,
            "uri": f"{prefix}{split}-{i:05d}-of-{count:05d}.tfrecord.gz",
            "compression": "gzip",
            "size": 1_000_000 + i,
            "sha256": _sha(f"s{split}{i}"),
            "crc32c": f"{i:08x}",
            "records_sha256": _sha(f"r{split}{i}"),
            "record_count": 100,
            "schema": schema,
            "storage_identity": {"backend": "file", "mtime_ns": 1, "size": 1_000_000 + i},
        }
        for i in range(count)
    ]


def publish_small(base: str) -> str:
    """A committed version with 2 splits of 4 shards; returns its name."""
    with httpx.Client(base_url=base, timeout=60) as client:
        version = client.post(f"{API}/datasets/coco/versions", json={"desc": "bench"}).json()
        bodies = shard_bodies(version["storage_prefix"], 4) + shard_bodies(
            version["storage_prefix"], 4, split="validation"
        )
        client.post(f"{API}/versions/{version['name']}/shards", json={"shards": bodies})
        committed = client.post(f"{API}/versions/{version['name']}/commit", json={})
        committed.raise_for_status()
        return str(version["name"])


# ------------------------------------------------------------------------------ load


@dataclass
class Load:
    path: str
    tool: str
    seconds: float
    requests: int
    errors: int
    rps: float
    p50_ms: float
    p99_ms: float
    cpu_us_per_request: float | None = None


_WRK_LATENCY = re.compile(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)


def _ms(value: str, unit: str) -> float:
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def load_wrk(url: str, connections: int, seconds: float) -> Load:
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds:.0f}s", "--latency", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    errors = 0
    if match := re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        errors += int(match.group(1))
    if match := re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out
    ):
        errors += sum(int(g) for g in match.groups())
    lat = {p: _ms(v, u) for p, v, u in _WRK_LATENCY.findall(out)}
    return Load(url, "wrk", seconds, total, errors, rps, lat["50"], lat["99"])


def _py_worker(url: str, seconds: float, queue: Any) -> None:
    latencies: list[float] = []
    errors = 0
    with httpx.Client(timeout=30) as client:
        client.get(url)
        deadline = time.perf_counter() + seconds
        while (start := time.perf_counter()) < deadline:
            response = client.get(url)
            latencies.append(time.perf_counter() - start)
            errors += response.status_code != 200
    queue.put((latencies, errors))


def load_python(url: str, connections: int, seconds: float) -> Load:
    """Fallback load generator: one process per connection, keep-alive httpx clients."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    procs = [
        context.Process(target=_py_worker, args=(url, seconds, queue)) for _ in range(connections)
    ]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    latencies = sorted(x for lat, _ in results for x in lat)
    errors = sum(e for _, e in results)
    return Load(
        url,
        "python/httpx",
        seconds,
        len(latencies),
        errors,
        len(latencies) / seconds,
        _percentile(latencies, 50) * 1000,
        _percentile(latencies, 99) * 1000,
    )


def _percentile(sorted_values: list[float], pct: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, round(pct / 100 * (len(sorted_values) - 1)))
    return sorted_values[index]


def load(server: Server, path: str, connections: int, seconds: float) -> Load:
    url = server.url + path
    before = server.cpu_seconds()
    result = (load_wrk if shutil.which("wrk") else load_python)(url, connections, seconds)
    used = server.cpu_seconds() - before
    result.cpu_us_per_request = used / max(result.requests, 1) * 1e6
    result.path = path
    return result


@dataclass
class Latency:
    kind: str
    p50_ms: float
    p99_ms: float
    max_ms: float


def sequential_latency(base: str, path: str, n: int, keep_alive: bool) -> Latency:
    """One client, requests one after the other (keep-alive or a new connection each)."""
    samples: list[float] = []
    if keep_alive:
        with httpx.Client(base_url=base, timeout=30) as client:
            client.get(path)
            for _ in range(n):
                start = time.perf_counter()
                client.get(path).raise_for_status()
                samples.append(time.perf_counter() - start)
    else:
        with httpx.Client(base_url=base, timeout=30) as client:
            for _ in range(n):
                start = time.perf_counter()
                client.get(path, headers={"Connection": "close"}).raise_for_status()
                samples.append(time.perf_counter() - start)
    samples.sort()
    return Latency(
        "keep-alive" if keep_alive else "new connection",
        _percentile(samples, 50) * 1000,
        _percentile(samples, 99) * 1000,
        samples[-1] * 1000,
    )


# ------------------------------------------------------------------------------ scenarios


@dataclass
class ResolveResult:
    backend: str
    workers: int
    resolve: Load
    healthz: Load
    latency: list[Latency] = field(default_factory=list)
    #: resolve req/s / /healthz req/s of each alternating pair (the figure issue 12 compares)
    ratios: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        if not self.ratios:
            return self.resolve.rps / self.healthz.rps
        return statistics.median(self.ratios)


def bench_resolve(
    backend: str, workers: int, seconds: float, connections: int, workdir: Path, rounds: int = 4
) -> ResolveResult:
    with database(backend, workdir) as url, serve(url, workers, workdir) as server:
        publish_small(server.url)
        path = f"{API}/versions/coco@latest"
        httpx.get(server.url + path).raise_for_status()
        load(server, path, connections, min(2.0, seconds))  # warm-up: caches, prepared stmts
        # Resolve and /healthz take turns (the machine's load drifts alike for both); the
        # figures are the medians, the ratio the median of each pair's ratio.
        pairs = []
        for _ in range(rounds):
            resolved = load(server, path, connections, seconds / rounds)
            pairs.append((resolved, load(server, "/healthz", connections, seconds / rounds)))
        latency = [
            sequential_latency(server.url, path, 300, keep_alive=True),
            sequential_latency(server.url, path, 100, keep_alive=False),
        ]
        by_rps = sorted(pairs, key=lambda pair: pair[0].rps)
        middle = by_rps[len(by_rps) // 2]
        healthz = sorted((h for _, h in pairs), key=lambda h: h.rps)[len(pairs) // 2]
        ratios = [r.rps / h.rps for r, h in pairs]
        return ResolveResult(backend, workers, middle[0], healthz, latency, ratios)


@dataclass
class StallResult:
    server: str
    keep_alive: Latency


def bench_nagle(workdir: Path) -> list[StallResult]:
    """Keep-alive latency with 2 workers on the asyncio loop + h11: bare ``uvicorn --workers``
    (listening socket without TCP_NODELAY) against ``recordkeeper serve`` (with it)."""
    results = []
    with database("sqlite", workdir) as url:
        for plain in (True, False):
            name = "uvicorn --workers 2" if plain else "recordkeeper serve --workers 2"
            extra = ["--loop", "asyncio", "--http", "h11"]
            with serve(url, 2, workdir, extra=extra, plain=plain) as server:
                latency = sequential_latency(server.url, "/healthz", 200, keep_alive=True)
                results.append(StallResult(f"{name} (asyncio, h11)", latency))
    return results


@dataclass
class BulkResult:
    backend: str
    shards: int
    register_seconds: float
    commit_seconds: float
    resolve_seconds: float

    @property
    def total(self) -> float:
        return self.register_seconds + self.commit_seconds


def bench_bulk(backend: str, shards: int, workdir: Path) -> BulkResult:
    with (
        database(backend, workdir) as url,
        serve(url, 1, workdir) as server,
        httpx.Client(base_url=server.url, timeout=300) as client,
    ):
        version = client.post(f"{API}/datasets/big/versions", json={}).json()
        every = shard_bodies(version["storage_prefix"], shards)
        headers = {"Content-Type": "application/json"}
        batches = [  # at most 10,000 shards per request, as the client sends them
            json.dumps({"shards": every[i : i + 10_000]}) for i in range(0, shards, 10_000)
        ]
        start = time.perf_counter()
        for body in batches:
            client.post(
                f"{API}/versions/{version['name']}/shards", content=body, headers=headers
            ).raise_for_status()
        registered = time.perf_counter()
        client.post(f"{API}/versions/{version['name']}/commit", json={}).raise_for_status()
        committed = time.perf_counter()
        if shards <= 10_000:
            client.get(f"{API}/versions/big@latest").raise_for_status()
        else:  # larger versions are read in pages
            after: str | None = None
            while True:
                params = {"form": "compact", **({"after": after} if after else {})}
                page = client.get(f"{API}/versions/big@latest/shards", params=params)
                after = page.raise_for_status().json()["next"]
                if after is None:
                    break
        resolved = time.perf_counter()
        return BulkResult(
            backend, shards, registered - start, committed - registered, resolved - committed
        )


# ------------------------------------------------------------------------------ main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="postgres,sqlite")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument(
        "--seconds", type=float, default=20.0, help="resolve load in all (alternating pairs)"
    )
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--shards", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="3 s loads, PostgreSQL only")
    parser.add_argument("--only-bulk", action="store_true", help="only the bulk registration")
    args = parser.parse_args()
    backends = ["postgres"] if args.quick else args.backends.split(",")
    seconds = 3.0 if args.quick else args.seconds
    workers = [int(w) for w in args.workers.split(",")]
    tool = "wrk" if shutil.which("wrk") else "python/httpx load generator"
    print(
        f"# recordkeeper service benchmark ({os.cpu_count()} CPUs, load: {tool}, "
        f"{args.connections} keep-alive connections, {seconds:.0f} s)"
    )
    print(f"# load average before: {os.getloadavg()[0]:.2f}\n")

    resolve_results: list[ResolveResult] = []
    bulk_results: list[BulkResult] = []
    with tempfile.TemporaryDirectory(prefix="rk-bench-") as tmp:
        workdir = Path(tmp)
        for backend in [] if args.only_bulk else backends:
            for w in workers:
                result = bench_resolve(backend, w, seconds, args.connections, workdir)
                resolve_results.append(result)
                r, h = result.resolve, result.healthz
                print(
                    f"resolve coco@latest  {backend:8s} workers={w}: {r.rps:7.0f} req/s  "
                    f"p50 {r.p50_ms:6.2f} ms  p99 {r.p99_ms:6.2f} ms  "
                    f"worker CPU {r.cpu_us_per_request:5.0f} us/req  errors {r.errors}  "
                    f"| /healthz {h.rps:6.0f} req/s (resolve = {result.ratio:.0%} of it, median of "
                    f"{len(result.ratios)} alternating pairs: "
                    f"{'/'.join(f'{x:.0%}' for x in result.ratios)}; "
                    f"{r.rps / MLFLOW_RUNS_GET_RPS:.1f}x MLflow runs/get's ~140 req/s)"
                )
                for lat in result.latency:
                    print(
                        f"    sequential, {lat.kind:15s} p50 {lat.p50_ms:6.2f} ms  "
                        f"p99 {lat.p99_ms:6.2f} ms  max {lat.max_ms:6.2f} ms"
                    )
        for stall in [] if args.only_bulk else bench_nagle(workdir):
            lat = stall.keep_alive
            print(
                f"keep-alive latency, {stall.server:45s} p50 {lat.p50_ms:6.2f} ms  "
                f"p99 {lat.p99_ms:6.2f} ms"
            )
        for backend in backends:
            bulk = bench_bulk(backend, args.shards, workdir)
            bulk_results.append(bulk)
            print(
                f"register {bulk.shards:,} shards (requests of <= 10,000) + commit, {backend:8s}: "
                f"{bulk.total:5.2f} s (register {bulk.register_seconds:.2f} s, commit "
                f"{bulk.commit_seconds:.2f} s; first resolve with all shards "
                f"{bulk.resolve_seconds:.2f} s)"
            )
    print(f"\n# load average after: {os.getloadavg()[0]:.2f}")
    OUT.mkdir(parents=True, exist_ok=True)
    report = {
        "cpus": os.cpu_count(),
        "tool": tool,
        "connections": args.connections,
        "seconds": seconds,
        "resolve": [asdict(r) for r in resolve_results],
        "bulk": [{**asdict(b), "total": b.total} for b in bulk_results],
        "median_resolve_rps": (
            statistics.median(r.resolve.rps for r in resolve_results) if resolve_results else None
        ),
    }
    (OUT / "bench_service.json").write_text(json.dumps(report, indent=2))
    print(f"# written to {OUT / 'bench_service.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The load driver shared by ``bench/bench_load.py`` and ``tests/integration/test_load.py``.

``recordkeeper serve --workers N`` runs on a free loopback port over a PostgreSQL database with
``RECORDKEEPER_AUTH=required``; a write token and a read token are created in the database before
it starts.  Two client processes (so the clients do not share one GIL with each other) drive it
for a bounded time:

* **publishers** (one asyncio process, one keep-alive connection each): stage a version of one of
  a few shared datasets → register a few shards (metadata only: synthetic hashes, ``file`` URIs
  under the version's own prefix, which the registry accepts without reading them) → commit,
  in a loop;
* **resolvers** (another asyncio process): ``GET /versions/{name}`` of a random acknowledged
  commit, or ``GET /versions/{dataset}@latest``, in a loop.

The main process samples the RSS of the uvicorn worker processes every ``rss_interval`` seconds.
Afterwards every acknowledged commit is resolved again and compared (state, content digest), and
the version numbers of the acknowledged commits per dataset are checked for duplicates and gaps
(numbers are given at commit).

:func:`run_load` returns a :class:`LoadReport`; nothing here asserts — callers decide.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import multiprocessing
import os
import queue as queue_module
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

API = "/api/v1"
DATE = "20260101"
SERVE = [sys.executable, "-m", "recordkeeper_service", "serve"]


# ------------------------------------------------------------------------------ the server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _create_tokens(database_url: str) -> dict[str, str]:
    """Migrate ``database_url`` and create a write and a read token; returns their secrets."""
    from recordkeeper_service import migrate
    from recordkeeper_service.db import Database
    from recordkeeper_service.repository.tokens import TokenRepository

    database = Database(database_url, pool_size=1)
    try:
        migrate.upgrade(database)
        tokens = TokenRepository(database)
        _, write = tokens.create("load-publisher", "write", actor="load")
        _, read = tokens.create("load-resolver", "read", actor="load")
    finally:
        database.dispose()
    return {"write": write, "read": read}


@dataclass
class Served:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def workers(self) -> list[int]:
        """PIDs of the uvicorn worker processes (children of the supervisor, not helpers)."""
        found = []
        for pid in _children(self.process.pid):
            with contextlib.suppress(OSError):
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                if b"resource_tracker" not in cmdline:
                    found.append(pid)
        return found or [self.process.pid]


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (0 once it is gone)."""
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (``VmRSS`` from /proc; 0 once it is gone)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def serve(
    database_url: str, workdir: Path, *, workers: int = 2, cache_bytes: int | None = None
) -> Iterator[tuple[Served, dict[str, str]]]:
    """``python -m recordkeeper_service serve --workers N`` with ``RECORDKEEPER_AUTH=required``;
    yields the server and the token secrets (``write``, ``read``)."""
    tokens = _create_tokens(database_url)
    port = _free_port()
    store = (workdir / "store").as_uri() + "/"
    env = {
        **os.environ,
        "RECORDKEEPER_DATABASE_URL": database_url,
        "RECORDKEEPER_STORAGE_ROOT": store,
        "RECORDKEEPER_ALLOWED_ROOTS": store,
        "RECORDKEEPER_AUTH": "required",
        "RECORDKEEPER_LOG_LEVEL": "warning",
    }
    if cache_bytes is not None:
        env["RECORDKEEPER_VERSION_CACHE_BYTES"] = str(cache_bytes)
    log = workdir / f"serve-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [*SERVE, "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    served = Served(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + 60
        ready = 0
        while ready < 4:
            if process.poll() is not None:
                raise RuntimeError(f"the service exited:\n{log.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the service is not ready after 60 s:\n{log.read_text()}")
            with contextlib.suppress(httpx.TransportError):
                ready += httpx.get(f"{served.url}/readyz", timeout=2).status_code == 200
            time.sleep(0.1)
        while len(_children(process.pid)) < workers and time.monotonic() < deadline:
            time.sleep(0.1)
        yield served, tokens
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)


# ------------------------------------------------------------------------------ the clients


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def shard_bodies(prefix: str, count: int, tag: str) -> list[dict[str, Any]]:
    """``count`` small shards under ``prefix``; ``tag`` makes their hashes unique."""
    return [
        {
            "split": "train",
            "index": i,
            "count": count,
            "uri": f"{prefix}train-{i:05d}-of-{count:05d}.tfrecord",
            "compression": "none",
            "size": 1000 + i,
            "sha256": _sha(f"stored:{tag}:{i}"),
            "crc32c": f"{i:08x}",
            "records_sha256": _sha(f"records:{tag}:{i}"),
            "record_count": 10,
            "schema": {
                "record_type": "example",
                "record_count": 10,
                "features": [
                    {
                        "name": "label",
                        "kind": "int64",
                        "min_count": 1,
                        "max_count": 1,
                        "present_count": 10,
                    }
                ],
            },
            "storage_identity": {"backend": "file", "mtime_ns": 1, "size": 1000 + i},
        }
        for i in range(count)
    ]


def _error_key(response: httpx.Response | None, exc: BaseException | None = None) -> str:
    if response is None:
        return f"transport:{type(exc).__name__}"
    code = ""
    with contextlib.suppress(Exception):
        code = str(response.json().get("code", ""))
    return f"{response.status_code}:{code}"


@dataclass
class _ClientResult:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)
    staged: list[tuple[str, str]] = field(default_factory=list)  # dataset, staged name
    committed: list[tuple[str, int, str, str]] = field(default_factory=list)  # + digest
    completed: int = 0
    cpu_seconds: float = 0.0


async def _publisher(
    index: int,
    url: str,
    token: str,
    datasets: int,
    shards: int,
    deadline: float,
    result: _ClientResult,
    out: Any,
) -> None:
    dataset = f"load{index % datasets}"
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            step = "stage"
            response: httpx.Response | None = None
            try:
                t0 = time.perf_counter()
                response = await client.post(
                    f"{API}/datasets/{dataset}/versions", json={"date": DATE}
                )
                if response.status_code != 201:
                    result.errors[f"stage {_error_key(response)}"] += 1
                    continue
                result.latencies.setdefault("stage", []).append(time.perf_counter() - t0)
                version = response.json()
                name = version["name"]
                result.staged.append((dataset, name))
                step = "register"
                t0 = time.perf_counter()
                body = {"shards": shard_bodies(version["storage_prefix"], shards, name)}
                response = await client.post(f"{API}/versions/{name}/shards", json=body)
                if response.status_code != 200:
                    result.errors[f"register {_error_key(response)}"] += 1
                    continue
                result.latencies.setdefault("register", []).append(time.perf_counter() - t0)
                step = "commit"
                t0 = time.perf_counter()
                response = await client.post(f"{API}/versions/{name}/commit", json={})
                if response.status_code != 200:
                    result.errors[f"commit {_error_key(response)}"] += 1
                    continue
                now = time.perf_counter()
                result.latencies.setdefault("commit", []).append(now - t0)
                result.latencies.setdefault("publish", []).append(now - started)
                committed = response.json()
                final = committed["name"]  # the rk1 name given at commit
                entry = (dataset, int(committed["number"]), final, committed["content_digest"])
                result.committed.append(entry)
                result.completed += 1
                out.put(final)
            except httpx.HTTPError as exc:
                result.errors[f"{step} {_error_key(None, exc)}"] += 1


async def _resolver(
    url: str,
    token: str,
    datasets: int,
    deadline: float,
    names: list[str],
    result: _ClientResult,
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    rng = random.Random()
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        while time.monotonic() < deadline:
            if names and rng.random() < 0.5:
                ref = rng.choice(names)
            else:
                ref = f"load{rng.randrange(datasets)}@latest"
            t0 = time.perf_counter()
            try:
                response = await client.get(f"{API}/versions/{ref}")
            except httpx.HTTPError as exc:
                result.errors[f"resolve {_error_key(None, exc)}"] += 1
                continue
            if response.status_code == 200:
                result.latencies.setdefault("resolve", []).append(time.perf_counter() - t0)
                result.completed += 1
            else:
                result.errors[f"resolve {_error_key(response)}"] += 1


async def _drain(incoming: Any, names: list[str], deadline: float) -> None:
    while time.monotonic() < deadline:
        with contextlib.suppress(queue_module.Empty):
            while True:
                names.append(incoming.get_nowait())
        await asyncio.sleep(0.2)


def _publishers_main(
    url: str,
    token: str,
    count: int,
    datasets: int,
    shards: int,
    seconds: float,
    out: Any,
    results: Any,
) -> None:
    result = _ClientResult()
    deadline = time.monotonic() + seconds

    async def main() -> None:
        await asyncio.gather(
            *(
                _publisher(i, url, token, datasets, shards, deadline, result, out)
                for i in range(count)
            )
        )

    asyncio.run(main())
    result.cpu_seconds = time.process_time()
    # Names committed after the resolvers stopped draining are not needed: never block on them.
    out.cancel_join_thread()
    results.put(("publishers", asdict(result)))


def _resolvers_main(
    url: str,
    token: str,
    count: int,
    datasets: int,
    seconds: float,
    seed_names: list[str],
    incoming: Any,
    results: Any,
) -> None:
    result = _ClientResult()
    names = list(seed_names)
    deadline = time.monotonic() + seconds

    async def main() -> None:
        await asyncio.gather(
            _drain(incoming, names, deadline),
            *(_resolver(url, token, datasets, deadline, names, result) for _ in range(count)),
        )

    asyncio.run(main())
    result.cpu_seconds = time.process_time()
    results.put(("resolvers", asdict(result)))


# ------------------------------------------------------------------------------ the run


@dataclass
class Stats:
    count: int
    per_second: float
    p50_ms: float
    p99_ms: float
    max_ms: float


def _stats(samples: list[float], seconds: float) -> Stats:
    ordered = sorted(samples)
    if not ordered:
        return Stats(0, 0.0, float("nan"), float("nan"), float("nan"))

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] * 1000

    return Stats(len(ordered), len(ordered) / seconds, pct(50), pct(99), ordered[-1] * 1000)


@dataclass
class RssSample:
    at_seconds: float
    rss_mib: dict[int, float]


@dataclass
class LoadReport:
    workers: int
    publishers: int
    resolvers: int
    seconds: float
    datasets: int
    shards_per_version: int
    cpus: int | None
    load_average_before: tuple[float, float, float]
    load_average_after: tuple[float, float, float]
    publish: Stats
    stage: Stats
    register: Stats
    commit: Stats
    resolve: Stats
    errors: dict[str, int]
    staged: int
    acknowledged_commits: int
    duplicate_numbers: list[str]
    missing_numbers: list[str]
    unresolvable_commits: list[str]
    rss: list[RssSample]
    rss_warmup_seconds: float
    rss_growth_mib: dict[int, float]
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    server_log_tail: str = ""

    @property
    def server_errors(self) -> int:
        return sum(n for key, n in self.errors.items() if key.split(" ", 1)[1].startswith("5"))

    def summary(self) -> str:
        lines = [
            f"# load: {self.publishers} publishers + {self.resolvers} resolvers, "
            f"{self.workers} workers, {self.seconds:.0f} s, {self.cpus} CPUs, load average "
            f"before {self.load_average_before[0]:.2f} / after {self.load_average_after[0]:.2f}",
        ]
        for label, stats in (
            ("publish (stage+register+commit)", self.publish),
            ("  stage", self.stage),
            ("  register", self.register),
            ("  commit", self.commit),
            ("resolve", self.resolve),
        ):
            lines.append(
                f"{label:32s} {stats.count:7d}  {stats.per_second:7.1f}/s  p50 "
                f"{stats.p50_ms:7.1f} ms  p99 {stats.p99_ms:7.1f} ms  max {stats.max_ms:7.1f} ms"
            )
        if self.cpu_seconds:
            used = ", ".join(f"{k} {v:.0f} s" for k, v in self.cpu_seconds.items())
            lines.append(
                f"CPU used during the run: {used} "
                f"(of {self.seconds * (self.cpus or 1):.0f} CPU-seconds available)"
            )
        lines.append(f"errors: {dict(self.errors) or 0}")
        lines.append(
            f"acknowledged: {self.staged} stages, {self.acknowledged_commits} commits; "
            f"duplicate numbers {self.duplicate_numbers or 0}, missing numbers "
            f"{self.missing_numbers or 0}, unresolvable commits {len(self.unresolvable_commits)}"
        )
        if self.rss:
            first, last = self.rss[0], self.rss[-1]
            warm = _sample_at(self.rss, self.rss_warmup_seconds)
            for pid in last.rss_mib:
                lines.append(
                    f"worker {pid} RSS MiB: start {first.rss_mib.get(pid, 0):.1f}, after "
                    f"warm-up ({warm.at_seconds:.0f} s) {warm.rss_mib.get(pid, 0):.1f}, middle "
                    f"{self.rss[len(self.rss) // 2].rss_mib.get(pid, 0):.1f}, end "
                    f"{last.rss_mib[pid]:.1f} ({self.rss_growth_mib.get(pid, 0):+.1f} "
                    "since warm-up)"
                )
        return "\n".join(lines)


def _sample_at(samples: list[RssSample], seconds: float) -> RssSample:
    return next((s for s in samples if s.at_seconds >= seconds), samples[-1])


def _verify(
    url: str, token: str, committed: list[tuple[str, int, str, str]]
) -> tuple[list[str], Counter[str]]:
    """Resolve every acknowledged commit again; returns the ones that do not match."""
    bad: list[str] = []
    errors: Counter[str] = Counter()

    async def check(client: httpx.AsyncClient, entry: tuple[str, int, str, str]) -> None:
        _, number, name, digest = entry
        try:
            response = await client.get(f"{API}/versions/{name}")
        except httpx.HTTPError as exc:
            errors[f"verify {_error_key(None, exc)}"] += 1
            bad.append(name)
            return
        if response.status_code != 200:
            errors[f"verify {_error_key(response)}"] += 1
            bad.append(name)
            return
        body = response.json()
        if (body["state"], body["content_digest"], body["number"]) != (
            "committed",
            digest,
            number,
        ):
            bad.append(name)

    async def main() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
            pending = list(committed)
            while pending:
                batch, pending = pending[:16], pending[16:]
                await asyncio.gather(*(check(client, entry) for entry in batch))

    asyncio.run(main())
    return bad, errors


def _numbering(committed: list[tuple[str, int, str, str]]) -> tuple[list[str], list[str]]:
    """Duplicate and missing version numbers among the acknowledged commits, per dataset."""
    per_dataset: dict[str, list[int]] = {}
    for dataset, number, _, _ in committed:
        per_dataset.setdefault(dataset, []).append(number)
    duplicates, missing = [], []
    for dataset, numbers in sorted(per_dataset.items()):
        counts = Counter(numbers)
        duplicates += [f"{dataset} v{n}" for n, c in sorted(counts.items()) if c > 1]
        missing += [f"{dataset} v{n}" for n in range(1, max(numbers) + 1) if n not in counts]
    return duplicates, missing


def run_load(
    served: Served,
    tokens: dict[str, str],
    *,
    publishers: int = 32,
    resolvers: int = 64,
    seconds: float = 120.0,
    datasets: int = 8,
    shards: int = 4,
    rss_interval: float = 2.0,
    warmup_fraction: float = 0.25,
) -> LoadReport:
    """Drive ``served`` for ``seconds``; see the module docstring."""
    load_before = os.getloadavg()
    # A first committed version per dataset, so ``@latest`` resolves from the start.
    seed: list[tuple[str, int, str, str]] = []
    seed_staged: list[tuple[str, str]] = []
    headers = {"Authorization": f"Bearer {tokens['write']}"}
    with httpx.Client(base_url=served.url, headers=headers, timeout=60) as client:
        for d in range(datasets):
            version = client.post(f"{API}/datasets/load{d}/versions", json={"date": DATE})
            version.raise_for_status()
            name = version.json()["name"]
            body = {"shards": shard_bodies(version.json()["storage_prefix"], shards, name)}
            client.post(f"{API}/versions/{name}/shards", json=body).raise_for_status()
            done = client.post(f"{API}/versions/{name}/commit", json={})
            done.raise_for_status()
            seed_staged.append((f"load{d}", name))
            seed.append(
                (
                    f"load{d}",
                    int(done.json()["number"]),
                    done.json()["name"],
                    done.json()["content_digest"],
                )
            )

    context = multiprocessing.get_context("spawn")
    names_queue = context.Queue()
    results_queue = context.Queue()
    procs = [
        context.Process(
            target=_publishers_main,
            args=(
                served.url,
                tokens["write"],
                publishers,
                datasets,
                shards,
                seconds,
                names_queue,
                results_queue,
            ),
            name="load-publishers",
        ),
        context.Process(
            target=_resolvers_main,
            args=(
                served.url,
                tokens["read"],
                resolvers,
                datasets,
                seconds,
                [entry[2] for entry in seed],
                names_queue,
                results_queue,
            ),
            name="load-resolvers",
        ),
    ]
    samples: list[RssSample] = []
    stop = threading.Event()
    started = time.monotonic()

    def sample() -> None:
        while True:
            rss = {pid: rss_bytes(pid) / 2**20 for pid in served.workers()}
            samples.append(RssSample(round(time.monotonic() - started, 1), rss))
            if stop.wait(rss_interval):
                return

    workers_cpu = sum(cpu_seconds(pid) for pid in served.workers())
    for proc in procs:
        proc.start()
    sampler = threading.Thread(target=sample, name="rss-sampler", daemon=True)
    sampler.start()
    collected: dict[str, dict[str, Any]] = {}
    try:
        while len(collected) < len(procs):
            try:
                kind, data = results_queue.get(timeout=seconds + 120)
            except queue_module.Empty:
                raise RuntimeError("the load clients did not report in time") from None
            collected[kind] = data
        workers_cpu = sum(cpu_seconds(pid) for pid in served.workers()) - workers_cpu
    finally:
        stop.set()
        sampler.join()
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    # names nobody drained are fine: the queue is discarded
    names_queue.cancel_join_thread()

    pub, res = collected["publishers"], collected["resolvers"]
    committed = seed + [tuple(entry) for entry in pub["committed"]]  # type: ignore[misc]
    staged = seed_staged + [tuple(entry) for entry in pub["staged"]]  # type: ignore[misc]
    unresolvable, verify_errors = _verify(served.url, tokens["read"], committed)
    duplicates, missing = _numbering(committed)  # type: ignore[arg-type]
    errors = Counter(pub["errors"]) + Counter(res["errors"]) + verify_errors

    warmup = seconds * warmup_fraction
    growth: dict[int, float] = {}
    if samples:
        warm = _sample_at(samples, warmup)
        last = samples[-1]
        growth = {pid: last.rss_mib[pid] - warm.rss_mib.get(pid, 0.0) for pid in last.rss_mib}
    lat = {**pub["latencies"], **res["latencies"]}
    tail = ""
    with contextlib.suppress(OSError):
        tail = served.log.read_text(errors="replace")[-4000:]
    return LoadReport(
        workers=len(served.workers()),
        publishers=publishers,
        resolvers=resolvers,
        seconds=seconds,
        datasets=datasets,
        shards_per_version=shards,
        cpus=os.cpu_count(),
        load_average_before=load_before,
        load_average_after=os.getloadavg(),
        publish=_stats(lat.get("publish", []), seconds),
        stage=_stats(lat.get("stage", []), seconds),
        register=_stats(lat.get("register", []), seconds),
        commit=_stats(lat.get("commit", []), seconds),
        resolve=_stats(lat.get("resolve", []), seconds),
        errors=dict(errors),
        staged=len(staged),
        acknowledged_commits=len(committed),
        duplicate_numbers=duplicates,
        missing_numbers=missing,
        unresolvable_commits=unresolvable,
        rss=samples,
        rss_warmup_seconds=warmup,
        rss_growth_mib=growth,
        cpu_seconds={
            "service workers": workers_cpu,
            "publisher client": pub["cpu_seconds"],
            "resolver client": res["cpu_seconds"],
        },
        server_log_tail=tail,
    )

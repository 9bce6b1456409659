"""Where a held resolve's time goes (issue 24 item 2: a held resolve of a 10,000-shard version
under 1 ms), with its floors measured in the same run.

A *held* resolve is ``client.resolve("bigres@latest")`` when the client already holds the
answer: one conditional ``GET /api/v1/versions/bigres@latest?shards=false`` answered ``304``.
The service runs in its own process (``recordkeeper serve``, one worker; SQLite by default,
``--backend postgres`` for a scratch database on the test server); the bench's process is the
client alone.  Every round takes one sample of each, in turn, so load changes hit them alike:

* ``raw 304``: a bare ASGI app (no framework) answering ``304``, under uvicorn with the
  settings ``recordkeeper serve`` uses (TCP_NODELAY socket, loop/http auto, no server header,
  no access log), in its own process, asked by ``httpx.Client`` with keep-alive: the floor of
  any request on this machine with this client library and server;
* ``/healthz``: the real app's cheapest route (FastAPI, every middleware);
* ``httpx 304``: the held resolve's very request sent with bare ``httpx.Client`` (the
  service's cost plus transport, none of the client library's);
* ``held``: ``client.resolve("bigres@latest")``.

Then, without any socket: the client library's own CPU per held resolve (``client.resolve``
over an ``httpx.MockTransport`` answering the same ``304``), httpx alone on that transport,
and the server's CPU per request of each kind (its ``/proc`` CPU over a burst of requests).

Run: ``.venv/bin/python bench/bench_held_resolve.py [--samples 300] [--backend postgres]
[--log-level info]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
from bench_service import database, serve  # noqa: E402

import recordkeeper as rk  # noqa: E402
from tests.integration._load import shard_bodies  # noqa: E402

RAW_APP = textwrap.dedent(
    """
    import sys
    import uvicorn
    from recordkeeper_service.server import listening_socket

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await send({"type": "http.response.start", "status": 304,
                    "headers": [(b"etag", b'W/"abc"'), (b"cache-control", b"no-cache")]})
        await send({"type": "http.response.body", "body": b""})

    sock = listening_socket("127.0.0.1", int(sys.argv[1]))
    config = uvicorn.Config(app, log_level="warning", access_log=False, loop="auto",
                            http="auto", lifespan="on", server_header=False,
                            proxy_headers=False)
    uvicorn.Server(config).run(sockets=[sock])
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _worker_pid(pid: int) -> int:
    """The uvicorn worker serving requests (the child of ``recordkeeper serve``, if any)."""
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += map(int, (task / "children").read_text().split())
    return children[0] if children else pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--shards", type=int, default=10_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument(
        "--log-level",
        default="warning",
        help="the service's RECORDKEEPER_LOG_LEVEL (info: the default, a request log line each)",
    )
    parser.add_argument("--cpu-burst", type=int, default=2000)
    parser.add_argument(
        "--profile-client", action="store_true", help="cProfile the client's held resolve"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rk-held-"))
    raw_port = _free_port()
    raw = subprocess.Popen(
        [sys.executable, "-c", RAW_APP, str(raw_port)], start_new_session=True, cwd=ROOT
    )
    try:
        env = {
            "RECORDKEEPER_ALLOWED_ROOTS": work.as_uri(),
            "RECORDKEEPER_LOG_LEVEL": args.log_level,
        }
        with database(args.backend, work) as url, serve(url, 1, work, env=env) as server:
            run(server.url, server.process.pid, raw.pid, f"http://127.0.0.1:{raw_port}", work, args)
            if args.backend == "postgres":
                database_floor(url, args.samples)
    finally:
        raw.terminate()
        raw.wait(timeout=20)
        shutil.rmtree(work, ignore_errors=True)


def run(
    base: str, server_pid: int, raw_pid: int, raw_base: str, work: Path, args: argparse.Namespace
) -> None:
    client = rk.Client(base)
    staged = client.stage("bigres")
    client.register_shards(
        staged, shard_bodies((work / "x").as_uri() + "/", args.shards, tag="bigres")
    )
    client.commit(staged)
    v = client.resolve("bigres@latest")
    assert v.shard_count == args.shards
    offered = client.registry.cache.offered_tags("bigres")
    path = "/api/v1/versions/bigres@latest"
    bare = httpx.Client(timeout=10)
    deadline = time.monotonic() + 30
    while True:
        try:
            assert bare.get(raw_base + "/").status_code == 304
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    cond_headers = {"If-None-Match": ", ".join(offered), "Accept": "application/json"}
    assert (
        bare.get(base + path, params={"shards": "false"}, headers=cond_headers).status_code == 304
    )

    def raw304() -> None:
        bare.get(raw_base + "/", headers=cond_headers)

    def healthz() -> None:
        bare.get(base + "/healthz")

    def httpx304() -> None:
        bare.get(base + path, params={"shards": "false"}, headers=cond_headers)

    def held() -> None:
        client.resolve("bigres@latest")

    kinds: dict[str, Callable[[], None]] = {
        "raw 304": raw304,
        "/healthz": healthz,
        "httpx 304": httpx304,
        "held": held,
    }
    for fn in kinds.values():  # warm
        for _ in range(50):
            fn()
    times: dict[str, list[float]] = {k: [] for k in kinds}
    load_before = os.getloadavg()[0]
    for _ in range(args.samples):
        for kind, fn in kinds.items():
            start = time.perf_counter()
            fn()
            times[kind].append(time.perf_counter() - start)
    load_after = os.getloadavg()[0]
    med = statistics.median
    print(
        f"[held resolve] {args.shards}-shard version, service in its own process "
        f"({args.backend}, log level {args.log_level}), medians of {args.samples}, load "
        f"{load_before:.1f}->{load_after:.1f}:"
    )
    for kind, values in times.items():
        q = statistics.quantiles(values, n=10)
        print(
            f"  {kind:10s} median {med(values) * 1e3:.3f} ms  (p10 {q[0] * 1e3:.3f}, "
            f"p90 {q[-1] * 1e3:.3f})"
        )

    # The server's CPU per request of each kind (a burst of each; /proc CPU ticks are 10 ms).
    worker = _worker_pid(server_pid)
    print(f"  server CPU per request (bursts of {args.cpu_burst}):")
    for kind in ("raw 304", "/healthz", "httpx 304"):
        fn = kinds[kind]
        pid = raw_pid if kind == "raw 304" else worker
        before = _cpu(pid)
        for _ in range(args.cpu_burst):
            fn()
        print(f"    {kind:10s} {(_cpu(pid) - before) / args.cpu_burst * 1e6:.0f} us")

    # The client library's own CPU (no socket): the same 304 from a mock transport.
    etag = bare.get(base + path, params={"shards": "false"}, headers=cond_headers).headers["etag"]

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(304, headers={"etag": etag, "cache-control": "no-cache"})

    mock_http = httpx.Client(transport=httpx.MockTransport(answer), base_url=base)
    mocked = rk.Client(base, http_client=mock_http)
    mocked.registry.cache = client.registry.cache  # the same held answers and splits
    mocked.resolve("bigres@latest")

    def lib() -> None:
        mocked.resolve("bigres@latest")

    def bare_mock() -> None:
        mock_http.get(base + path, params={"shards": "false"}, headers=cond_headers)

    n = 2000
    for label, fn in (("client.resolve, mock transport", lib), ("httpx alone, mock", bare_mock)):
        values = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(n):
                fn()
            values.append((time.perf_counter() - start) / n)
        print(f"  {label:32s} {med(values) * 1e6:.0f} us per call (median of 5 x {n})")
    if args.profile_client:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        for _ in range(n):
            lib()
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)


def database_floor(url: str, samples: int) -> None:
    """PostgreSQL alone, from this process: ``SELECT 1`` and the hot resolve query of
    ``bigres@latest`` on one autocommit psycopg connection (the floor of the service's read)."""
    import psycopg
    from sqlalchemy import select
    from sqlalchemy.dialects import postgresql

    from recordkeeper.core.refs import parse_reference
    from recordkeeper_service.db import normalize_database_url
    from recordkeeper_service.repository.fastpath import HOT_COLUMNS
    from recordkeeper_service.repository.resolve import resolution_params, resolution_statement

    ref = parse_reference("bigres@latest")
    compiled = resolution_statement(select(*HOT_COLUMNS), ref).compile(
        dialect=postgresql.psycopg.dialect()  # type: ignore[no-untyped-call]
    )
    params = {**compiled.params, **resolution_params(ref)}
    conninfo = (
        normalize_database_url(url)
        .set(drivername="postgresql")
        .render_as_string(hide_password=False)
    )
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for label, sql, values in (
            ("SELECT 1", "SELECT 1", {}),
            ("hot query", str(compiled), params),
        ):
            times = []
            for _ in range(samples):
                start = time.perf_counter()
                conn.execute(sql, values).fetchall()
                times.append(time.perf_counter() - start)
            median = statistics.median(times) * 1e3
            print(f"  PostgreSQL {label:9s} from the bench: median {median:.3f} ms")


if __name__ == "__main__":
    main()

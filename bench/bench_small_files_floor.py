#!/usr/bin/env python3
"""The floor under publishing many small local shards: the parts no publish can skip, each
timed alone on the same files in the same run as the publish and its peer (issue 23, item 7).

    .venv/bin/python bench/bench_small_files_floor.py [--files 2000] [--repeat 5]

Printed, medians of ``--repeat`` rounds, in seconds and µs a file:

* **publish in place (ours)** and **sha256 loop (peer)**: what ``bench_small_files.py
  --only local`` times.
* **read + C scan**: each file read whole, then the C scan publish makes of a small
  uncompressed shard (``deframe_keys``: every record CRC, record identities, the schema's
  structure keys) with the file's sha256 and CRC32C: what publish must compute per file.
* **insert 2,000 shard rows (raw sqlite3)**: the ``shards`` table with its indexes as the
  service's migrations create it (its DDL read from the service's own database), the rows
  the service would store (the registrations publish sends), one ``executemany`` of plain
  tuples in one transaction with the service's pragmas (WAL, ``synchronous=NORMAL``), commit.
* **one HTTP request with the 2,000 shard records**: the registrations as JSON (orjson)
  POSTed with httpx to a bare ASGI app on uvicorn (the service's server) that reads the body,
  decodes it with orjson and answers ``{}``: the transport and the JSON both ways, nothing
  else.

The three floor parts added up, against 3x the peer, say whether the target is reachable with
a registry service behind HTTP and a database.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
import orjson  # noqa: E402
from bench_small_files import local_setup, median_runs, sha256_loop  # noqa: E402
from crc32c import crc32c  # noqa: E402

from recordkeeper import _native  # noqa: E402
from recordkeeper.record_ids import RecordIds  # noqa: E402
from recordkeeper.registry import Registry  # noqa: E402


def c_scan(paths: list[Path]) -> None:
    speedups = _native.speedups
    assert speedups is not None, "the C extension is not built"
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        ids = RecordIds()
        hashlib.sha256(data).hexdigest()
        crc32c(data)
        speedups.deframe_keys(data, 0, True, ids.buffer, ids.width)


def sqlite_insert(
    registry_db: Path, work: Path, registrations: list[dict[str, Any]]
) -> Callable[[], None]:
    """A function inserting the registrations' rows into a fresh copy of the shards table."""
    source = sqlite3.connect(registry_db)
    ddl = [
        sql
        for (sql,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'shards' AND sql IS NOT NULL "
            "ORDER BY type DESC"  # the table, then its indexes
        )
    ]
    source.close()
    columns = [
        "version_id",
        "split",
        "index",
        "count",
        "uri",
        "compression",
        "size",
        "sha256",
        "crc32c",
        "records_sha256",
        "record_count",
        "format",
        "schema_digest",
        "storage_identity",
        "registered_at",
    ]
    now = "2026-12-02 00:00:00.000000"
    quoted = ", ".join(f'"{c}"' for c in columns)
    statement = f"INSERT INTO shards ({quoted}) VALUES ({', '.join('?' * len(columns))})"
    round_no = [0]
    target = work / "floor.db"

    def run() -> None:
        round_no[0] += 1
        db = sqlite3.connect(target, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            if round_no[0] == 1:
                for sql in ddl:
                    db.execute(sql)
            start = time.perf_counter()
            rows = [
                (
                    round_no[0],
                    r["split"],
                    r["index"],
                    r["count"],
                    r["uri"],
                    r["compression"],
                    r["size"],
                    r["sha256"],
                    r["crc32c"],
                    r["records_sha256"],
                    r["record_count"],
                    r["format"],
                    None,
                    orjson.dumps(r["storage_identity"]).decode(),
                    now,
                )
                for r in registrations
            ]
            db.execute("BEGIN")
            db.executemany(statement, rows)
            db.execute("COMMIT")
            run.last = time.perf_counter() - start  # type: ignore[attr-defined]
        finally:
            db.close()

    return run


def http_request(
    registrations: list[dict[str, Any]],
) -> tuple[Callable[[], None], Callable[[], None]]:
    """(send one request with the registrations, stop the server)."""
    import uvicorn

    from tests.servers.ports import free_port

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        orjson.loads(body)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": b"{}"})

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}")
    body = {"shards": registrations}

    def send() -> None:
        response = client.post(
            "/register", content=orjson.dumps(body), headers={"content-type": "application/json"}
        )
        response.raise_for_status()

    def stop() -> None:
        client.close()
        server.should_exit = True
        thread.join(10)

    return send, stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = args.files
    work = Path(tempfile.mkdtemp(prefix="rk-smallfloor-"))
    try:
        paths, svc, publish = local_setup(work, n)
        sent: list[list[dict[str, Any]]] = []
        real = Registry.register_shards

        def capture(self: Registry, staged: Any, registrations: Any, *a: Any, **k: Any) -> Any:
            sent.append([dict(r) for r in registrations])
            return real(self, staged, registrations, *a, **k)

        try:
            Registry.register_shards = capture  # type: ignore[method-assign]
            publish()  # warm-up, and the registrations it sends
            Registry.register_shards = real  # type: ignore[method-assign]
            registrations = sent[0]
            insert = sqlite_insert(work / "registry.db", work, registrations)
            send, stop = http_request(registrations)
            try:
                send()
                insert()
                contenders: list[tuple[str, Callable[[], None]]] = [
                    ("publish in place (ours)", publish),
                    ("sha256 loop (peer)", lambda: sha256_loop(paths)),
                    ("read + C scan", lambda: c_scan(paths)),
                    (f"insert {n} shard rows (raw sqlite3)", insert),
                    (f"one HTTP request, {n} shard records", send),
                ]
                runs = median_runs(contenders, args.repeat)
            finally:
                stop()
        finally:
            svc.stop()
        med = {name: statistics.median(t) for name, t in runs.items()}
        print(f"\n[floor of a local publish in place of ~4 KiB shards] {n} files")
        for name, seconds in med.items():
            print(f"  {name:40} median {seconds:7.4f} s  {seconds / n * 1e6:7.1f} µs/file")
        peer = med["sha256 loop (peer)"]
        floor = sum(list(med.values())[2:])
        ours = med["publish in place (ours)"]
        print(
            f"  {'floor (scan + insert + request)':40} sum    {floor:7.4f} s  "
            f"{floor / n * 1e6:7.1f} µs/file"
        )
        print(f"  {'3x the peer':40}        {3 * peer:7.4f} s")
        print(f"  floor / peer: {floor / peer:.2f}x; ours / peer: {ours / peer:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Cheap reads beside expensive ones: ``whoami`` latency alone and while clients with a read
token ask for the diff of two 10,000-shard versions and the lineage graph of a version with
2,000 consumers (issue 21, item 9).

``recordkeeper serve --workers N`` with ``RECORDKEEPER_AUTH=required`` on a scratch PostgreSQL
(or SQLite) database; the driver is ``tests/integration/_read_load.py``;
``tests/integration/test_read_load.py`` runs it at a smaller scale in the test command.  Also
timed: each expensive answer once uncached (the first request of a fresh service) and again.

Usage::

    PYTHONPATH=client:service .venv/bin/python bench/bench_read_load.py
    PYTHONPATH=client:service .venv/bin/python bench/bench_read_load.py --seconds 10 --clients 8

Results are printed and written to ``bench/out/bench_read_load.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_service import OUT, database  # noqa: E402

from tests.integration._load import serve  # noqa: E402
from tests.integration._read_load import heavy_paths, measure, populate  # noqa: E402


def _once(http: httpx.Client, path: str) -> tuple[float, int]:
    started = time.perf_counter()
    response = http.get(path)
    response.raise_for_status()
    return (time.perf_counter() - started) * 1000, len(response.content)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shards", type=int, default=10_000)
    parser.add_argument("--consumers", type=int, default=2_000)
    parser.add_argument("--clients", type=int, default=4, help="heavy clients")
    parser.add_argument("--seconds", type=float, default=8.0, help="per phase")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rk-read-load-") as tmp:
        workdir = Path(tmp)
        (workdir / "store").mkdir()
        with (
            database(args.backend, workdir) as url,
            serve(url, workdir, workers=args.workers) as (served, tokens),
        ):
            started = time.perf_counter()
            scenario = populate(
                served.url, tokens["write"], shards=args.shards, consumers=args.consumers
            )
            setup_s = time.perf_counter() - started
            paths = heavy_paths(scenario)
            single = {}
            headers = {"Authorization": f"Bearer {tokens['read']}"}
            with httpx.Client(base_url=served.url, headers=headers, timeout=120) as http:
                for path in [*paths, "/api/v1/whoami"]:
                    first, size = _once(http, path)  # one worker's first; the other's later
                    again = min(_once(http, path)[0] for _ in range(5))
                    single[path] = {
                        "first_ms": round(first, 1),
                        "again_ms": round(again, 1),
                        "bytes": size,
                    }
            report = measure(
                served.url,
                tokens["read"],
                paths,
                heavy_clients=args.clients,
                seconds=args.seconds,
            )
    result = {
        "backend": args.backend,
        "workers": args.workers,
        "shards": args.shards,
        "consumers": args.consumers,
        "heavy_clients": args.clients,
        "seconds_per_phase": args.seconds,
        "setup_s": round(setup_s, 1),
        "single_requests": single,
        "alone": report.alone.summary(),
        "loaded": report.loaded.summary(),
        "median_ratio": round(report.ratio, 2),
        "p90_ratio": round(report.loaded.p90_ms / report.alone.p90_ms, 2),
    }
    print(json.dumps(result, indent=2))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_read_load.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

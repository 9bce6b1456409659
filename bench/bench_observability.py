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

With ``--workers 2`` the metrics use the multiprocess directory the runner sets up.  Printed:
the median req/s, p50 and worker CPU per request of each configuration over the rounds, and
each configuration's throughput as a ratio of the peer's.

Usage::

    PYTHONPATH=client:service .venv/bin/python bench/bench_observability.py            # ~3 min
    PYTHONPATH=client:service .venv/bin/python bench/bench_observability.py --rounds 1 --seconds 3

Results are written to ``bench/out/bench_observability.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--connections", type=int, default=8)
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
        for workers in (int(w) for w in args.workers.split(",")):
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

#!/usr/bin/env python3
"""Load benchmark: many publishers and resolvers at once against two workers on PostgreSQL.

``recordkeeper serve --workers 2`` with ``RECORDKEEPER_AUTH=required`` on a scratch PostgreSQL
database (created and dropped, see ``bench_service.py``); 32 publishers (stage → register 4
shards, metadata only → commit, in a loop) and 64 resolvers (``GET /versions/{name}`` of a random
acknowledged commit or ``{dataset}@latest``) for ``--seconds`` (default 120).  The driver is
``tests/integration/_load.py``; ``tests/integration/test_load.py`` runs it for 20 s with 8 + 16
clients in the test command.

Reported: publishes/s and resolves/s with p50/p99, errors by step and ``status:code``, duplicate
or missing version numbers among acknowledged stages, acknowledged commits that do not resolve
afterwards, and the RSS of each worker at start / after warm-up / middle / end.  "Flat": at the
end, no worker is more than ``--rss-bound-mib`` (default 16 MiB) above its RSS after warm-up
(the first quarter of the run).  The per-worker version cache is capped with ``--cache-bytes``
(default 4 MiB, filled during warm-up) so that the cache's designed growth up to its bound is not
mistaken for a leak; ``--cache-bytes -1`` keeps the service default (128 MiB).

Usage::

    PYTHONPATH=client:service .venv/bin/python bench/bench_load.py              # 120 s
    PYTHONPATH=client:service .venv/bin/python bench/bench_load.py --seconds 30 --publishers 8

Results are printed and written to ``bench/out/bench_load.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_service import OUT, database  # noqa: E402

from tests.integration._load import run_load, serve  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--publishers", type=int, default=32)
    parser.add_argument("--resolvers", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--datasets", type=int, default=8)
    parser.add_argument("--shards", type=int, default=4, help="shards per version")
    parser.add_argument("--cache-bytes", type=int, default=4 * 2**20)
    parser.add_argument("--rss-bound-mib", type=float, default=16.0)
    args = parser.parse_args()
    cache = None if args.cache_bytes < 0 else args.cache_bytes

    with tempfile.TemporaryDirectory(prefix="rk-load-") as tmp:
        workdir = Path(tmp)
        with (
            database("postgres", workdir) as url,
            serve(url, workdir, workers=args.workers, cache_bytes=cache) as (served, tokens),
        ):
            report = run_load(
                served,
                tokens,
                publishers=args.publishers,
                resolvers=args.resolvers,
                seconds=args.seconds,
                datasets=args.datasets,
                shards=args.shards,
            )
    print(report.summary())
    flat = all(g <= args.rss_bound_mib for g in report.rss_growth_mib.values())
    ok = (
        not report.errors
        and not report.duplicate_numbers
        and not report.missing_numbers
        and not report.unresolvable_commits
    )
    print(
        f"RSS flat (end <= post-warm-up + {args.rss_bound_mib:g} MiB): {flat}; "
        f"correct (0 errors, numbering, every commit resolvable): {ok}"
    )
    OUT.mkdir(parents=True, exist_ok=True)
    data = asdict(report)
    data.pop("server_log_tail")
    data |= {
        "cache_bytes": cache,
        "rss_bound_mib": args.rss_bound_mib,
        "rss_flat": flat,
        "correct": ok,
    }
    (OUT / "bench_load.json").write_text(json.dumps(data, indent=2))
    print(f"# written to {OUT / 'bench_load.json'}")
    return 0 if ok and flat else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Derive against republish: adding 10 shards to a 100,000-shard version (issue 24).

For each database (SQLite, PostgreSQL), a fresh registry and ``recordkeeper serve`` (1 worker):

1. A 100,000-shard parent is registered over REST as ``bench_service.py`` does (set-up, not
   timed; its shard files do not exist — nothing may read them).
2. **derive**: ``client.derive(parent)`` writes 10 new shards with the writer (real TFRecord
   files on local disk) and commits — end to end through the client, timed from the call to
   the committed version.  The bytes stored under the new version's prefix are counted: only
   the 10 new shards.  The committed version's shards are fetched when first read
   (``FetchedSplits``); that first read is timed apart (``first_read_s``).
3. **republish** (the peer, same run): the same content as a new version the way it is made
   without derive — stage, register all 100,010 shard records (requests of 10,000), commit.
   A lower bound of republishing: a real republish would also read and hash every byte of the
   100,000 files again (or copy them).
4. **diff** of the parent and the derived version through ``client.diff`` from a fresh client
   (the service diffs them from the derivation: the 10 added rows are read), against the peer
   in the same run: a fresh client fetching both versions' shards and comparing them (what
   ``client.diff`` does for versions not derived from one another; both answers are checked
   equal); and a cold resolve of a 10,000-shard version by ``client.resolve``.

Each step runs ``--repeat`` times (a new derived version each time); medians are printed with
the ratio, and written to ``bench/out/bench_derive.json``.

Usage::

    .venv/bin/python bench/bench_derive.py                 # both databases, 100,000 shards
    .venv/bin/python bench/bench_derive.py --backends sqlite --shards 20000 --repeat 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_service import API, OUT, database, serve, shard_bodies

import recordkeeper as rk
from recordkeeper.diff import diff_versions
from tests.client._records import example_bytes

HEADERS = {"Content-Type": "application/json"}


def _register(client: httpx.Client, name: str, bodies: list[dict[str, Any]]) -> None:
    for i in range(0, len(bodies), 10_000):
        body = json.dumps({"shards": bodies[i : i + 10_000]})
        client.post(
            f"{API}/versions/{name}/shards", content=body, headers=HEADERS
        ).raise_for_status()


def _publish(client: httpx.Client, dataset: str, bodies_of: Any, desc: str) -> dict[str, Any]:
    version = client.post(f"{API}/datasets/{dataset}/versions", json={"desc": desc}).json()
    _register(client, version["name"], bodies_of(version["storage_prefix"]))
    done = client.post(f"{API}/versions/{version['name']}/commit", json={"on_duplicate": "commit"})
    done.raise_for_status()
    return dict(done.json())


def _prefix_bytes(prefix: str) -> int:
    path = Path(prefix.removeprefix("file://"))
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def bench(backend: str, shards: int, repeat: int, workdir: Path) -> dict[str, Any]:
    derive_s: list[float] = []
    first_read_s: list[float] = []
    republish_s: list[float] = []
    diff_s: list[float] = []
    diff_peer_s: list[float] = []
    copied: list[int] = []
    resolve_cold_ms: list[float] = []
    with (
        database(backend, workdir) as url,
        serve(url, 1, workdir) as server,
        httpx.Client(base_url=server.url, timeout=600) as http,
    ):
        parent = _publish(http, "big", lambda p: shard_bodies(p, shards), "parent")
        small = _publish(http, "small", lambda p: shard_bodies(p, 10_000), "ten_k")
        records = [
            example_bytes({"image/encoded": [os.urandom(2000)], "label": [i % 10]})
            for i in range(50)
        ]
        for k in range(repeat):
            client = rk.Client(server.url)
            start = time.perf_counter()
            with client.derive(parent["name"], desc=f"add10_{k}", force_new=True) as d:
                for _shard in range(10):
                    for record in records:
                        d.write(record, split="train")
                    d.end_shard("train")
            derived = d.version
            derive_s.append(time.perf_counter() - start)
            assert derived.shard_count == shards + 10, derived.shard_count
            # the derived version's shards are fetched when first read (FetchedSplits): what a
            # caller who goes on to read them pays on top
            start = time.perf_counter()
            assert len(dict(derived.splits)["train"].shards) == shards + 10
            first_read_s.append(time.perf_counter() - start)
            copied.append(_prefix_bytes(derived.storage_prefix))

            # the peer: the same 100,010 shard records registered as a new version
            every = [s.to_wire() for s in derived.shards]
            start = time.perf_counter()
            _publish(http, "big", lambda _p, every=every: every, f"republish_{k}")
            republish_s.append(time.perf_counter() - start)

            fresh = rk.Client(server.url)  # nothing cached: both sides are fetched
            start = time.perf_counter()
            diff = fresh.diff(parent["name"], derived.name)
            diff_s.append(time.perf_counter() - start)
            assert len(diff.added) == 10 and not diff.removed and not diff.changed, diff
            assert diff.basis == "derivation", diff.basis

            # the peer: the same diff on both versions' shards, fetched by a fresh client (what
            # client.diff does for two versions not derived from one another)
            peer = rk.Client(server.url)
            start = time.perf_counter()
            both = diff_versions(peer.resolve(parent["name"]), peer.resolve(derived.name))
            diff_peer_s.append(time.perf_counter() - start)
            assert both == dataclasses.replace(diff, basis="shards")
            peer.close()

            cold = rk.Client(server.url)
            start = time.perf_counter()
            cold.resolve(small["name"])
            resolve_cold_ms.append((time.perf_counter() - start) * 1000)
            client.close()
            fresh.close()
            cold.close()
    new_bytes = statistics.median(copied)
    return {
        "backend": backend,
        "parent_shards": shards,
        "derive_s": statistics.median(derive_s),
        "first_read_s": statistics.median(first_read_s),
        "republish_s": statistics.median(republish_s),
        "ratio": statistics.median(republish_s) / statistics.median(derive_s),
        "bytes_under_new_prefix": new_bytes,
        "diff_s": statistics.median(diff_s),
        "diff_peer_s": statistics.median(diff_peer_s),
        "resolve_10k_cold_ms": statistics.median(resolve_cold_ms),
        "runs": {
            "derive_s": derive_s,
            "first_read_s": first_read_s,
            "republish_s": republish_s,
            "diff_s": diff_s,
            "diff_peer_s": diff_peer_s,
            "resolve_10k_cold_ms": resolve_cold_ms,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--shards", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"# derive vs republish ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f})")
    results = []
    with tempfile.TemporaryDirectory(prefix="rk-bench-derive-") as tmp:
        for backend in args.backends.split(","):
            workdir = Path(tmp) / backend  # each its own store: the names repeat
            workdir.mkdir()
            r = bench(backend, args.shards, args.repeat, workdir)
            results.append(r)
            print(
                f"{backend:8s} parent {r['parent_shards']:,} shards: derive +10 shards "
                f"{r['derive_s']:.2f} s (then reading its shards: +{r['first_read_s']:.2f} s)  "
                f"republish {r['republish_s']:.2f} s  "
                f"(republish / derive = {r['ratio']:.1f}x); bytes under the new prefix "
                f"{r['bytes_under_new_prefix']:,}; client.diff parent/derived "
                f"{r['diff_s'] * 1000:.1f} ms (peer: both versions' shards fetched and "
                f"compared {r['diff_peer_s'] * 1000:.0f} ms, "
                f"{r['diff_peer_s'] / r['diff_s']:.0f}x); cold resolve of 10,000 shards "
                f"{r['resolve_10k_cold_ms']:.1f} ms  (medians of {args.repeat})"
            )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_derive.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What a page of 10,000 shards costs to render (service) and to read (client), in-process.

On a shared machine a cold resolve over HTTP swings with the load more than the cuts move it;
this measures its two halves alone, alternating each cut with its peer in the same run, as
medians of wall and CPU (``time.process_time``) milliseconds:

* **render** (the service, a page it does not hold yet): the general path — a
  ``ShardRecord`` per row, columns, validated by the response model (before session 9) —
  against the page rendered straight from the rows, compact and packed
  (:mod:`recordkeeper_service.repository.compact_pages`);
* **read** (the client, what a cold resolve does with the page's bytes): decode, unpack
  (packed), check every URI against the allowed roots, turn into splits — compact against
  packed (:func:`recordkeeper.core.shard_columns.unpack_columns`).

Usage::

    .venv/bin/python bench/bench_pages.py [--shards 10000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson

from recordkeeper.core.roots import AllowedRoots
from recordkeeper.core.shard_columns import ShardColumns, unpack_columns
from recordkeeper.registry import collect_splits
from recordkeeper.values import Shard
from recordkeeper_service import migrate
from recordkeeper_service.db import Database
from recordkeeper_service.repository import Repository
from recordkeeper_service.routes.shards import _PAGE
from tests.integration._load import shard_bodies


def _timed(work: Callable[[], Any], wall: list[float], cpu: list[float]) -> Any:
    start, start_cpu = time.perf_counter(), time.process_time()
    out = work()
    wall.append((time.perf_counter() - start) * 1000)
    cpu.append((time.process_time() - start_cpu) * 1000)
    return out


def _read(data: bytes, roots: AllowedRoots) -> int:
    body = orjson.loads(data)
    if body.get("packed") is not None:
        packed = body["packed"]
        prefix, columns = packed["uri_prefix"], unpack_columns(packed["columns"], packed["length"])
    else:
        prefix, columns = body["compact"]["uri_prefix"], body["compact"]["columns"]
    page = ShardColumns(Shard, prefix, columns)
    roots.check_objects(prefix, columns["uri"], "a shard URI")
    return sum(s.shard_count for s in collect_splits([page]).values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    n = args.shards
    with tempfile.TemporaryDirectory(prefix="rk-bench-pages-") as tmp:
        store = Path(tmp, "store").as_uri() + "/"
        url = f"sqlite:///{Path(tmp, 'registry.db')}"
        db = Database(url)
        migrate.upgrade(db)
        repo = Repository(db, allowed_roots=AllowedRoots.of([store]), storage_root=store)
        staged = repo.versions.stage("pages", actor="bench")
        repo.shards.register(
            staged.name, shard_bodies(staged.storage_prefix, n, tag="pages"), actor="bench"
        )
        committed = repo.commits.commit(staged.name, actor="bench")
        record = repo.versions.resolve(committed.name, shards=False)

        def general() -> bytes:
            page = repo.versions.shard_page(record, after=None, limit=n)
            return _PAGE.dump_json(_PAGE.validate_python(page.to_json(compact=True)))

        renders: dict[str, Callable[[], bytes]] = {
            "general (records + model)": general,
            "compact from rows": lambda: repo.versions.compact_page(record, after=None, limit=n),
            "packed from rows": lambda: repo.versions.compact_page(
                record, after=None, limit=n, packed=True
            ),
        }
        roots = AllowedRoots.of([store])
        times: dict[str, tuple[list[float], list[float]]] = {}
        pages: dict[str, bytes] = {}
        for _ in range(args.rounds):
            for label, render in renders.items():
                wall, cpu = times.setdefault(f"render {label}", ([], []))
                pages[label] = _timed(render, wall, cpu)
            for label in ("compact from rows", "packed from rows"):
                wall, cpu = times.setdefault(f"read {label.split()[0]}", ([], []))
                assert _timed(lambda label=label: _read(pages[label], roots), wall, cpu) == n
        db.dispose()
    med = statistics.median
    print(f"# {n:,}-shard page, medians of {args.rounds} (load {os.getloadavg()[0]:.1f})")
    for label, (wall, cpu) in times.items():
        print(f"{label:34s} {med(wall):8.1f} ms wall {med(cpu):8.1f} ms CPU")
    sizes = {label: len(data) for label, data in pages.items()}
    print(f"page bytes: {sizes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

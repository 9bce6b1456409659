#!/usr/bin/env python3
"""Record → shards for one version through its record lookup vs asking every shard index, in
the same run (issue 25, item 5: "which checkpoints saw this record").

A version of ``--records`` records (default 1,000,000) in ``--shards`` shards (default 10,000,
the issue's figure), random 16-byte identities, per-shard record indexes
(``recordkeeper.core.record_index`` format) on local disk; the version's lookup
(``recordkeeper.core.record_lookup``) is built from them the way ``recordkeeper index`` builds
it (timed once: ``build_s``).  Then, medians over ``--queries`` records that are in the version
and as many that are not:

- ``lookup``: open the lookup, read its candidates (four small reads), confirm each in that
  shard's index by a range-read binary search — what ``client.record_lineage`` does before its
  registry call;
- ``scan`` (peer): a binary search of the identity in every shard's index (range reads too, no
  lookup): what answering without a per-version structure costs.

The registry part of the question (``GET /shards/consumers?sha256=…`` per shard found: one
indexed query on ``shards.sha256`` and the lineage walk) is independent of the record count
and is not timed here.

Usage::

    PYTHONPATH=client .venv/bin/python bench/bench_record_lineage.py
    PYTHONPATH=client .venv/bin/python bench/bench_record_lineage.py --records 10000000

Results are printed and written to ``bench/out/bench_record_lineage.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "client"))

from recordkeeper import _native  # noqa: E402
from recordkeeper.core.record_index import RecordIndexBuilder, index_chunks  # noqa: E402
from recordkeeper.core.record_lookup import (  # noqa: E402
    LookupShard,
    count_in_index,
    lookup_candidates,
    write_lookup,
)

OUT = ROOT / "bench" / "out"
W = 16


def _reader(fh: object) -> Callable[[int, int], bytes]:
    def read(offset: int, size: int) -> bytes:
        fh.seek(offset)  # type: ignore[attr-defined]
        return fh.read(size)  # type: ignore[attr-defined,no-any-return]

    return read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--scan-queries", type=int, default=3)
    args = parser.parse_args()
    native = getattr(_native.speedups, "record_lookup_stream", None)
    if native is None:
        raise SystemExit("build the C extension first: python setup.py build_ext --inplace")
    rng = random.Random(25)
    result: dict[str, object] = {"records": args.records, "shards": args.shards}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        per = -(-args.records // args.shards)
        paths: list[Path] = []
        probes: list[tuple[bytes, int]] = []
        started = time.perf_counter()
        left = args.records
        for i in range(args.shards):
            n = min(per, left)
            left -= n
            blob = os.urandom(n * W)
            builder = RecordIndexBuilder()
            for j in range(n):
                builder.add_hash(blob[j * W : (j + 1) * W])
            if n and len(probes) < args.queries and rng.random() < args.queries * 2 / args.shards:
                probes.append((blob[:W], i))
            path = d / f"train-{i:05d}.rkidx"
            path.write_bytes(builder.finish())
            paths.append(path)
        result["setup_s"] = round(time.perf_counter() - started, 1)

        def body(p: Path):  # type: ignore[no-untyped-def]
            with open(p, "rb") as fh:
                yield from index_chunks(fh.read, max(256, 4 * 2**20 // (len(paths) * W)))[1]

        rows = [
            (LookupShard(hashlib.sha256(p.name.encode()).hexdigest(), "00" * 32), body(p))
            for p in paths
        ]
        lookup = d / "records.rklookup"
        started = time.perf_counter()
        with open(lookup, "wb") as sink:
            write_lookup(rows, args.records, "bytes", W, sink.write, native=native)
        result["build_s"] = round(time.perf_counter() - started, 1)
        result["lookup_mib"] = round(lookup.stat().st_size / 2**20, 1)
        result["indexes_mib"] = round(sum(p.stat().st_size for p in paths) / 2**20, 1)
        by_sha = {hashlib.sha256(p.name.encode()).hexdigest(): p for p in paths}
        absent = [os.urandom(W) for _ in range(len(probes))]

        def via_lookup(identity: bytes) -> list[int]:
            with open(lookup, "rb") as fh:
                _, found = lookup_candidates(_reader(fh), identity)
            hits = []
            for ordinal, row in found:
                with open(by_sha[row.sha256], "rb") as fh:
                    if count_in_index(_reader(fh), identity):
                        hits.append(ordinal)
            return hits

        def via_scan(identity: bytes) -> list[int]:
            hits = []
            for i, p in enumerate(paths):
                with open(p, "rb") as fh:
                    if count_in_index(_reader(fh), identity):
                        hits.append(i)
            return hits

        def timed(fn: Callable[[bytes], list[int]], cases: list[tuple[bytes, list[int]]]) -> float:
            times = []
            for identity, expected in cases:
                started = time.perf_counter()
                got = fn(identity)
                times.append(time.perf_counter() - started)
                assert got == expected, (got, expected)
            return statistics.median(times)

        present = [(h, [i]) for h, i in probes]
        missing = [(h, []) for h in absent]
        result["queries"] = len(present)
        result["lookup_present_ms"] = round(1000 * timed(via_lookup, present), 2)
        result["lookup_absent_ms"] = round(1000 * timed(via_lookup, missing), 2)
        k = args.scan_queries
        result["scan_present_ms"] = round(1000 * timed(via_scan, present[:k]), 1)
        result["scan_absent_ms"] = round(1000 * timed(via_scan, missing[:k]), 1)
        result["scan_over_lookup"] = round(
            float(result["scan_present_ms"]) / float(result["lookup_present_ms"]),  # type: ignore[arg-type]
            1,
        )
    print(json.dumps(result, indent=2))
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_record_lineage.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

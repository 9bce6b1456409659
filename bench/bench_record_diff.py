#!/usr/bin/env python3
"""Record diff of two versions from their record indexes vs a Python set difference over the
same identities, in the same run (issue 25, item 3).

Two versions of ``--records`` records each (default 500,000; the issue's figure is
10,000,000: ``--records 10000000``), ``--shards`` shards each, version B with ``--changed``
records replaced.  Their per-shard indexes (``recordkeeper.core.record_index`` format, random
16-byte identities) are written to a temporary directory.  Timed, medians of ``--repeat`` runs:

- ``merge``: :func:`recordkeeper.core.record_diff.diff_records` streaming both versions' shard
  indexes from disk (what ``recordkeeper diff --records`` does after resolving);
- ``set``: the peer: read every index body, build a Python ``set`` of identities per version and
  take both differences (memory grows with the record count).

Peak memory of each (``tracemalloc``, Python allocations) is reported beside the times.

Usage::

    PYTHONPATH=client .venv/bin/python bench/bench_record_diff.py
    PYTHONPATH=client .venv/bin/python bench/bench_record_diff.py --records 10000000 --shards 1000

Results are printed and written to ``bench/out/bench_record_diff.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "client"))

from recordkeeper.core.record_diff import diff_records  # noqa: E402
from recordkeeper.core.record_index import (  # noqa: E402
    HEADER_SIZE,
    RecordIndexBuilder,
    index_chunks,
)

OUT = ROOT / "bench" / "out"
W = 16


def _write_version(directory: Path, shards: list[list[bytes]]) -> list[Path]:
    paths = []
    for i, ids in enumerate(shards):
        builder = RecordIndexBuilder()
        for h in ids:
            builder.add_hash(h)
        path = directory / f"train-{i:05d}.rkidx"
        path.write_bytes(builder.finish())
        paths.append(path)
    return paths


def _make(directory: Path, records: int, shards: int, changed: int) -> tuple[list[Path], ...]:
    a = [os.urandom(W) for _ in range(records)]
    b = a[changed:] + [os.urandom(W) for _ in range(changed)]
    per = -(-records // shards)
    (directory / "a").mkdir()
    (directory / "b").mkdir()
    pa = _write_version(directory / "a", [a[i : i + per] for i in range(0, records, per)])
    pb = _write_version(directory / "b", [b[i : i + per] for i in range(0, records, per)])
    return pa, pb


def _streams(paths: list[Path], chunk: int):
    def one(path: Path):
        with open(path, "rb") as fh:
            yield from index_chunks(fh.read, chunk)[1]

    return [("train", one(p)) for p in paths]


def merge(pa: list[Path], pb: list[Path]) -> tuple[int, int]:
    chunk = max(256, (4 * 2**20) // ((len(pa) + len(pb)) * W))
    d = diff_records(_streams(pa, chunk), _streams(pb, chunk), W).splits["train"]
    return d.added, d.removed


def python_set(pa: list[Path], pb: list[Path]) -> tuple[int, int]:
    def ids(paths: list[Path]) -> set[bytes]:
        out: set[bytes] = set()
        for p in paths:
            body = p.read_bytes()[HEADER_SIZE:-32]
            out.update(body[i : i + W] for i in range(0, len(body), W))
        return out

    sa, sb = ids(pa), ids(pb)
    return len(sb - sa), len(sa - sb)


def _time(fn: Callable[[], tuple[int, int]], repeat: int) -> tuple[float, int, tuple[int, int]]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--shards", type=int, default=100)
    parser.add_argument("--changed", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pa, pb = _make(Path(tmp), args.records, args.shards, args.changed)
        merge_s, merge_peak, merge_result = _time(lambda: merge(pa, pb), args.repeat)
        set_s, set_peak, set_result = _time(lambda: python_set(pa, pb), args.repeat)
    assert merge_result == set_result == (args.changed, args.changed), (merge_result, set_result)
    result = {
        "records": args.records,
        "shards": args.shards,
        "changed": args.changed,
        "merge_s": round(merge_s, 3),
        "set_s": round(set_s, 3),
        "merge_over_set": round(merge_s / set_s, 2),
        "merge_peak_mib": round(merge_peak / 2**20, 1),
        "set_peak_mib": round(set_peak / 2**20, 1),
        "merge_records_per_s": round(2 * args.records / merge_s),
    }
    print(json.dumps(result, indent=2))
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_record_diff.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

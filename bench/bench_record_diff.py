#!/usr/bin/env python3
"""Record diff of two versions from their record indexes vs a Python set difference over the
same identities, in the same run (issue 25, item 3).

Two versions of ``--records`` records each (default 500,000; the issue's figure is
10,000,000: ``--records 10000000``), ``--shards`` shards each, version B with ``--changed``
records replaced.  Their per-shard indexes (``recordkeeper.core.record_index`` format, random
16-byte identities) are written to a temporary directory.  Timed, medians of ``--repeat`` runs:

- ``merge``: :func:`recordkeeper.core.record_diff.diff_records` streaming both versions' shard
  indexes from disk through the client's storage layer (fsspec, ``file://``; chunk size of
  ``recordkeeper.record_sets.chunk_records``), merged and counted in C
  (``_speedups.record_diff_stream``: what ``recordkeeper diff --records`` does after
  resolving);
- ``merge_python``: the same merge counted by the pure-Python reference (no C extension;
  skipped with ``--no-python-merge``, which takes ~90 s at 10 M records per version);
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

from recordkeeper import _native  # noqa: E402
from recordkeeper.core.record_diff import diff_records  # noqa: E402
from recordkeeper.core.record_index import (  # noqa: E402
    HEADER_SIZE,
    RecordIndexBuilder,
    index_chunks,
)
from recordkeeper.record_sets import chunk_records  # noqa: E402
from recordkeeper.storage import open_read  # noqa: E402

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
        # what recordkeeper.record_sets streams for a shard: the index opened through the
        # client's storage layer (fsspec), its body checked and read chunk by chunk
        with open_read(path.as_uri()) as fh:
            yield from index_chunks(fh.read, chunk)[1]

    return [("train", one(p)) for p in paths]


def merge(pa: list[Path], pb: list[Path], native: bool = True) -> tuple[int, int]:
    chunk = chunk_records(len(pa) + len(pb), W)
    fast = _native.speedups.record_diff_stream if native and _native.speedups else None
    d = diff_records(_streams(pa, chunk), _streams(pb, chunk), W, native=fast).splits["train"]
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


def _time(
    fn: Callable[[], tuple[int, int]], repeat: int
) -> tuple[float, float, int, tuple[int, int]]:
    """Median wall time, median CPU time of this process, peak traced memory, the answer."""
    times, cpu = [], []
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), statistics.median(cpu), peak, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--shards", type=int, default=100)
    parser.add_argument("--changed", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-python-merge", action="store_true")
    parser.add_argument("--no-set", action="store_true", help="skip the peer (memory)")
    args = parser.parse_args()
    if _native.speedups is None:
        raise SystemExit("build the C extension first: python setup.py build_ext --inplace")
    expected = (args.changed, args.changed)
    result: dict[str, object] = {
        "records": args.records,
        "shards": args.shards,
        "changed": args.changed,
    }
    result["load_average_start"] = round(os.getloadavg()[0], 1)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        pa, pb = _make(Path(tmp), args.records, args.shards, args.changed)
        result["setup_s"] = round(time.perf_counter() - started, 1)
        arms: dict[str, Callable[[], tuple[int, int]]] = {"merge": lambda: merge(pa, pb)}
        if not args.no_python_merge:
            arms["merge_python"] = lambda: merge(pa, pb, native=False)
        if not args.no_set:
            arms["set"] = lambda: python_set(pa, pb)
        for name, fn in arms.items():
            seconds, cpu, peak, answer = _time(fn, args.repeat)
            assert answer == expected, (name, answer)
            result[f"{name}_s"] = round(seconds, 3)
            result[f"{name}_cpu_s"] = round(cpu, 3)
            result[f"{name}_peak_mib"] = round(peak / 2**20, 1)
    for name in arms:
        if name != "merge":
            result[f"merge_over_{name}"] = round(
                float(result["merge_s"]) / float(result[f"{name}_s"]),  # type: ignore[arg-type]
                3,
            )
            result[f"merge_cpu_over_{name}_cpu"] = round(
                float(result["merge_cpu_s"]) / float(result[f"{name}_cpu_s"]),  # type: ignore[arg-type]
                3,
            )
    result["load_average"] = round(os.getloadavg()[0], 1)
    result["merge_records_per_s"] = round(2 * args.records / float(result["merge_s"]))  # type: ignore[arg-type]
    print(json.dumps(result, indent=2))
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_record_diff.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

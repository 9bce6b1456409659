"""Deep verification throughput: scan_shard against plain hashlib.sha256 over the same files.

    .venv/bin/python bench/bench_scan.py [--shards 8] [--shard-mib 64] [--record-kib 1]

Writes ``--shards`` uncompressed shards of ``--shard-mib`` MiB of tf.train.Example records
(~1 KiB each by default; ``--record-kib 100`` for image-sized records) to a temporary
directory, reads them once so they sit in the page cache, then times, alternating:

- ``sha256``: hashlib.sha256 over each file, read in 8 MiB chunks (the floor: one hash);
- ``deep verify``: scan_shard(infer_schema=False): sha256 + CRC32C of the stored bytes,
  records_sha256, every record's length and data CRC checked;
- ``scan + schema``: scan_shard(infer_schema=True), what publishing existing files does.

Prints median throughputs and the ratios to sha256.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from itertools import cycle, islice

from bench_writer import forget_layouts, make_records

from recordkeeper.tfrecord import TFRecordWriter, scan_shard


def implementation() -> str:
    """Which record loops run: the C fast paths or the pure-Python reference code."""
    from recordkeeper import _native

    return "C (recordkeeper._speedups)" if _native.speedups else "pure Python"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--shard-mib", type=int, default=64)
    parser.add_argument("--record-kib", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    kib = args.record_kib
    image = (700, 900) if kib <= 1 else (kib * 1024 - 100, kib * 1024 + 100)
    pool = make_records(max(1000, min(20_000, (64 << 20) // (kib * 1024))), image_size=image)
    per_shard = (args.shard_mib << 20) // (sum(map(len, pool)) // len(pool) + 16)

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        records = cycle(pool)
        for i in range(args.shards):
            path = os.path.join(tmp, f"train-{i:05d}-of-{args.shards:05d}.tfrecord")
            with TFRecordWriter(path, infer_schema=False) as writer:
                for record in islice(records, per_shard):
                    writer.write(record)
            paths.append(path)
        total = sum(os.path.getsize(p) for p in paths)
        gc.collect()  # the garbage of building the records is the benchmark's
        print(
            f"{args.shards} shards, {total / 2**20:.0f} MiB, {args.shards * per_shard} records "
            f"of {total / (args.shards * per_shard) / 1024:.1f} KiB (page cache warm)"
        )

        print(f"fast paths: {implementation()}")

        def sha256_only() -> None:
            for path in paths:
                digest = hashlib.sha256()
                with open(path, "rb") as fh:
                    while chunk := fh.read(8 << 20):
                        digest.update(chunk)

        def deep_verify(infer_schema: bool = False) -> None:
            forget_layouts()
            for path in paths:
                with open(path, "rb") as fh:
                    scan_shard(fh, "none", infer_schema=infer_schema)

        def with_schema() -> None:
            deep_verify(infer_schema=True)

        contenders: list[tuple[str, Callable[[], None]]] = [
            ("sha256", sha256_only),
            ("deep verify (no schema)", deep_verify),
            ("scan + schema", with_schema),
        ]
        sha256_only()  # warm the page cache
        runs: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            for name, run in contenders:
                start = time.perf_counter()
                run()
                runs.setdefault(name, []).append(time.perf_counter() - start)

    medians = {name: statistics.median(times) for name, times in runs.items()}
    for name, median in medians.items():
        print(
            f"{name:25s} median {median:6.3f} s  {total / median / 1e9:5.2f} GB/s"
            f"  runs: {' '.join(f'{t:.3f}' for t in runs[name])}"
        )
    base = medians["sha256"]
    print(
        f"throughput ratio to sha256: deep verify {base / medians['deep verify (no schema)']:.2f}, "
        f"scan + schema {base / medians['scan + schema']:.2f}"
    )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Reading ArrayRecord/Riegeli files: recordkeeper.riegeli vs the ``array_record`` reader.

    .venv/bin/python bench/bench_riegeli.py [--mib 64] [--repeat 5] [--options zstd:3 ...]

For each ArrayRecord writer option string (the Python writer's default group size is 1, one
chunk per record: TFDS and Grain write that for random access), writes one local file of
~1 KiB ``tf.train.Example`` records (a pool of 512 distinct records cycled; 1/4 of each record
random so compression is realistic) with the ``array_record`` wheel, then reads it, page cache
warm, with:

* **peer**: ``array_record``'s ``ArrayRecordReader.read_all()`` (C++, every chunk decoded and
  its hashes checked: Riegeli's reader verifies them);
* **records**: ``list(recordkeeper.riegeli.iter_records(f))`` (every block header, chunk header
  and data hash checked, records as ``bytes``);
* **scan**: ``scan_riegeli(f, infer_schema=False)`` (records, plus sha256/CRC32C of the stored
  bytes and sha256 of the records in TFRecord framing: what deep verify needs);
* **scan+schema**: the same with schema inference.

Also HighwayHash-64 alone on 64 MiB: the C version and the pure-Python reference (on 1 MiB).
Prints the median MB/s (file bytes / time) and the ratio to the peer (time / peer time: > 1
means slower than array_record).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

from array_record.python import array_record_module  # noqa: E402

from recordkeeper import _native  # noqa: E402
from recordkeeper.riegeli import iter_records, scan_riegeli  # noqa: E402
from recordkeeper.riegeli.highwayhash import highwayhash64, highwayhash64_python  # noqa: E402
from tests.client._records import example_bytes  # noqa: E402


def pool() -> list[bytes]:
    out = []
    for i in range(512):
        noise = os.urandom(256)
        text = (b"the quick brown fox %d " % i) * 30
        out.append(example_bytes({"image": [noise + text[:700]], "label": [i % 10]}))
    return out


def write(path: Path, options: str, mib: int) -> int:
    records = pool()
    writer = array_record_module.ArrayRecordWriter(str(path), options)
    total = 0
    i = 0
    while total < mib << 20:
        record = records[i % len(records)]
        writer.write(record)
        total += len(record)
        i += 1
    writer.close()
    return i


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="record bytes per file")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--options",
        nargs="*",
        default=[
            "zstd:3,group_size:1",  # what TFDS and Grain write (random access)
            "uncompressed,group_size:1",
            "snappy,group_size:1",
            "zstd:3,group_size:1000",
            "brotli:6,group_size:1000",
            "uncompressed,group_size:1000",
        ],
    )
    args = parser.parse_args()
    print(f"C extension: {'yes' if _native.speedups is not None else 'NO (pure Python)'}")

    data = os.urandom(64 << 20)
    small = data[: 1 << 20]
    c = median_seconds(functools.partial(highwayhash64, data), args.repeat)
    py = median_seconds(functools.partial(highwayhash64_python, small), 1)
    print(f"HighwayHash-64: C {64 / 1.048576 / c:.0f} MB/s, Python {1 / 1.048576 / py:.1f} MB/s")
    data = small = b""

    with tempfile.TemporaryDirectory() as tmp:
        for options in args.options:
            path = Path(tmp) / "bench.array_record"
            count = write(path, options, args.mib)
            size = path.stat().st_size

            def peer(path: Path = path) -> object:
                reader = array_record_module.ArrayRecordReader(str(path))
                try:
                    return reader.read_all()
                finally:
                    reader.close()

            def records(path: Path = path) -> object:
                with path.open("rb") as f:
                    return list(iter_records(f))

            def scan(infer: bool, path: Path = path) -> Callable[[], object]:
                def run() -> object:
                    with path.open("rb") as f:
                        return scan_riegeli(f, infer_schema=infer)

                return run

            assert records() == list(peer())
            peer_s = median_seconds(peer, args.repeat)
            print(f"\n{options}: {count} records, {size / 1e6:.1f} MB on disk")
            print(f"  {'peer (array_record)':24} {size / 1e6 / peer_s:8.0f} MB/s")
            for name, fn in (
                ("records", records),
                ("scan", scan(False)),
                ("scan+schema", scan(True)),
            ):
                seconds = median_seconds(fn, args.repeat)
                print(f"  {name:24} {size / 1e6 / seconds:8.0f} MB/s  x{seconds / peer_s:.2f}")
            path.unlink()


if __name__ == "__main__":
    main()

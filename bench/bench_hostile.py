"""Hostile shards: memory and time to refuse a frame claiming 2**40 bytes (issue 14).

    .venv/bin/python bench/bench_hostile.py [--mib 400] [--repeat 3] [--compression none]

Writes two files of ``--mib`` MiB to a temporary directory: a healthy shard of 1 KiB records,
and the same records followed by a frame header with a *valid* CRC claiming 2**40 bytes (what a
flipped length byte, a half-written upload or a hostile producer leaves).  Each repetition reads
each file to its end or error with ``iter_records`` in a fresh process, alternating, and records
the process's peak RSS and the time.  The peer is the healthy file: refusing the hostile one
should cost no more memory than reading a good shard.  Prints medians and the ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

CHILD = r"""
import resource, sys, time
from recordkeeper.core.errors import CorruptShard
from recordkeeper.tfrecord import iter_records
start = time.perf_counter()
outcome = "ok"
try:
    with open(sys.argv[1], "rb") as fh:
        for _ in iter_records(fh, sys.argv[2]):
            pass
except CorruptShard as exc:
    outcome = "CorruptShard at offset %s" % exc.extra.get("offset")
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, outcome)
"""


def write_files(directory: Path, mib: int, compression: str) -> tuple[Path, Path]:
    """The healthy shard, and the hostile one: half the records, the 2**40 claim, then random
    bytes as long as the records it replaces."""
    from recordkeeper.tfrecord import _MEM_LEVEL, _WBITS, masked_crc32c

    def header(length: int) -> bytes:
        raw = length.to_bytes(8, "little")
        return raw + masked_crc32c(raw).to_bytes(4, "little")

    record = os.urandom(1024)
    frame = header(len(record)) + record + masked_crc32c(record).to_bytes(4, "little")
    count = (mib << 20) // len(frame)
    paths = directory / "healthy.tfrecord", directory / "hostile.tfrecord"
    for path in paths:
        compressor = (
            None
            if compression == "none"
            else zlib.compressobj(6, zlib.DEFLATED, _WBITS[compression], _MEM_LEVEL)
        )
        with path.open("wb") as fh:
            for i in range(count):
                if path.name.startswith("hostile") and i == count // 2:
                    chunk = header(1 << 40)
                elif path.name.startswith("hostile") and i > count // 2:
                    chunk = os.urandom(len(frame))
                else:
                    chunk = frame
                fh.write(chunk if compressor is None else compressor.compress(chunk))
            if compressor is not None:
                fh.write(compressor.flush())
    return paths


def run(path: Path, compression: str) -> tuple[float, float, str]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), compression],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split(maxsplit=2)
    return float(out[0]), int(out[1]) / 1024, out[2].strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compression", default="none", choices=["none", "gzip", "zlib"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        healthy, hostile = write_files(Path(tmp), args.mib, args.compression)
        results: dict[str, list[tuple[float, float, str]]] = {"healthy": [], "hostile": []}
        for _ in range(args.repeat):
            results["healthy"].append(run(healthy, args.compression))
            results["hostile"].append(run(hostile, args.compression))
    print(f"{args.mib} MiB, compression {args.compression}, {args.repeat} runs each (medians)")
    medians = {}
    for name, runs in results.items():
        seconds = statistics.median(r[0] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        medians[name] = (seconds, rss)
        print(f"  {name:8} {seconds:7.3f} s  peak RSS {rss:6.0f} MB  ({runs[0][2]})")
    ratio_rss = medians["hostile"][1] / medians["healthy"][1]
    ratio_time = medians["hostile"][0] / medians["healthy"][0]
    print(f"  hostile / healthy: RSS {ratio_rss:.2f}x, time {ratio_time:.3f}x")


if __name__ == "__main__":
    main()

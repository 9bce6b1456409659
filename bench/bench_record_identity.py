#!/usr/bin/env python3
"""What record identity costs when it is computed inline (issue 25, item 7), peers in the run.

Through the public client against the real service under uvicorn (SQLite registry in a temp
dir), ~1 KiB ``tf.train.Example`` records (the records of bench_client.py):

1. **writer**: ``--records`` records (default 200,000) to local disk by
   ``tf.io.TFRecordWriter`` (the peer), ``client.writer(record_index=False)`` and
   ``client.writer(record_index=True)`` (each record's sha256 identity, the shard's index
   sorted and stored beside it, the record identity registered at commit).  Target:
   ``record_index=True`` at or below 1.0x TensorFlow.
2. **publish in place**: ``--shards`` x ``--shard-mib`` MiB local shards, published with
   ``record_index=False`` and ``record_index=True`` (``force_new``: every round scans).
   Target: within 1.2x.
3. **deep verify** of that version: ``verify(deep=True)`` and
   ``verify(deep=True, record_index=True)`` (the index checked against the records).  Target:
   within 1.1x.
4. **index size**: the stored indexes' bytes against the data's, for these records and for
   100-byte records.

Every figure is the median of ``--rounds`` rounds; each round runs every contender once, the
order rotating from round to round; ``os.sync()`` before each timed run; each writer's output
is deleted right after it is timed.  CPU seconds (all threads of this process, the in-process
service's included) are printed beside wall times: on a shared 2-core machine the wall ratio
also measures the neighbours.

    .venv/bin/python bench/bench_record_identity.py [--records 200000] [--rounds 5]
        [--shards 8] [--shard-mib 32] [--only writer|publish|size ...]

Results are printed and written to ``bench/out/bench_record_identity.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from bench_client import _records, _timed, _write_shards  # noqa: E402

import recordkeeper as rk  # noqa: E402
from recordkeeper.record_ids import index_uri, native_ids  # noqa: E402
from tests.integration.conftest import start_live_service  # noqa: E402

OUT = ROOT / "bench" / "out"
RESULTS: dict[str, object] = {}


def _rm(uri: str) -> None:
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def _rounds(
    contenders: dict[str, Callable[[], str]], rounds: int, cleanup: bool = True
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    names = list(contenders)
    for name in names:  # warm-up, untimed (TensorFlow's runtime, the first connection)
        written = contenders[name]()
        if cleanup:
            _rm(written)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            w, c, written = _timed(contenders[name])
            if cleanup:
                _rm(written)
            wall[name].append(w)
            cpu[name].append(c)
    return wall, cpu


def _report(title: str, wall: dict[str, list[float]], cpu: dict[str, list[float]]) -> None:
    med = statistics.median
    print(f"\n[{title}]")
    for name in wall:
        runs = "/".join(f"{t:.3f}" for t in wall[name])
        print(
            f"  {name:34s} median {med(wall[name]):7.3f} s  CPU {med(cpu[name]):6.2f} s  "
            f"runs {runs}"
        )
    RESULTS[title] = {
        n: {"median_s": med(wall[n]), "cpu_s": med(cpu[n]), "runs": wall[n]} for n in wall
    }


def _ratio(title: str, a: str, b: str, target: float) -> None:
    data = RESULTS[title]
    assert isinstance(data, dict)
    ra = data[a]["median_s"] / data[b]["median_s"]
    rc = data[a]["cpu_s"] / data[b]["cpu_s"]
    verdict = "ok" if ra <= target else "OVER"
    print(f"  ratio {a} / {b}: {ra:.2f}x wall, {rc:.2f}x CPU (target <= {target}x: {verdict})")
    data.setdefault("ratios", {})[f"{a} / {b}"] = {"wall": ra, "cpu": rc, "target": target}


def bench_writer(work: Path, n: int, rounds: int) -> None:
    import tensorflow as tf

    records = _records(n)
    store = work / "wstore"
    store.mkdir()
    svc = start_live_service(
        storage_root=store.as_uri(),
        allowed_roots=[store.as_uri()],
        database_url=f"sqlite:///{work / 'wregistry.db'}",
    )
    try:
        client = svc.client()

        def with_tf() -> str:
            path = str(work / f"tf-{time.monotonic_ns()}.tfrecord")
            with tf.io.TFRecordWriter(path) as w:
                for rec in records:
                    w.write(rec)
            return path

        def with_rk(record_index: bool) -> Callable[[], str]:
            def run() -> str:
                with client.writer(
                    "wbench", shard_size="256MB", force_new=True, record_index=record_index
                ) as rw:
                    for rec in records:
                        rw.write(rec)
                if record_index:
                    assert rw.record_set is not None
                return rw.version.storage_prefix

            return run

        wall, cpu = _rounds(
            {
                "tf.io.TFRecordWriter": with_tf,
                "client.writer record_index=False": with_rk(False),
                "client.writer record_index=True": with_rk(True),
            },
            rounds,
        )
        size = sum(map(len, records)) / n
        _report(f"writer: {n} records of ~{size:.0f} B", wall, cpu)
        title = f"writer: {n} records of ~{size:.0f} B"
        _ratio(title, "client.writer record_index=True", "tf.io.TFRecordWriter", 1.0)
        _ratio(title, "client.writer record_index=False", "tf.io.TFRecordWriter", 1.0)
        _ratio(title, "client.writer record_index=True", "client.writer record_index=False", 99)
    finally:
        svc.stop()


def bench_publish_verify(work: Path, shards: int, shard_mib: int, rounds: int) -> None:
    data = work / "data"
    print(f"writing {shards} x {shard_mib} MiB shards …", flush=True)
    paths = _write_shards(data, shards, shard_mib)
    total = sum(p.stat().st_size for p in paths)
    store = work / "store"
    store.mkdir()
    svc = start_live_service(
        storage_root=store.as_uri(),
        allowed_roots=[store.as_uri(), data.as_uri()],
        database_url=f"sqlite:///{work / 'registry.db'}",
    )
    try:
        client = svc.client()
        published: list[rk.DatasetVersion] = []

        def publish(record_index: bool) -> Callable[[], str]:
            def run() -> str:
                v = client.publish(
                    rk.Dataset.from_directory(data, name="pbench"),
                    progress=False,
                    force_new=True,
                    record_index=record_index,
                )
                published.append(v)
                return ""

            return run

        wall, cpu = _rounds(
            {
                "publish record_index=False": publish(False),
                "publish record_index=True": publish(True),
            },
            rounds,
            cleanup=False,
        )
        title = f"publish in place: {shards} x {shard_mib} MiB ({total / 2**20:.0f} MiB)"
        _report(title, wall, cpu)
        _ratio(title, "publish record_index=True", "publish record_index=False", 1.2)

        v = published[-1]
        index_bytes = sum(os.path.getsize(index_uri(str(p))) for p in paths)
        records = v.record_count
        RESULTS["index size, ~1 KiB records"] = {
            "records": records,
            "data_bytes": total,
            "index_bytes": index_bytes,
            "ratio": index_bytes / total,
        }
        print(
            f"\n[index size] {records} records of ~{total / records:.0f} B stored: indexes "
            f"{index_bytes} B for {total} B of data = {100 * index_bytes / total:.2f} %"
        )

        def verify(record_index: bool) -> Callable[[], str]:
            def run() -> str:
                report = v.verify(deep=True, progress=False, record_index=record_index)
                assert report.ok
                return ""

            return run

        wall, cpu = _rounds(
            {
                "deep verify": verify(False),
                "deep verify record_index=True": verify(True),
            },
            rounds,
            cleanup=False,
        )
        title = f"deep verify: {shards} x {shard_mib} MiB"
        _report(title, wall, cpu)
        _ratio(title, "deep verify record_index=True", "deep verify", 1.1)
    finally:
        svc.stop()


def bench_size() -> None:
    """The index's size against the data's, by record size (TFRecord framing: 16 B/record)."""
    from recordkeeper.core.record_index import index_size

    print("\n[index size by record size] (one shard of 256 MB)")
    rows = {}
    for record in (100, 1024, 4096):
        n = 256_000_000 // (record + 16)
        data = n * (record + 16)
        idx = index_size(n)
        rows[record] = idx / data
        print(
            f"  {record:5d}-byte records: {idx} B of index per {data} B = {100 * idx / data:.2f} %"
        )
    RESULTS["index size by record size"] = rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--shard-mib", type=int, default=32)
    parser.add_argument("--only", choices=["writer", "publish", "size"], action="append")
    args = parser.parse_args()
    parts = set(args.only or ["writer", "publish", "size"])
    print(f"C identities: {native_ids()}; cores: {os.cpu_count()}; load {os.getloadavg()}")
    work = Path(tempfile.mkdtemp(prefix="rk-bench-ids-"))
    try:
        if "writer" in parts:
            bench_writer(work, args.records, args.rounds)
        if "publish" in parts:
            bench_publish_verify(work, args.shards, args.shard_mib, args.rounds)
        if "size" in parts:
            bench_size()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_record_identity.json").write_text(json.dumps(RESULTS, indent=2, default=str))


if __name__ == "__main__":
    main()

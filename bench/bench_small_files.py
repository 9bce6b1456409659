#!/usr/bin/env python3
"""Publishing many small shards: recordkeeper against the cost of merely reading or uploading
them (issue 23, item 7).

    .venv/bin/python bench/bench_small_files.py [--only local|s3] [--files 2000] [--s3-files 1000]
                                                [--repeat 5] [--profile]

1. **local**: ``--files`` TFRecord shards of ~4 KiB (four ~1 KiB Examples each) in one local
   directory, page cache warm.  Ours: ``client.publish`` in place (listing the directory,
   reading each shard once with sha256, CRC32C, records_sha256, every record CRC, schema
   inference, registration, commit).  Peer: a loop that opens each file, reads it and takes
   its sha256 (``hashlib``), the least any publish must do.
2. **s3**: ``--s3-files`` of the same shards on S3 (SeaweedFS, started here).  Ours:
   ``client.publish(..., copy_to=True)`` from a local directory into the service's storage
   root on S3 (hash first, stage, upload each shard hashed again, register, commit).  Peer:
   boto3 ``put_object`` of the same bytes to the same bucket, 16 threads (the client's own
   concurrency), which uploads and does nothing else.

The service runs in this process (SQLite registry, uvicorn on a free 127.0.0.1 port), so its
CPU is in our figure.  Contenders alternate; medians and the ratio ours/peer are printed.
``--profile`` prints a cProfile of one publish of each kind (sorted by cumulative time).
``bench_small_files_floor.py`` times the parts of the local publish that no publish can skip
(the C scan, the bare insert of the rows, one bare HTTP request) in the same run.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

import recordkeeper as rk  # noqa: E402
from tests.client._records import example_bytes, frame  # noqa: E402
from tests.integration.conftest import start_live_service  # noqa: E402


def shard_bodies(n: int) -> list[bytes]:
    """``n`` distinct ~4 KiB TFRecord shards of four ~1 KiB Examples each."""
    out = []
    for i in range(n):
        image = bytes([i % 251]) * 900 + i.to_bytes(8, "little")
        records = [example_bytes({"image": [image], "label": [j]}) for j in range(4)]
        out.append(frame(records))
    return out


def write_files(directory: Path, bodies: list[bytes]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, body in enumerate(bodies):
        path = directory / f"train-{i:05d}-of-{len(bodies):05d}.tfrecord"
        path.write_bytes(body)
        paths.append(path)
    return paths


def sha256_loop(paths: list[Path]) -> None:
    for path in paths:
        with open(path, "rb") as f:
            hashlib.sha256(f.read()).hexdigest()


def median_runs(
    contenders: list[tuple[str, Callable[[], object]]], repeat: int
) -> dict[str, list[float]]:
    runs: dict[str, list[float]] = {name: [] for name, _ in contenders}
    for _ in range(repeat):
        for name, fn in contenders:
            start = time.perf_counter()
            fn()
            runs[name].append(time.perf_counter() - start)
    return runs


def report(title: str, runs: dict[str, list[float]], n: int) -> None:
    med = {name: statistics.median(times) for name, times in runs.items()}
    print(f"\n[{title}] {n} files")
    for name, seconds in med.items():
        all_runs = "/".join(f"{t:.3f}" for t in runs[name])
        print(
            f"  {name:34} median {seconds:7.3f} s  {seconds / n * 1e6:7.0f} µs/file  "
            f"runs {all_runs}"
        )
    (ours, ours_s), (peer, peer_s) = list(med.items())
    print(f"  ratio {ours} / {peer}: {ours_s / peer_s:.2f}x")


def profile(fn: Callable[[], object], title: str) -> None:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    print(f"\n[profile: {title}]")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(30)


def local_setup(work: Path, n: int) -> tuple[list[Path], Any, Callable[[], None]]:
    """``n`` small shards under ``work/small``, a live service on SQLite (``work/registry.db``)
    allowed to publish them in place, and the timed publish: ``(paths, service, publish)``."""
    data = work / "small"
    paths = write_files(data, shard_bodies(n))
    store = work / "store"
    store.mkdir()
    svc = start_live_service(
        storage_root=store.as_uri(),
        allowed_roots=[store.as_uri(), data.as_uri()],
        database_url=f"sqlite:///{work / 'registry.db'}",
    )
    client = svc.client()

    def publish() -> None:
        v = client.publish(
            rk.Dataset.from_directory(data, name="small"), progress=False, force_new=True
        )
        assert v.shard_count == n

    return paths, svc, publish


def bench_local(work: Path, n: int, repeat: int, do_profile: bool) -> None:
    paths, svc, publish = local_setup(work, n)
    try:
        publish()  # warm-up: the dataset exists, the service's caches are warm
        sha256_loop(paths)
        runs = median_runs(
            [
                ("publish in place (ours)", publish),
                ("sha256 loop (peer)", lambda: sha256_loop(paths)),
            ],
            repeat,
        )
        report("local publish in place of ~4 KiB shards", runs, n)
        if do_profile:
            profile(publish, "local publish in place")
    finally:
        svc.stop()


def bench_s3(work: Path, n: int, repeat: int, do_profile: bool) -> None:
    from tests.servers.s3 import start_s3_server

    bodies = shard_bodies(n)
    data = work / "s3src"
    write_files(data, bodies)
    srv = start_s3_server()
    try:
        bucket = srv.make_bucket()
        name = bucket.removeprefix("s3://")
        opts = srv.storage_options
        s3 = srv.boto3_client()
        svc = start_live_service(
            storage_root=f"{bucket}/datasets",
            allowed_roots=[bucket, data.as_uri()],
            database_url=f"sqlite:///{work / 's3registry.db'}",
        )
        try:
            client = svc.client(storage_options=opts)
            round_no = [0]

            def boto3_put() -> None:
                round_no[0] += 1
                prefix = f"peer{round_no[0]}"

                def put(i: int) -> None:
                    s3.put_object(
                        Bucket=name,
                        Key=f"{prefix}/train-{i:05d}-of-{n:05d}.tfrecord",
                        Body=bodies[i],
                    )

                with ThreadPoolExecutor(16) as pool:
                    list(pool.map(put, range(n)))

            def publish_copy() -> None:
                v = client.publish(
                    rk.Dataset.from_directory(data, name="s3small"),
                    copy_to=True,
                    progress=False,
                    force_new=True,
                )
                assert v.shard_count == n

            publish_copy()  # warm-up (connections, the dataset exists)
            boto3_put()
            runs = median_runs(
                [
                    ("publish --copy to S3 (ours)", publish_copy),
                    ("boto3 put_object (peer)", boto3_put),
                ],
                repeat,
            )
            report("publish --copy of ~4 KiB shards to S3 (SeaweedFS)", runs, n)
            if do_profile:
                profile(publish_copy, "publish --copy to S3")
        finally:
            svc.stop()
    finally:
        srv.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["local", "s3"], action="append")
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--s3-files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    parts = set(args.only or ["local", "s3"])
    work = Path(tempfile.mkdtemp(prefix="rk-smallbench-"))
    try:
        if "local" in parts:
            bench_local(work, args.files, args.repeat, args.profile)
        if "s3" in parts:
            bench_s3(work, args.s3_files, args.repeat, args.profile)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

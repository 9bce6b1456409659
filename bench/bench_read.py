#!/usr/bin/env python3
"""Read throughput of ``tf_dataset`` (issue 26, item 4) — each case against a peer in the run.

Everything goes through the public client against the real service (uvicorn, SQLite registry in
a temp dir); shards are ~1 KiB ``tf.train.Example`` records published in place.

Local (page-cached files), each case vs ``tf.data.TFRecordDataset(files)`` over the same files:

1. uncompressed, batched (``.batch(256)``), no parsing;
2. GZIP shards, batched, no parsing;
3. uncompressed, batched and parsed (``tf.io.parse_example`` with the version's feature spec).

S3 (SeaweedFS on 127.0.0.1), the same shards uploaded:

4. ``tf_dataset`` (fsspec streaming, no cache) vs the peer: a plain s3fs-fed ``tf.data``
   pipeline — one ``from_generator`` per shard reading the object with s3fs and splitting the
   TFRecord framing in Python (no CRC check), batches of 256 unbatched, shards interleaved
   (``cycle_length=8``, ``AUTOTUNE``, deterministic);
5. ``tf_dataset(cache=True)``: the first epoch (into an empty cache: shards downloaded whole a
   few ahead, each hashed as it arrives and admitted on a match, TensorFlow reading the admitted
   copies) vs the same s3fs peer; the cached epoch of a dataset made once the cache is full, and
   the next epoch of the dataset whose first epoch filled it, each vs the local
   ``TFRecordDataset`` peer.

    .venv/bin/python bench/bench_read.py [--rounds 5] [--shards 8] [--records 16384] [--skip-s3]

Every figure is the median of ``--rounds`` runs, alternating with its peer; ratios are
peer time / our time (> 1: faster than the peer).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import recordkeeper as rk  # noqa: E402
from recordkeeper.shard_cache import ShardCache  # noqa: E402
from tests.integration.conftest import start_live_service  # noqa: E402


def _records(n: int) -> list[bytes]:
    from bench.bench_client import _records as records

    return records(n)


def _write(tf: Any, directory: Path, shards: int, per_shard: int, gzip: bool) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    template = _records(4096)
    paths = []
    for s in range(shards):
        path = directory / (f"train-{s:05d}-of-{shards:05d}.tfrecord" + (".gz" if gzip else ""))
        with tf.io.TFRecordWriter(str(path), options="GZIP" if gzip else None) as w:
            for i in range(per_shard):
                w.write(template[(i + s * 7) % len(template)])
        paths.append(str(path))
    return paths


def _count(ds: Any) -> int:
    n = 0
    for batch in ds:
        n += (
            int(batch.shape[0])
            if hasattr(batch, "shape")
            else int(next(iter(batch.values())).shape[0])
        )
    return n


def _compare(
    name: str, ours: Callable[[], Any], peer: Callable[[], Any], expect: int, rounds: int
) -> tuple[float, float]:
    """Medians of ``rounds`` timed runs of each, alternating which goes first (ABBA); wall
    time, and the process's CPU time (all threads) as a second view on a loaded machine."""
    mine, theirs, mine_cpu, theirs_cpu = [], [], [], []
    for r in range(rounds):
        pair = ((peer, theirs, theirs_cpu), (ours, mine, mine_cpu))
        for fn, out, cpu in pair if r % 2 == 0 else pair[::-1]:
            ds = fn()
            start, c0 = time.perf_counter(), time.process_time()
            got = _count(ds)
            out.append(time.perf_counter() - start)
            cpu.append(time.process_time() - c0)
            assert got == expect, (name, got, expect)
    m, p = statistics.median(mine), statistics.median(theirs)
    mc, pc = statistics.median(mine_cpu), statistics.median(theirs_cpu)
    print(
        f"{name:<52} ours {expect / m / 1e3:6.0f}k rec/s  peer {expect / p / 1e3:6.0f}k rec/s  "
        f"ratio {p / m:.2f}x (CPU {pc / mc:.2f}x)  [ours {m:.2f} s, {mc:.2f} s CPU; "
        f"peer {p:.2f} s, {pc:.2f} s CPU]  load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return m, p


def local_cases(tf: Any, client: rk.Client, work: Path, args: argparse.Namespace) -> None:
    for gzip in (False, True):
        data = work / ("gz" if gzip else "plain")
        paths = _write(tf, data, args.shards, args.records, gzip)
        v = client.publish(
            rk.Dataset.from_directory(data, name="gz" if gzip else "plain"), progress=False
        )
        _local_case(tf, v, paths, gzip, False, args)
        if not gzip:
            _local_case(tf, v, paths, gzip, True, args)


def _local_case(
    tf: Any, v: rk.DatasetVersion, paths: list[str], gzip: bool, parse: bool, args: Any
) -> None:
    comp = "GZIP" if gzip else ""
    spec = v.feature_spec() if parse else None

    def finish(ds: Any) -> Any:
        ds = ds.batch(256)
        return ds.map(lambda b: tf.io.parse_example(b, spec)) if parse else ds

    label = "gzip" if gzip else "uncompressed"
    _compare(
        f"local {label}, batched, " + ("parsed" if parse else "no parsing"),
        lambda: finish(v.tf_dataset("train", verify=None)),
        lambda: finish(tf.data.TFRecordDataset(paths, compression_type=comp)),
        args.shards * args.records,
        args.rounds,
    )


def s3_cases(tf: Any, work: Path, args: argparse.Namespace) -> None:
    import s3fs

    from tests.servers.s3 import start_s3_server

    n = args.shards * args.records
    server = start_s3_server()
    try:
        bucket = server.make_bucket()
        opts = server.storage_options
        fs = s3fs.S3FileSystem(**opts)
        data = work / "s3src"
        paths = _write(tf, data, args.shards, args.records, False)
        for p in paths:
            fs.put(p, f"{bucket}/raw/{Path(p).name}")
        svc = start_live_service(
            storage_root=f"{bucket}/datasets",
            allowed_roots=[bucket],
            database_url=f"sqlite:///{work / 's3.db'}",
        )
        try:
            client = svc.client(storage_options=opts)
            v = client.publish(
                rk.Dataset.from_directory(f"{bucket}/raw", name="s3read", storage_options=opts),
                progress=False,
            )
            uris = v.files("train")

            def shard_records(uri: bytes) -> Any:
                with fs.open(uri.decode(), "rb", block_size=8 << 20) as fh:
                    data = fh.read()
                out, pos = [], 0
                while pos < len(data):
                    (size,) = struct.unpack_from("<Q", data, pos)
                    out.append(data[pos + 12 : pos + 12 + size])
                    pos += 16 + size
                    if len(out) == 256:
                        yield out
                        out = []
                if out:
                    yield out

            def s3fs_peer() -> Any:
                return (
                    tf.data.Dataset.from_tensor_slices(uris)
                    .interleave(
                        lambda u: tf.data.Dataset.from_generator(
                            shard_records,
                            args=(u,),
                            output_signature=tf.TensorSpec((None,), tf.string),
                        ).unbatch(),
                        cycle_length=8,
                        num_parallel_calls=tf.data.AUTOTUNE,
                        deterministic=True,
                    )
                    .batch(256)
                )

            _compare(
                "S3 streaming (no cache) vs s3fs tf.data",
                lambda: v.tf_dataset("train").batch(256),
                s3fs_peer,
                n,
                args.rounds,
            )
            caches: list[Path] = []

            def first_epoch() -> Any:
                directory = Path(tempfile.mkdtemp(dir=work))
                caches.append(directory)
                return v.tf_dataset("train", cache=ShardCache(directory)).batch(256)

            _compare(
                "S3 cache=True, first epoch vs s3fs tf.data", first_epoch, s3fs_peer, n, args.rounds
            )
            warm = ShardCache(caches[-1])
            cached = v.tf_dataset("train", cache=warm).batch(256)
            _count(cached)  # filled
            _compare(
                "S3 cache=True, cached epoch vs local TFRecordDataset",
                lambda: cached,
                lambda: tf.data.TFRecordDataset(paths).batch(256),
                n,
                args.rounds,
            )
            # the dataset whose first epoch filled the cache, its next epoch
            caches.append(Path(tempfile.mkdtemp(dir=work)))
            filling = v.tf_dataset("train", cache=ShardCache(caches[-1])).batch(256)
            _count(filling)  # its first epoch, filling the cache
            _compare(
                "S3 cache=True, same dataset's next epoch vs local",
                lambda: filling,
                lambda: tf.data.TFRecordDataset(paths).batch(256),
                n,
                args.rounds,
            )
            for c in caches:
                shutil.rmtree(c, ignore_errors=True)
        finally:
            svc.stop()
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--records", type=int, default=16384)
    parser.add_argument("--skip-s3", action="store_true")
    parser.add_argument("--skip-local", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    work = Path(tempfile.mkdtemp(prefix="rk-bench-read-"))
    print(
        f"{args.shards} shards x {args.records} ~1 KiB records, {args.rounds} rounds, load "
        f"{os.getloadavg()[0]:.1f}",
        flush=True,
    )
    try:
        if not args.skip_local:
            svc = start_live_service(
                storage_root=(work / "store").as_uri(),
                allowed_roots=[(work / "store").as_uri(), work.as_uri()],
                database_url=f"sqlite:///{work / 'local.db'}",
            )
            try:
                local_cases(tf, svc.client(), work, args)
            finally:
                svc.stop()
        if not args.skip_s3:
            s3_cases(tf, work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""ArrayRecord through recordkeeper against the ``array_record`` wheel alone, same records.

    .venv/bin/python bench/bench_array_record.py [--mib 32] [--shards 4] [--repeat 5]
                                                 [--options group_size:1 ...]

The records are ~1 KiB ``tf.train.Example`` records (bench_riegeli's pool: 512 distinct ones
cycled, 1/4 of each random so compression is realistic), ``--mib`` MiB of them split over
``--shards`` files.  The service runs in this process (SQLite registry, uvicorn on a free
127.0.0.1 port), as in bench_client.py.  For each writer options string (default: the wheel's
own default, one record per chunk and zstd, which TFDS and Grain write):

* **write**: ``client.writer(..., format="array_record")`` (sha256/CRC32C of the stored bytes,
  records_sha256 in the canonical framing, schema inference, registration and commit) vs
  ``ArrayRecordWriter`` writing the same records to the same number of local files;
* **publish**: ``client.publish`` in place of the files the wheel wrote (every block and chunk
  hash checked, records decoded and hashed, schema inferred, registered) vs
  ``ArrayRecordReader.read_all()`` over the same files;
* **deep verify**: ``v.verify(deep=True)`` of that version vs the same ``read_all()``.

Contenders alternate within each repetition; medians are printed with the ratio
ours/peer (> 1: slower than the wheel alone).

``--floor`` also times, on the same files in the same run (alternating with the wheel's read,
medians), each computation publish and deep verify must make, alone: reading the file,
sha256 and CRC32C of its bytes, the chunk walk (HighwayHash of every block header, chunk
header and chunk data, zstd, the records framed canonically), sha256 of the framed records
(``records_sha256``), the record identities (a sha256 per record) and schema inference's
structure keys; and publish's fixed cost (the same files cut to 10 records each).  The three
digests alone (the file's sha256, ``records_sha256``, the identities) are work no reader that
keeps their values can skip, before it decodes anything.  The sum of all the parts is the
one-core floor (each part alone streams its data from memory; the scan does them on pieces
still in the cache, and comes in a little under it); with two cores the file's sha256 and
``records_sha256`` run on a second thread beside the walk and identities, so the floor is the
larger of the two sums.

``--one {write,publish,verify,read,wheel-write} --url URL --dir DIR`` runs one side once in a
fresh process, for timing whole processes from outside (against a service started with
``--serve DIR``, which prints its URL and waits).
"""

from __future__ import annotations

import argparse
import gc
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
sys.path.insert(0, str(ROOT / "client"))
sys.path.insert(0, str(ROOT / "bench"))

from array_record.python import array_record_module  # noqa: E402

import recordkeeper as rk  # noqa: E402
from recordkeeper import _native  # noqa: E402


def records(mib: int) -> list[bytes]:
    from bench_riegeli import pool

    cycle = pool()
    out: list[bytes] = []
    total = 0
    while total < mib << 20:
        record = cycle[len(out) % len(cycle)]
        out.append(record)
        total += len(record)
    return out


def split(recs: list[bytes], shards: int) -> list[list[bytes]]:
    per = -(-len(recs) // shards)
    return [recs[i : i + per] for i in range(0, len(recs), per)]


def wheel_write(directory: Path, parts: list[list[bytes]], options: str) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, part in enumerate(parts):
        path = directory / f"train-{i:05d}-of-{len(parts):05d}.array_record"
        writer = array_record_module.ArrayRecordWriter(str(path), options)
        for record in part:
            writer.write(record)
        writer.close()
        paths.append(path)
    return paths


def wheel_read(paths: list[Path]) -> int:
    n = 0
    for path in paths:
        reader = array_record_module.ArrayRecordReader(str(path))
        try:
            n += len(reader.read_all())
        finally:
            reader.close()
    return n


def rk_write(client: rk.Client, parts: list[list[bytes]], options: str) -> rk.DatasetVersion:
    fmt_options = {"options": options} if options else None
    size = sum(map(len, parts[0])) + (1 << 20)  # one shard per part, as the wheel's files
    with client.writer(
        "arbench-w",
        format="array_record",
        format_options=fmt_options,
        shard_size=size,
        force_new=True,
    ) as w:
        write = w.write
        for part in parts:
            for record in part:
                write(record)
    return w.version


def rk_publish(client: rk.Client, directory: Path) -> rk.DatasetVersion:
    return client.publish(
        rk.Dataset.from_directory(directory, name="arbench-p"), progress=False, force_new=True
    )


def rk_verify(version: rk.DatasetVersion) -> None:
    report = version.verify(deep=True, progress=False)
    assert report.ok, report.problems[:3]


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds (every thread of this process, the service's included)."""
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def bench(client: rk.Client, work: Path, args: argparse.Namespace, options: str) -> None:
    recs = records(args.mib)
    parts = split(recs, args.shards)
    nbytes = sum(map(len, recs))
    data = work / "data"
    paths = wheel_write(data, parts, options)
    on_disk = sum(p.stat().st_size for p in paths)
    version = rk_publish(client, data)
    assert version.record_count == len(recs)
    out = work / "wheel-out"
    runs: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}

    def run(name: str, fn: Callable[[], object]) -> None:
        wall, cpu = timed(fn)
        runs.setdefault(name, []).append(wall)
        cpus.setdefault(name, []).append(cpu)

    for _ in range(args.repeat):
        os.sync()
        run("write: wheel", lambda: wheel_write(out, parts, options))
        shutil.rmtree(out)
        os.sync()
        written: list[rk.DatasetVersion] = []

        def write_ours(written: list[rk.DatasetVersion] = written) -> None:
            written.append(rk_write(client, parts, options))

        run("write: ours", write_ours)
        shutil.rmtree(written[0].storage_prefix.removeprefix("file://"), ignore_errors=True)
        run("read: wheel", lambda: wheel_read(paths))
        run("publish: ours", lambda: rk_publish(client, data))
        run("deep verify: ours", lambda: rk_verify(version))
    med = {name: statistics.median(times) for name, times in runs.items()}
    cpu = {name: statistics.median(times) for name, times in cpus.items()}
    label = options or "wheel default (group_size:1, zstd)"
    print(
        f"\n{label}: {len(recs)} records, {nbytes / 1e6:.1f} MB of records, "
        f"{on_disk / 1e6:.1f} MB on disk, {len(paths)} files"
    )
    for name, seconds in med.items():
        rate = nbytes / 1e6 / seconds
        all_runs = "/".join(f"{t:.3f}" for t in runs[name])
        print(
            f"  {name:20} median {seconds:7.3f} s  {rate:6.0f} MB/s of records  "
            f"CPU {cpu[name]:.3f} s  runs {all_runs}"
        )
    for label, table in (("wall", med), ("CPU", cpu)):
        read = table["read: wheel"]
        print(
            f"  ratios ours/wheel ({label}): "
            f"write {table['write: ours'] / table['write: wheel']:.2f}x, "
            f"publish {table['publish: ours'] / read:.2f}x, "
            f"deep verify {table['deep verify: ours'] / read:.2f}x"
        )
    if args.floor:
        floor(client, work, paths, parts, options, args.repeat)
    shutil.rmtree(data)


def floor(
    client: rk.Client,
    work: Path,
    paths: list[Path],
    parts: list[list[bytes]],
    options: str,
    repeat: int,
) -> None:
    """Each required computation alone on the same files, the wheel's read beside it."""
    import hashlib
    import io

    from crc32c import crc32c

    from recordkeeper.record_ids import RecordIds
    from recordkeeper.riegeli.reader import RiegeliReader
    from recordkeeper.riegeli.scan import scan_riegeli

    speedups = _native.speedups
    assert speedups is not None, "the floor is measured with the C extension"
    files = [p.read_bytes() for p in paths]
    framed = [b"".join(RiegeliReader(io.BytesIO(f)).framed()) for f in files]
    tiny = work / "tiny"
    wheel_write(tiny, [part[:10] for part in parts], options)
    rk_publish_named(client, tiny, "tiny")

    def walk() -> None:
        for f in files:
            for _ in RiegeliReader(io.BytesIO(f)).framed():
                pass

    def ids() -> None:
        for fr in framed:
            speedups.deframe(fr, 0, False, False, bytearray(), 16)

    def keys() -> None:
        for fr in framed:
            speedups.deframe_keys(fr, 0, False)

    def scans(schema: bool) -> Callable[[], None]:
        def run() -> None:
            for f in files:
                scan_riegeli(io.BytesIO(f), infer_schema=schema, record_ids=RecordIds())

        return run

    parts_timed: list[tuple[str, Callable[[], object]]] = [
        ("read: wheel", lambda: wheel_read(paths)),
        ("read the files", lambda: [p.read_bytes() for p in paths]),
        ("sha256 of the file bytes", lambda: [hashlib.sha256(f).digest() for f in files]),
        ("CRC32C of the file bytes", lambda: [crc32c(f) for f in files]),
        ("chunk walk (HighwayHash, zstd, framing)", walk),
        ("sha256 of the framed records", lambda: [hashlib.sha256(f).digest() for f in framed]),
        ("record identities (sha256 each)", ids),
        ("schema inference keys", keys),
        ("scan as deep verify, file by file", scans(False)),
        ("scan as publish, file by file", scans(True)),
        ("publish fixed cost (10 records/file)", lambda: rk_publish_named(client, tiny, "tiny")),
    ]
    cpu: dict[str, list[float]] = {}
    wall: dict[str, list[float]] = {}
    for _ in range(max(repeat, 5)):
        for name, fn in parts_timed:
            w, c = timed(fn)
            wall.setdefault(name, []).append(w)
            cpu.setdefault(name, []).append(c)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    medw = {k: statistics.median(v) for k, v in wall.items()}
    read = med["read: wheel"]
    print(f"  the floor (same files, CPU medians of {max(repeat, 5)}; ratio to the wheel's read):")
    for name, _ in parts_timed:
        print(
            f"    {name:42} CPU {med[name] * 1e3:7.1f} ms ({med[name] / read:5.2f}x)"
            f"  wall {medw[name] * 1e3:7.1f} ms"
        )
    digests = med["sha256 of the file bytes"] + med["sha256 of the framed records"]
    digests += med["record identities (sha256 each)"]
    print(
        f"    the digests alone (file sha256, records_sha256, identities): one core "
        f"{digests * 1e3:6.1f} ms ({digests / read:.2f}x), before any decoding"
    )
    reader_side = med["read the files"] + med["chunk walk (HighwayHash, zstd, framing)"]
    reader_side += med["record identities (sha256 each)"] + med["CRC32C of the file bytes"]
    hashing = med["sha256 of the file bytes"] + med["sha256 of the framed records"]
    schema = med["schema inference keys"]
    fixed = med["publish fixed cost (10 records/file)"]
    for what, extra, fixed_part in (("deep verify", 0.0, 0.0), ("publish", schema, fixed)):
        one_core = reader_side + extra + hashing + fixed_part
        two_cores = max(reader_side + extra, hashing) + fixed_part
        print(
            f"    floor of {what:11}: one core {one_core * 1e3:6.1f} ms ({one_core / read:.2f}x), "
            f"two cores {two_cores * 1e3:6.1f} ms ({two_cores / read:.2f}x)"
        )
    shutil.rmtree(tiny)


def rk_publish_named(client: rk.Client, directory: Path, name: str) -> rk.DatasetVersion:
    return client.publish(
        rk.Dataset.from_directory(directory, name=f"arbench-{name}"), progress=False, force_new=True
    )


def one(args: argparse.Namespace) -> None:
    """One side, once, for whole-process timing."""
    directory = Path(args.dir)
    if args.one == "read":
        wheel_read(sorted(directory.glob("*.array_record")))
        return
    if args.one == "wheel-write":
        out = Path(tempfile.mkdtemp(prefix="rk-arbench-"))
        try:
            wheel_write(out, split(records(args.mib), args.shards), args.options[0])
        finally:
            shutil.rmtree(out)
        return
    client = rk.Client(args.url)
    if args.one == "write":
        v = rk_write(client, split(records(args.mib), args.shards), args.options[0])
        shutil.rmtree(v.storage_prefix.removeprefix("file://"), ignore_errors=True)
    elif args.one == "publish":
        rk_publish(client, directory)
    elif args.one == "verify":
        rk_verify(client.resolve("arbench-p@latest"))


def serve(args: argparse.Namespace) -> None:
    """A service for --one runs; writes the wheel's files into DIR/data first."""
    from tests.integration.conftest import start_live_service

    work = Path(args.dir)
    (work / "store").mkdir(parents=True, exist_ok=True)
    wheel_write(work / "data", split(records(args.mib), args.shards), args.options[0])
    svc = start_live_service(
        storage_root=(work / "store").as_uri(),
        allowed_roots=[(work / "store").as_uri(), (work / "data").as_uri()],
        database_url=f"sqlite:///{work / 'registry.db'}",
    )
    rk_publish(svc.client(), work / "data")
    print(svc.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        svc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=32, help="MiB of records")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--options", nargs="*", default=[""])
    parser.add_argument("--floor", action="store_true", help="time each required part alone")
    parser.add_argument("--one", choices=["write", "publish", "verify", "read", "wheel-write"])
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--url")
    parser.add_argument("--dir")
    args = parser.parse_args()
    if args.serve:
        serve(args)
        return
    if args.one:
        one(args)
        return
    from tests.integration.conftest import start_live_service

    print(f"C extension: {'yes' if _native.speedups is not None else 'NO (pure Python)'}")
    work = Path(tempfile.mkdtemp(prefix="rk-arbench-"))
    try:
        (work / "store").mkdir()
        svc = start_live_service(
            storage_root=(work / "store").as_uri(),
            allowed_roots=[
                (work / "store").as_uri(),
                (work / "data").as_uri(),
                (work / "tiny").as_uri(),
            ],
            database_url=f"sqlite:///{work / 'registry.db'}",
        )
        try:
            for options in args.options:
                bench(svc.client(), work, args, options)
        finally:
            svc.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

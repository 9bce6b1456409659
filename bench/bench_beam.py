#!/usr/bin/env python3
"""Writing a version from Apache Beam vs ``client.writer`` on one core, same data, same run.

    .venv/bin/python bench/bench_beam.py [--mib 256] [--repeat 3] [--workers 2]

Both write the same ~1 KiB ``tf.train.Example`` records (a pool of 512 distinct records cycled,
built once per process, so generating them costs almost nothing) as one uncompressed split to a
local store, through the real service under uvicorn (SQLite registry), hashes, schema,
registration and commit included:

* **peer**: ``client.writer`` in this process (one core);
* **beam**: ``WriteVersionedTFRecords`` on the DirectRunner with ``--direct_num_workers=N
  --direct_running_mode=multi_processing``; records are generated in the workers
  (``Create(chunks) | FlatMap``), keyed, grouped (the runner's shuffle: every byte crosses
  the runner process), written by the workers and committed once.  Includes the ~3 s the
  runner needs to start its worker processes.

Two floors of the runner itself, on the same records in the same run, show where the Beam time
goes: generating the records and counting them (per-element cost, no shuffle), and generating
them as keyed 4096-record lists and grouping them (the shuffle of the same bytes, no writing).

Prints the median of each and the ratio (beam time / writer time: < 1 means beam is faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT / "client"), str(ROOT / "service"), str(ROOT), os.environ.get("PYTHONPATH", "")]
)

import apache_beam as beam  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from recordkeeper.beam import WriteVersionedTFRecords  # noqa: E402
from tests.client._records import example_bytes  # noqa: E402
from tests.integration.conftest import start_live_service  # noqa: E402

CHUNK = 4096  # records per generated chunk
_POOL: list[bytes] = []


def pool() -> list[bytes]:
    """512 distinct ~1 KiB Examples (built once per process)."""
    if not _POOL:
        rnd = os.urandom(896 * 64)
        for i in range(512):
            j = i % 64
            _POOL.append(
                example_bytes(
                    {
                        "image": [rnd[j * 896 : (j + 1) * 896]],
                        "label": [i % 91],
                        "boxes": [float(k) / 3 for k in range(16)],
                        "id": [i],
                    }
                )
            )
    return _POOL


def chunk_records(chunk: int, total: int) -> Iterator[bytes]:
    """The records of one chunk (the last one may be short)."""
    records = pool()
    start = chunk * CHUNK
    for i in range(start, min(start + CHUNK, total)):
        yield records[i % len(records)]


def run_writer(client: object, total: int) -> float:
    start = time.perf_counter()
    with client.writer("peer", shard_size="64MB", force_new=True) as w:  # type: ignore[attr-defined]
        for chunk in range((total + CHUNK - 1) // CHUNK):
            for record in chunk_records(chunk, total):
                w.write(record)
    return time.perf_counter() - start


def chunk_batch(chunk: int, total: int) -> Iterator[tuple[int, list[bytes]]]:
    """One chunk as a single keyed list (the shuffle floor's element)."""
    yield chunk % 8, list(chunk_records(chunk, total))


def _options(workers: int) -> PipelineOptions:
    return PipelineOptions(
        [
            "--runner=DirectRunner",
            f"--direct_num_workers={workers}",
            "--direct_running_mode=multi_processing",
        ]
    )


def run_beam(client: object, total: int, workers: int) -> float:
    chunks = (total + CHUNK - 1) // CHUNK
    start = time.perf_counter()
    with beam.Pipeline(options=_options(workers)) as p:
        _ = (
            p
            | beam.Create(list(range(chunks)))
            | beam.FlatMap(chunk_records, total)
            | WriteVersionedTFRecords(
                "beam", shard_size="64MB", num_shards=8, force_new=True, client=client
            )
        )
    return time.perf_counter() - start


def run_floor(total: int, workers: int, shuffle: bool) -> float:
    """The runner alone on the same data: generate + count, or generate + GroupByKey."""
    chunks = (total + CHUNK - 1) // CHUNK
    start = time.perf_counter()
    with beam.Pipeline(options=_options(workers)) as p:
        made = p | beam.Create(list(range(chunks)))
        if shuffle:
            _ = (
                made
                | beam.FlatMap(chunk_batch, total)
                | beam.GroupByKey()
                | beam.Map(lambda kv: sum(len(batch) for batch in kv[1]))
                | beam.combiners.Count.Globally()
            )
        else:
            _ = made | beam.FlatMap(chunk_records, total) | beam.combiners.Count.Globally()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    total = args.mib * 2**20 // (len(pool()[0]) + 16)
    work = Path(tempfile.mkdtemp(prefix="rk-bench-beam-"))
    store = work / "store"
    store.mkdir()
    svc = start_live_service(
        storage_root=store.as_uri(),
        allowed_roots=[store.as_uri()],
        database_url=f"sqlite:///{work / 'registry.db'}",
    )
    import recordkeeper as rk

    client = rk.Client(svc.url)
    times: dict[str, list[float]] = {"writer": [], "beam": [], "count": [], "shuffle": []}
    try:
        for rnd in range(args.repeat):
            times["writer"].append(run_writer(client, total))
            times["beam"].append(run_beam(client, total, args.workers))
            times["count"].append(run_floor(total, args.workers, shuffle=False))
            times["shuffle"].append(run_floor(total, args.workers, shuffle=True))
            print(f"round {rnd}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()))
        size = client.resolve("beam@latest").size
        med = {k: statistics.median(v) for k, v in times.items()}
        w, b = med["writer"], med["beam"]
        print(
            f"\n{total} records, {size / 2**20:.0f} MiB, medians of {args.repeat}:\n"
            f"  client.writer (1 core)                      {w:6.2f} s "
            f"({size / 2**20 / w:.0f} MiB/s)\n"
            f"  WriteVersionedTFRecords ({args.workers} workers)         {b:6.2f} s "
            f"({size / 2**20 / b:.0f} MiB/s)   ratio beam/writer {b / w:.2f}x\n"
            f"  runner floor: generate + count              {med['count']:6.2f} s\n"
            f"  runner floor: generate + GroupByKey          {med['shuffle']:6.2f} s"
        )
    finally:
        client.close()
        svc.stop()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

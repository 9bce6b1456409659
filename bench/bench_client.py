#!/usr/bin/env python3
"""Client benchmarks: publish in place, deep/fast verify, resolve, writer — with peers.

Everything runs through the public client against the real service under uvicorn on a free
127.0.0.1 port (SQLite registry in a temp dir), as users run it:

1. **publish in place**: 16 x 64 MiB local shards of ~1 KiB ``tf.train.Example`` records
   (1 GiB): sha256, crc32c, records_sha256, record counts, every record CRC and the schema.
   Peer: ``dvc add`` on the same files in the same run when a ``dvc`` executable is found
   (``$RK_BENCH_DVC`` or on ``PATH``; e.g. ``python3 -m venv /tmp/dvcenv &&
   /tmp/dvcenv/bin/pip install dvc``), else the ~2.6 s measured here before, quoted.
2. **deep verify** of that version on N threads vs ``hashlib.sha256`` over the same files on
   the same N threads (a file each, 4 MiB reads), alternating in the same run.
3. **S3**: 1,000 small shards on the S3 server (SeaweedFS): publish in place (listing the
   directory included) and fast verify (no download).
4. **resolve** of a 10,000-shard version through the client (``--only-resolve``): cold (nothing
   held; compact shard pages), held (one conditional request answered 304), and the peer in the
   same run: the whole Version answer in the full form turned into value objects (how the client
   resolved before).
5. **writer**: 200k ~1 KiB Examples to local disk through ``client.writer`` (hashing and
   schema inference included) vs ``tf.io.TFRecordWriter`` writing the same serialized records
   (skipped when TensorFlow is missing); ``--writer-keep`` keeps every round's files (see
   :func:`bench_writer`).

    .venv/bin/python bench/bench_client.py [--only local|s3|writer ...] [--rounds 5]
                                           [--skip-s3] [--skip-tf] [--shards 16] [--shard-mib 64]
                                           [--writer-keep]

Every figure is the median of ``--rounds`` runs, alternating with its peer.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import recordkeeper as rk  # noqa: E402
from recordkeeper.tfrecord import TFRecordWriter  # noqa: E402
from tests.client._records import example_bytes  # noqa: E402
from tests.integration._load import shard_bodies  # noqa: E402
from tests.integration.conftest import start_live_service  # noqa: E402


def _records(n: int, seed: int = 0) -> list[bytes]:
    """~1 KiB Examples: an 896-byte image, a label, 16 float boxes, an id."""
    rnd = os.urandom(896 * 64)
    out = []
    for i in range(n):
        j = (i * 7 + seed) % 64
        out.append(
            example_bytes(
                {
                    "image": [rnd[j * 896 : (j + 1) * 896]],
                    "label": [i % 91],
                    "boxes": [float(k) / 3 for k in range(16)],
                    "id": [seed * 10_000_000 + i],
                }
            )
        )
    return out


def _write_shards(directory: Path, shards: int, shard_mib: int) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    template = _records(4096)
    per_record = len(template[0]) + 16
    n = shard_mib * 2**20 // per_record
    paths = []
    for s in range(shards):
        path = directory / f"train-{s:05d}-of-{shards:05d}.tfrecord"
        with TFRecordWriter(str(path), infer_schema=False) as w:
            for i in range(n):
                rec = template[(i + s) % len(template)]
                at = rec.find(b"\x0a\x80\x07") + 3  # bytes_list value of 896 bytes: the image
                w.write(rec[:at] + (s * n + i).to_bytes(8, "little") + rec[at + 8 :])
        paths.append(path)
    return paths


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(4 << 20):
            h.update(chunk)
    return h.hexdigest()


def _sha256_files(paths: list[Path], threads: int = 1) -> float:
    """Seconds ``hashlib.sha256`` takes over ``paths`` on ``threads`` threads (a file each)."""
    from concurrent.futures import ThreadPoolExecutor

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(_sha256_file, paths))
    return time.perf_counter() - start


def _drop_caches_hint(paths: list[Path]) -> None:
    for p in paths:  # warm the page cache equally for every contender
        with open(p, "rb") as f:
            while f.read(8 << 20):
                pass


def _dvc_add(work: Path, data: Path) -> float | None:
    """Seconds ``dvc add`` takes on the same shards (hard links in a fresh DVC repo, default
    settings), or None when no ``dvc`` executable is available."""
    import shutil
    import subprocess

    dvc = os.environ.get("RK_BENCH_DVC") or shutil.which("dvc")
    if not dvc:
        return None
    repo = work / "dvcrepo"
    repo.mkdir()
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=repo, check=True)
    subprocess.run(["cp", "-al", str(data), str(repo / "data")], check=True)
    start = time.perf_counter()
    subprocess.run([dvc, "add", "-q", "data"], cwd=repo, check=True)
    return time.perf_counter() - start


def bench_local(work: Path, shards: int, shard_mib: int, rounds: int) -> None:
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
        _drop_caches_hint(paths)
        start = time.perf_counter()
        v = client.publish(rk.Dataset.from_directory(data, name="bench"), progress=False)
        publish_s = time.perf_counter() - start
        _drop_caches_hint(paths)
        dvc_s = _dvc_add(work, data)
        peer = f"dvc add {dvc_s:.2f} s, same run" if dvc_s else "dvc add ~2.6 s here, quoted"
        print(
            f"\n[publish in place] {total / 2**30:.2f} GiB, {len(paths)} shards, "
            f"{v.record_count} records, {len(v.schema.features)} features: {publish_s:.2f} s "
            f"({total / publish_s / 1e9:.2f} GB/s); {peer} -> "
            f"{(dvc_s or 2.6) / publish_s:.1f}x faster"
        )
        bench_deep(v, paths, total, rounds)
        start = time.perf_counter()
        assert v.verify().ok
        print(f"[fast verify local] {len(paths)} shards: {time.perf_counter() - start:.3f} s")

        # A bit flip keeping size + mtime: only deep verify finds it, by shard.
        victim = paths[len(paths) // 2]
        st = victim.stat()
        with open(victim, "r+b") as f:
            f.seek(st.st_size * 2 // 3)
            b = f.read(1)
            f.seek(st.st_size * 2 // 3)
            f.write(bytes([b[0] ^ 1]))
        os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
        fast_ok = v.verify().ok
        bad = v.verify(deep=True, progress=False).problems
        print(
            f"[bit flip, mtime kept] fast ok={fast_ok}; deep: "
            + "; ".join(f"{p.shard.name} {p.reason} at offset {p.offset}" for p in bad)
        )

        bench_resolve(client, data)
    finally:
        svc.stop()


def bench_deep(v: rk.DatasetVersion, paths: list[Path], total: int, rounds: int) -> None:
    """Deep verify on N threads vs hashlib.sha256 on the same N threads, alternating."""
    threads = max(2, os.cpu_count() or 2)  # what verify(deep=True) uses by default
    sha_times, deep_times, sha_cpu, deep_cpu = [], [], [], []
    for _ in range(rounds):
        cpu = time.process_time()
        sha_times.append(_sha256_files(paths, threads))
        sha_cpu.append(time.process_time() - cpu)
        start, cpu = time.perf_counter(), time.process_time()
        report = v.verify(deep=True, progress=False, max_workers=threads)
        deep_times.append(time.perf_counter() - start)
        deep_cpu.append(time.process_time() - cpu)
        assert report.ok
    sha_s, deep_s = statistics.median(sha_times), statistics.median(deep_times)
    print(
        f"[deep verify] median {total / deep_s / 1e9:.2f} GB/s ({deep_s:.2f} s, re-hash + every "
        f"record CRC, {threads} threads) vs hashlib.sha256 on {threads} threads "
        f"{total / sha_s / 1e9:.2f} GB/s ({sha_s:.2f} s): ratio {sha_s / deep_s:.2f}x; "
        f"runs {_runs(deep_times)} vs {_runs(sha_times)}; CPU seconds (all threads) "
        f"{statistics.median(deep_cpu):.2f} vs {statistics.median(sha_cpu):.2f}: ratio "
        f"{statistics.median(sha_cpu) / statistics.median(deep_cpu):.2f}x"
    )


def _runs(times: list[float]) -> str:
    return "/".join(f"{t:.2f}" for t in times)


def bench_resolve(client: rk.Client, data: Path, n: int = 10_000, rounds: int = 9) -> None:
    """Resolve a 10,000-shard version: cold (the client holds nothing), held (the client
    resolved it before: one conditional request, 304), and the peer in the same run: the
    previous way, the whole Version answer with every shard in the full form turned into
    value objects."""
    staged = client.stage("bigres")
    # synthetic shards (registration only; nothing is read), built as the load driver builds them
    shards = shard_bodies((data / "x").as_uri() + "/", n, tag="bigres")
    start = time.perf_counter()
    client.register_shards(staged, shards)
    client.commit(staged)
    register_s = time.perf_counter() - start
    client.resolve("bigres@latest")  # the service's caches warm, as on a running service
    client.http.api("GET", "/versions/bigres@latest")
    cold, held, materialize, full, compact = [], [], [], [], []
    for _ in range(rounds):
        # the peer of session 9's packed pages: the same cold resolve reading compact pages
        client.http.refused_forms.add("shards:packed")
        try:
            client.registry.cache.clear()
            start = time.perf_counter()
            client.resolve("bigres@latest")
            compact.append(time.perf_counter() - start)
        finally:
            client.http.refused_forms.discard("shards:packed")
        client.registry.cache.clear()
        start = time.perf_counter()
        v = client.resolve("bigres@latest")
        cold.append(time.perf_counter() - start)
        start = time.perf_counter()
        assert len(list(v.shards)) == n
        materialize.append(time.perf_counter() - start)
        start = time.perf_counter()
        body = client.http.api("GET", "/versions/bigres@latest")
        old = rk.DatasetVersion.from_dict(body)
        full.append(time.perf_counter() - start)
    assert v.shard_count == n and old.shards == v.shards
    del body, old
    import httpx

    page_bytes = {
        form: len(
            httpx.get(
                f"{client.http.base_url}/api/v1/versions/{v.name}/shards",
                params={"form": form},
                timeout=60,
            ).content
        )
        for form in ("full", "compact", "packed")
    }
    for _ in range(rounds * 3):  # the steady state of a client resolving a version it holds
        start = time.perf_counter()
        again = client.resolve("bigres@latest")
        held.append(time.perf_counter() - start)
    assert again.split("train").shards is v.split("train").shards
    med = statistics.median
    print(
        f"[resolve] {n}-shard version: cold {med(cold) * 1000:.0f} ms, held "
        f"{med(held) * 1000:.1f} ms (medians of {rounds} and {3 * rounds}); peer, same run: "
        f"full Version answer + value objects {med(full) * 1000:.0f} ms -> "
        f"cold {med(full) / med(cold):.1f}x, "
        f"held {med(full) / med(held):.0f}x faster; cold reading compact pages (before "
        f"session 9) {med(compact) * 1000:.0f} ms "
        f"({med(compact) / med(cold):.2f}x; runs {_ms(cold)} / {_ms(compact)} ms); "
        f"building every Shard object afterwards "
        f"{med(materialize) * 1000:.0f} ms; registering them took {register_s:.2f} s; "
        f"a page of {n:,} shards: {page_bytes} bytes; load {os.getloadavg()[0]:.1f}"
    )


def _ms(times: list[float]) -> str:
    return "/".join(f"{t * 1000:.1f}" for t in times)


def _old_diff(old: rk.DatasetVersion, new: rk.DatasetVersion) -> Any:
    """The peer: ``client.diff`` as it was before rows (session 8): every ``Shard`` of both
    versions built (``version.shards``), matched by objects, split totals summed from them."""
    from recordkeeper.core import diff as core_diff

    def _same(a: rk.Shard, b: rk.Shard) -> bool:
        return a.records_sha256 == b.records_sha256 and a.record_count == b.record_count

    def shards_of(oshards: list[rk.Shard], nshards: list[rk.Shard]) -> tuple[list[Any], int]:
        old_shards = {(s.split, s.index): s for s in oshards}
        new_shards = {(s.split, s.index): s for s in nshards}
        unchanged = 0
        rest_old = {}
        for key, a in old_shards.items():
            b = new_shards.get(key)
            if b is not None and _same(a, b):
                unchanged += 1
            else:
                rest_old[key] = a
        rest_new = {
            k: b
            for k, b in new_shards.items()
            if k not in old_shards or not _same(old_shards[k], b)
        }
        if rest_old and rest_new:
            pool: dict[Any, list[Any]] = {}
            for key in sorted(rest_old, reverse=True):
                a = rest_old[key]
                pool.setdefault((a.split, a.records_sha256, a.record_count), []).append(key)
            for key in sorted(rest_new):
                b = rest_new[key]
                keys = pool.get((b.split, b.records_sha256, b.record_count))
                if keys:
                    del rest_old[keys.pop()]
                    del rest_new[key]
                    unchanged += 1
        changes = []
        for key in sorted(rest_old.keys() | rest_new.keys()):
            was, now = rest_old.get(key), rest_new.get(key)
            kind = "added" if was is None else "removed" if now is None else "changed"
            changes.append(core_diff.ShardChange(key[0], key[1], kind, was, now))
        return changes, unchanged

    def totals(shards: list[rk.Shard]) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for s in shards:
            r, c = out.get(s.split, (0, 0))
            out[s.split] = (r + s.record_count, c + 1)
        return out

    olds, news = list(old.shards), list(new.shards)
    changes, unchanged = shards_of(olds, news)
    ot, nt = totals(olds), totals(news)
    splits = tuple(
        core_diff.SplitCounts(
            n,
            ot.get(n, (0, 0))[0],
            nt.get(n, (0, 0))[0],
            ot.get(n, (0, 0))[1],
            nt.get(n, (0, 0))[1],
        )
        for n in sorted(ot.keys() | nt.keys())
    )
    return core_diff.VersionDiff(
        old=old.name,
        new=new.name,
        same_content=old.content_digest is not None and old.content_digest == new.content_digest,
        shards=tuple(changes),
        unchanged_shards=unchanged,
        splits=splits,
        schema=(),
    )


def bench_diff(client: rk.Client, data: Path, n: int, rounds: int = 5) -> None:
    """``client.diff`` of an ``n``-shard version and the same version plus 10 shards (a split
    of its own), both resolved cold each round (compact pages); the diff itself timed on rows
    (now) and the peer in the same run, alternating: the previous path, every ``Shard`` of both
    versions built and compared as objects.  Both answers are checked equal."""
    from recordkeeper.diff import diff_versions

    prefix = (data / f"d{n}").as_uri() + "/"
    base = shard_bodies(prefix, n, tag=f"diff{n}")
    extra = shard_bodies(prefix + "extra/", 10, tag=f"extra{n}")
    for body in extra:
        body["split"] = "extra"
    start = time.perf_counter()
    for name, bodies in ((f"diffa{n}", base), (f"diffb{n}", base + extra)):
        staged = client.stage(name)
        client.register_shards(staged, bodies)
        client.commit(staged)
    register_s = time.perf_counter() - start
    a_ref, b_ref = f"diffa{n}@latest", f"diffb{n}@latest"
    client.resolve(a_ref), client.resolve(b_ref)  # the service's caches warm
    new_s: list[float] = []
    old_s: list[float] = []
    resolve_s: list[float] = []
    for _ in range(rounds):
        for path, times in ((diff_versions, new_s), (_old_diff, old_s)):
            client.registry.cache.clear()
            start = time.perf_counter()
            va, vb = client.resolve(a_ref), client.resolve(b_ref)
            resolve_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            d = path(va, vb)
            times.append(time.perf_counter() - start)
            assert len(d.added) == 10 and not d.removed and not d.changed, d
            assert d.unchanged_shards == n
    client.registry.cache.clear()
    va, vb = client.resolve(a_ref), client.resolve(b_ref)
    fast = diff_versions(va, vb)
    client.registry.cache.clear()
    va, vb = client.resolve(a_ref), client.resolve(b_ref)
    assert _old_diff(va, vb) == fast
    med = statistics.median
    print(
        f"[diff] {n:,} vs {n + 10:,} shards (+10): diff on rows {med(new_s) * 1000:.1f} ms, "
        f"peer (every Shard built) {med(old_s) * 1000:.1f} ms -> {med(old_s) / med(new_s):.1f}x "
        f"(medians of {rounds}, runs {_ms(new_s)} / {_ms(old_s)} ms); resolving both cold "
        f"{med(resolve_s) * 1000:.0f} ms; client.diff end to end "
        f"{(med(resolve_s) + med(new_s)) * 1000:.0f} ms vs "
        f"{(med(resolve_s) + med(old_s)) * 1000:.0f} ms; registering took {register_s:.1f} s"
    )


def bench_s3(work: Path, rounds: int, n: int = 1000) -> None:
    from tests.servers.s3 import start_s3_server

    srv = start_s3_server()
    try:
        bucket = srv.make_bucket()
        opts = srv.storage_options
        client_s3 = srv.boto3_client()
        from tests.client._records import frame

        body = frame(_records(4))
        name = bucket[len("s3://") :]
        start = time.perf_counter()
        from concurrent.futures import ThreadPoolExecutor

        def put(i: int) -> None:
            client_s3.put_object(
                Bucket=name,
                Key=f"raw/train-{i:05d}-of-{n:05d}.tfrecord",
                Body=body,
                ChecksumAlgorithm="SHA256",
            )

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(put, range(n)))
        put_s = time.perf_counter() - start
        svc = start_live_service(
            storage_root=f"{bucket}/datasets",
            allowed_roots=[bucket],
            database_url=f"sqlite:///{work / 's3registry.db'}",
        )
        try:
            client = svc.client(storage_options=opts)
            pub_times, pub_cpu = [], []
            for _ in range(rounds):  # listing the directory included, as users run it
                start, cpu = time.perf_counter(), time.process_time()
                v = client.publish(
                    rk.Dataset.from_directory(
                        f"{bucket}/raw", name="s3bench", storage_options=opts
                    ),
                    progress=False,
                    force_new=True,
                )
                pub_times.append(time.perf_counter() - start)
                pub_cpu.append(time.process_time() - cpu)
            times, cpu_times = [], []
            for _ in range(rounds):
                start, cpu = time.perf_counter(), time.process_time()
                report = v.verify()
                times.append(time.perf_counter() - start)
                cpu_times.append(time.process_time() - cpu)
                assert report.ok, report.problems[:3]
            print(
                f"\n[fast verify S3] {n} shards on SeaweedFS: median "
                f"{statistics.median(times):.2f} s (runs {_runs(times)}; CPU of this process "
                f"{statistics.median(cpu_times):.2f} s)"
                f"\n[publish S3 in place] {n} small shards: median "
                f"{statistics.median(pub_times):.2f} s (runs {_runs(pub_times)}; CPU of this "
                f"process, the service's thread included, {statistics.median(pub_cpu):.2f} s); "
                f"uploading them with boto3 took {put_s:.2f} s"
            )
        finally:
            svc.stop()
    finally:
        srv.stop()


def _timed(fn: Callable[[], str]) -> tuple[float, float, str]:
    """Wall and CPU seconds (every thread of this process) of ``fn()``, and what it wrote.

    Nothing is written back to disk during the call that an earlier round left dirty:
    ``os.sync()`` runs first (untimed)."""
    os.sync()
    start, cpu = time.perf_counter(), time.process_time()
    written = fn()
    return time.perf_counter() - start, time.process_time() - cpu, written


def bench_writer(work: Path, rounds: int, n: int = 200_000, keep: bool = False) -> None:
    """``client.writer`` vs ``tf.io.TFRecordWriter``, the same records to the same disk.

    Fair to both sides: one untimed warm-up round each (TensorFlow's first writer initialises
    its runtime; ours opens the first connection); then ``rounds`` rounds, alternating which
    side goes first; ``os.sync()`` runs before each timed write (neither pays for writing back
    the other's bytes); neither side fsyncs. Each side's output (205 MB) is deleted right after
    it is timed, so both write into memory just freed by the other, or with ``keep``
    (``--writer-keep``) every file stays, so both write into memory not used before, as when a
    new dataset is written. On this VM the two differ a lot: memory the guest has not touched
    recently is slow to fault in (free pages are reported to the host after ~2 s), ~0.4-0.6 s
    of CPU more per 200 MB. Before, this benchmark kept our files and deleted TensorFlow's,
    and the first TensorFlow round included its initialisation.
    """
    try:
        import tensorflow as tf
    except ImportError:
        print("\n[writer] skipped: TensorFlow is not installed")
        return
    records = _records(n)
    store = work / "wstore"
    store.mkdir()
    svc = start_live_service(
        storage_root=store.as_uri(),
        allowed_roots=[store.as_uri()],
        database_url=f"sqlite:///{work / 'wregistry.db'}",
    )

    def with_tf() -> str:
        path = str(work / f"tf-{time.monotonic_ns()}.tfrecord")
        with tf.io.TFRecordWriter(path) as w:
            for rec in records:
                w.write(rec)
        return path

    def with_rk() -> str:
        with client.writer("wbench", shard_size="256MB", force_new=True) as rw:
            for rec in records:
                rw.write(rec)
        return rw.version.storage_prefix

    def remove(written: str, after_round: bool = True) -> None:
        if keep and after_round:
            return
        path = written[len("file://") :] if written.startswith("file://") else written
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)

    try:
        client = svc.client()
        for fn in (with_tf, with_rk):  # warm-up, untimed
            remove(fn(), after_round=False)
        times: dict[str, list[float]] = {"tf": [], "rk": []}
        cpu: dict[str, list[float]] = {"tf": [], "rk": []}
        outputs: list[str] = []
        for rnd in range(rounds):
            order = [("tf", with_tf), ("rk", with_rk)]
            for side, fn in order if rnd % 2 == 0 else order[::-1]:
                wall, cpu_s, written = _timed(fn)
                remove(written)
                outputs.append(written)
                times[side].append(wall)
                cpu[side].append(cpu_s)
        med = statistics.median
        tf_s, rk_s = med(times["tf"]), med(times["rk"])
        paired = med(r / t for r, t in zip(times["rk"], times["tf"], strict=True))
        for written in outputs if keep else ():
            remove(written, after_round=False)
        print(
            f"\n[writer{', files kept' if keep else ''}] {n} records of ~{len(records[0])} B: "
            f"client.writer median {rk_s:.3f} s "
            f"(hashes, schema, register, commit) vs tf.io.TFRecordWriter {tf_s:.3f} s: "
            f"ratio {rk_s / tf_s:.2f}x (median of the rounds' ratios {paired:.2f}x); runs "
            f"{_runs(times['rk'])} vs {_runs(times['tf'])}; CPU seconds (all threads, the "
            f"in-process service's included) {med(cpu['rk']):.2f} vs {med(cpu['tf']):.2f}"
        )
    finally:
        svc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--shard-mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5, help="runs per measurement (median)")
    parser.add_argument(
        "--only",
        choices=["local", "s3", "writer"],
        action="append",
        help="run only these parts (local: publish, deep/fast verify, resolve); repeatable",
    )
    parser.add_argument("--skip-s3", action="store_true")
    parser.add_argument("--skip-tf", action="store_true")
    parser.add_argument(
        "--writer-keep",
        action="store_true",
        help="writer: keep every round's files (both sides write into fresh memory)",
    )
    parser.add_argument(
        "--only-resolve", action="store_true", help="only the 10,000-shard resolve (row 4)"
    )
    parser.add_argument(
        "--only-diff",
        type=lambda v: [int(x) for x in v.split(",")],
        help="only client.diff at these shard counts (e.g. 10000,100000) against the old path",
    )
    args = parser.parse_args()
    parts = set(args.only or ["local", "s3", "writer"])
    if args.skip_s3:
        parts.discard("s3")
    if args.skip_tf:
        parts.discard("writer")
    work = Path(tempfile.mkdtemp(prefix="rk-bench-"))
    try:
        if args.only_diff:
            store = work / "store"
            store.mkdir()
            svc = start_live_service(
                storage_root=store.as_uri(),
                allowed_roots=[store.as_uri(), work.as_uri()],
                database_url=f"sqlite:///{work / 'registry.db'}",
            )
            try:
                for n in args.only_diff:
                    bench_diff(svc.client(), work, n, args.rounds)
            finally:
                svc.stop()
            return
        if args.only_resolve:
            store = work / "store"
            store.mkdir()
            svc = start_live_service(
                storage_root=store.as_uri(),
                allowed_roots=[store.as_uri(), work.as_uri()],
                database_url=f"sqlite:///{work / 'registry.db'}",
            )
            try:
                bench_resolve(svc.client(), work)
            finally:
                svc.stop()
            return
        if "local" in parts:
            bench_local(work, args.shards, args.shard_mib, args.rounds)
        if "s3" in parts:
            bench_s3(work, args.rounds)
        if "writer" in parts:
            bench_writer(work, args.rounds, keep=args.writer_keep)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

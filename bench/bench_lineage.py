#!/usr/bin/env python3
"""Lineage queries at scale on PostgreSQL, through the service's real schema and repository.

Builds, in a scratch database (``rk_lineage_bench_<random>``, dropped afterwards):

* 10,000 committed versions (100 datasets x 100 versions),
* 1,000 models, each a chain of 100 checkpoints, every one restored from the previous,
* each checkpoint's segment trained on 10 versions drawn uniformly → 1,000,000 lineage edges;
  a chain's union then holds ~950 distinct versions;
* in front of it, a chain of 50 derived versions (``--data-chain``; dataset ``deep``, each a
  change of the one before, with a source, a producer commit and params) whose tip every
  model's first checkpoint also trained on: every upstream answer carries that whole data
  history (asserted complete, over HTTP too).

The schema comes from the Alembic migrations (``recordkeeper db upgrade``), the rows are loaded
with ``COPY``, and the timed calls are the service's own repository methods — the code a REST
request runs, minus HTTP:

* **upstream**: ``LineageRepository.lineage("model<k>/ckpt-100")`` — the complete union of data
  along the 100-checkpoint parent chain (no hop limit), grouped per version with segments;
* **downstream (direct)**: ``LineageRepository.consumers(version, transitive=False)`` — the
  checkpoints (and models) whose own segments trained on one version (~100);
* **downstream (transitive)**: ``consumers(version)`` — plus every checkpoint restored or
  fine-tuned from those (~4,900), which is what ``recordkeeper consumers`` shows;
* **where a first answer goes**: the upstream route's own calls (head, answer, packed columns,
  rendering) timed one by one in process by a fresh repository.

Peer measured in the same run: the same upstream answer assembled hop by hop (one query per
parent plus one per segment), as a client walking ``parent`` links or an ORM lazy-load would.

Unless ``--skip-http``, the same questions through ``recordkeeper.Client`` against the service
on the same database, twice: ``recordkeeper serve`` (one worker) in its own process, as it is
deployed, then uvicorn on a thread of the bench's process (client and service then share one
interpreter lock: the conservative figure).  The upstream answer of each checkpoint is asked
twice — the *first request* (the service computes and renders it, then keeps it keyed by
checkpoint and lineage epoch) and *asked again* (an answer the service holds: nothing changed
in between).

    .venv/bin/python bench/bench_lineage.py [--url postgresql://postgres@127.0.0.1:5432/test]
        [--rounds 3] [--models 1000] [--chain 100] [--versions 10000] [--per-segment 10]
        [--queries 200]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import select

from recordkeeper.core.naming import format_version_name
from recordkeeper_service.db import Database
from recordkeeper_service.migrate import upgrade
from recordkeeper_service.repository.lineage import LineageRepository
from recordkeeper_service.tables.lineage import Checkpoint, CheckpointData

OUT = Path(__file__).resolve().parent / "out"
DATASETS_PER_100 = 100  # versions per dataset


@contextmanager
def scratch_database(admin_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database for the run, dropped afterwards."""
    name = f"rk_lineage_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = admin_url.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def load(db: Database, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    """Fill the real tables with COPY; return sizes and load seconds."""
    started = time.perf_counter()
    now = datetime.datetime.now(datetime.UTC)
    day = datetime.date(2023, 10, 15)
    n_datasets = max(1, args.versions // DATASETS_PER_100)
    raw = db.engine.raw_connection()
    try:
        conn: psycopg.Connection[Any] = raw.driver_connection
        with conn.cursor() as cur:
            with cur.copy(
                "COPY datasets (id, name, description, next_number, created_at, created_by) "
                "FROM STDIN"
            ) as copy:
                for d in range(1, n_datasets + 1):
                    copy.write_row((d, f"ds{d}", "", DATASETS_PER_100 + 1, now, "bench"))
            with cur.copy(
                "COPY versions (id, dataset_id, number, name, date, convention, state, "
                "storage_prefix, content_digest, record_count, shard_count, size, metadata, "
                "created_at, created_by, committed_at) FROM STDIN"
            ) as copy:
                for v in range(1, args.versions + 1):
                    d = (v - 1) // DATASETS_PER_100 + 1
                    number = (v - 1) % DATASETS_PER_100 + 1
                    name = format_version_name(f"ds{d}", day, number)
                    digest = f"sha256:{rng.getrandbits(256):064x}"
                    copy.write_row(
                        (
                            v,
                            d,
                            number,
                            name,
                            day,
                            "rk1",
                            "committed",
                            f"file:///bench/ds{d}/{name}/",
                            digest,
                            1000,
                            1,
                            1000,
                            "{}",
                            now,
                            "bench",
                            now,
                        )
                    )
            with cur.copy("COPY models (id, name, created_at, created_by) FROM STDIN") as copy:
                for k in range(1, args.models + 1):
                    copy.write_row((k, f"model{k}", now, "bench"))
            # one run per model (its chain), named as a run derived from its directory would be
            with cur.copy(
                "COPY runs (id, model_id, name, directory, created_at, created_by) FROM STDIN"
            ) as copy:
                for k in range(1, args.models + 1):
                    copy.write_row((k, k, f"model{k}-run", f"s3://bench/model{k}", now, "bench"))
            with cur.copy(
                "COPY checkpoints (id, model_id, run_id, name, step, uri, parent_id, parent_kind, "
                "saved_models, metrics, metadata, created_at, created_by) FROM STDIN"
            ) as copy:
                for k in range(1, args.models + 1):
                    for i in range(1, args.chain + 1):
                        cid = (k - 1) * args.chain + i
                        parent = cid - 1 if i > 1 else None
                        copy.write_row(
                            (
                                cid,
                                k,
                                k,
                                f"ckpt-{i}",
                                i * 1000,
                                f"s3://bench/model{k}/ckpt-{i}",
                                parent,
                                "restored_from" if parent else None,
                                "[]",
                                "{}",
                                "{}",
                                now,
                                "bench",
                            )
                        )
            edges = 0
            graph = open(args.graph_file, "w") if args.graph_file else None  # noqa: SIM115
            with cur.copy(
                "COPY checkpoint_data (checkpoint_id, version_id, split, role) FROM STDIN"
            ) as copy:
                population = range(1, args.versions + 1)
                for cid in range(1, args.models * args.chain + 1):
                    drawn = rng.sample(population, args.per_segment)
                    for v in drawn:
                        copy.write_row((cid, v, "train", "train"))
                        edges += 1
                    if graph is not None:  # the same graph for the ML Metadata peer
                        parent = cid - 1 if (cid - 1) % args.chain else 0
                        graph.write(f"{cid} {parent} {' '.join(map(str, drawn))}\n")
            if graph is not None:
                graph.close()
            deep = _load_data_chain(cur, args, now, day, n_datasets, rng)
            edges += deep
            for table in ("datasets", "versions", "models", "runs", "checkpoints"):
                cur.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT max(id) FROM {table}))"
                )
        conn.commit()
        # A bulk load leaves no visibility map or statistics; a running service has both
        # (autovacuum), so vacuum and analyze before timing anything.
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")
        conn.autocommit = False
    finally:
        raw.close()
    return {
        "versions": args.versions + args.data_chain,
        "models": args.models,
        "checkpoints": args.models * args.chain,
        "edges": edges,
        "data_chain": args.data_chain,
        "load_seconds": round(time.perf_counter() - started, 1),
    }


#: The dataset of the chain of derived versions in front of the checkpoint graph.
DEEP = "deep"


def _load_data_chain(
    cur: Any,
    args: argparse.Namespace,
    now: datetime.datetime,
    day: datetime.date,
    n_datasets: int,
    rng: random.Random,
) -> int:
    """A chain of ``--data-chain`` derived versions of dataset ``deep`` — v1 from a raw source,
    each next one a change of the one before (parent role ``base``), each with a producer
    commit, params and a source — whose tip every model's first checkpoint also trained on: the
    upstream answer of every tip checkpoint then walks the whole data chain too.  Returns the
    lineage edges added (one per model)."""
    n = args.data_chain
    if n <= 0:
        return 0
    dataset_id = n_datasets + 1
    first = args.versions + 1
    with cur.copy(
        "COPY datasets (id, name, description, next_number, created_at, created_by) FROM STDIN"
    ) as copy:
        copy.write_row((dataset_id, DEEP, "", n + 1, now, "bench"))
    names = [format_version_name(DEEP, day, k, f"change_{k}") for k in range(1, n + 1)]
    with cur.copy(
        'COPY versions (id, dataset_id, number, name, date, "desc", convention, state, '
        "storage_prefix, content_digest, record_count, shard_count, size, metadata, "
        "created_at, created_by, committed_at) FROM STDIN"
    ) as copy:
        for k, name in enumerate(names, 1):
            copy.write_row(
                (
                    first + k - 1,
                    dataset_id,
                    k,
                    name,
                    day,
                    f"change_{k}",
                    "rk1",
                    "committed",
                    f"file:///bench/{DEEP}/{name}/",
                    f"sha256:{rng.getrandbits(256):064x}",
                    1000,
                    1,
                    1000,
                    "{}",
                    now,
                    "bench",
                    now,
                )
            )
    with cur.copy(
        "COPY version_provenance (version_id, document, params_digest, producer_commit, "
        "recorded_at, recorded_by) FROM STDIN"
    ) as copy:
        for k in range(1, n + 1):
            commit = f"{rng.getrandbits(160):040x}"
            params_digest = f"sha256:{rng.getrandbits(256):064x}"
            parents = (
                [{"name": names[k - 2], "dataset": DEEP, "number": k - 1, "role": "base"}]
                if k > 1
                else []
            )
            document = {
                "parents": parents,
                "sources": [
                    {
                        "uri": f"gs://raw/{DEEP}/annotations-{k}.json",
                        "identity": {
                            "method": "listing",
                            "digest": f"sha256:{rng.getrandbits(256):064x}",
                            "files": 1,
                            "size": 4096,
                        },
                    }
                ],
                "producer": {
                    "vcs": "git",
                    "commit": commit,
                    "remote": "https://git.example.com/prep.git",
                    "branch": "main",
                    "dirty": False,
                    "diff_digest": None,
                    "entry": "prep.py",
                },
                "params": {"k": k},
                "params_digest": params_digest,
                "command": None,
                "environment": None,
                "note": None,
            }
            copy.write_row(
                (first + k - 1, json.dumps(document), params_digest, commit, now, "bench")
            )
    with cur.copy(
        "COPY version_parents (version_id, position, parent_id, role) FROM STDIN"
    ) as copy:
        for k in range(2, n + 1):
            copy.write_row((first + k - 1, 0, first + k - 2, "base"))
    with cur.copy(
        "COPY version_sources (version_id, position, uri, identity_digest) FROM STDIN"
    ) as copy:
        for k in range(1, n + 1):
            copy.write_row((first + k - 1, 0, f"gs://raw/{DEEP}/annotations-{k}.json", None))
    tip = first + n - 1
    with cur.copy(
        "COPY checkpoint_data (checkpoint_id, version_id, split, role) FROM STDIN"
    ) as copy:
        for k in range(1, args.models + 1):
            copy.write_row(((k - 1) * args.chain + 1, tip, "train", "train"))
    return args.models


def timed(
    fn: Callable[[Any], Any], inputs: list[Any], keep: Callable[[Any], Any] = lambda r: None
) -> tuple[list[float], list[Any]]:
    """Milliseconds per call, and ``keep(result)`` of each.

    Results are reduced right away: holding a million answer objects would make the garbage
    collector's full passes, not the queries, dominate the tail latencies.
    """
    kept, times = [], []
    gc.collect()
    for item in inputs:
        start = time.perf_counter()
        result = fn(item)
        times.append((time.perf_counter() - start) * 1000)
        kept.append(keep(result))
        del result
    return times, kept


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, max(0, round(len(ordered) * 0.99) - 1))]
    return {"p50_ms": round(statistics.median(ordered), 2), "p99_ms": round(p99, 2)}


def hop_by_hop(db: Database, ref: tuple[int, int]) -> set[int]:
    """The peer: walk parents one query at a time, then one query per segment's data."""
    model_id, chain = ref
    versions: set[int] = set()
    with db.transaction(write=False) as session:
        current = session.scalar(
            select(Checkpoint.id).where(
                Checkpoint.model_id == model_id, Checkpoint.name == f"ckpt-{chain}"
            )
        )
        seen: set[int] = set()
        while current is not None and current not in seen:
            seen.add(current)
            versions.update(
                session.scalars(
                    select(CheckpointData.version_id).where(CheckpointData.checkpoint_id == current)
                )
            )
            current = session.scalar(select(Checkpoint.parent_id).where(Checkpoint.id == current))
    return versions


def _history_only(
    db: Database, repo: LineageRepository, tips: list[str]
) -> tuple[list[float], list[float]]:
    """Milliseconds of ``HistoryCache.history`` alone per tip, from the versions the walk
    found to have recorded provenance: cold (a fresh cache) and warm."""
    from recordkeeper_service.repository.lineage import queries
    from recordkeeper_service.repository.lineage.data import HistoryCache

    cold: list[float] = []
    warm: list[float] = []
    for tip in tips:
        head = repo.lineage_head(tip)

        def work(conn: Any, row_id: int = head.row.id) -> None:
            ids = queries.upstream_rows(conn, row_id).recorded  # as the repository asks
            for cache, times in ((HistoryCache(), cold), (repo.histories, warm)):
                start = time.perf_counter()
                cache.history(conn, ids)
                times.append((time.perf_counter() - start) * 1000)

        db.read(work)
    return cold, warm


def _first_answer_parts(db: Database, tips: list[str]) -> dict[str, Any]:
    """Where a first upstream answer goes, in process: the route's own calls
    (:func:`recordkeeper_service.routes.lineage.lineage_response` without HTTP) timed one by
    one, by a fresh repository (a new worker's caches) warmed as :func:`_over_http` warms the
    service: the head, the answer (walk, versions not seen yet, history, grouping), the packed
    columns and the rendered bytes."""
    from recordkeeper_service.routes.lineage import render_lineage

    repo = LineageRepository(db)
    for tip in tips[:20]:
        repo.lineage(tip.rsplit("/", 1)[0] + "/ckpt-1")
    parts: dict[str, list[float]] = {"head": [], "answer": [], "packed": [], "render": []}
    size = 0
    for tip in tips:
        t0 = time.perf_counter()
        head = repo.lineage_head(tip)
        t1 = time.perf_counter()
        record = repo.answer_from(head)
        t2 = time.perf_counter()
        packed = record.to_json(form="packed")
        t3 = time.perf_counter()
        size = len(render_lineage(packed))
        t4 = time.perf_counter()
        for name, begin, end in (
            ("head", t0, t1),
            ("answer", t1, t2),
            ("packed", t2, t3),
            ("render", t3, t4),
        ):
            parts[name].append((end - begin) * 1000)
    medians = {f"{name}_p50_ms": round(statistics.median(t), 2) for name, t in parts.items()}
    return {**medians, "total_p50_ms": round(sum(medians.values()), 2), "answer_bytes": size}


def _over_http(
    url: str,
    tips: list[str],
    versions: list[str],
    args: argparse.Namespace,
    *,
    own_process: bool,
) -> dict[str, Any]:
    """The same upstream and downstream questions through ``recordkeeper.Client`` against the
    service on the same database over a real socket: ``recordkeeper serve`` (one worker) in its
    own process as it is deployed, or (``own_process=False``) uvicorn on a thread of this
    process, where client and service share one interpreter lock."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench_service import serve

    import recordkeeper as rk
    from tests.integration.conftest import start_live_service

    store = Path(args.graph_file or "/tmp").parent.as_uri()
    with contextlib.ExitStack() as stack:
        if own_process:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            client = rk.Client(stack.enter_context(serve(url, 1, workdir)).url)
        else:
            service = start_live_service(
                storage_root=store, allowed_roots=[store], database_url=url
            )
            stack.callback(service.stop)
            client = service.client()
        stack.callback(client.close)
        # Warm the connection and the code paths on checkpoints outside the timed set (ckpt-1
        # of the same models: a chain of one), so that every timed first request is one the
        # service has not answered before.
        timed(client.lineage, [t.rsplit("/", 1)[0] + "/ckpt-1" for t in tips[:20]])
        # First request per checkpoint: the service computes and renders the answer (it keeps
        # it, keyed by checkpoint and lineage epoch).  Then the same checkpoints again: each
        # answer is one the service holds (nothing changed in between).
        first, first_r = timed(
            client.lineage, tips, lambda r: (len(set(r.versions)), len(r.history))
        )
        again, again_r = timed(
            client.lineage, tips, lambda r: (len(set(r.versions)), len(r.history))
        )
        assert all(h == args.data_chain for _, h in first_r), "a data history is incomplete"
        assert again_r == first_r, "a held answer differs from the first"
        down, down_r = timed(
            lambda v: client.consumers(v, transitive=False), versions, lambda r: len(r.checkpoints)
        )
    return {
        "service": "recordkeeper serve, 1 worker" if own_process else "in the bench's process",
        "upstream_first": {
            **summary(first),
            "distinct_versions_mean": round(statistics.mean(d for d, _ in first_r), 1),
            "history_versions": args.data_chain,
        },
        "upstream_again": {
            **summary(again),
            "distinct_versions_mean": round(statistics.mean(d for d, _ in again_r), 1),
        },
        "downstream_direct": {
            **summary(down),
            "checkpoints_mean": round(statistics.mean(down_r), 1),
        },
    }


def _mlmd(args: argparse.Namespace, tips: list[str], picks: list[int]) -> dict[str, Any]:
    """Run ``mlmd_peer.py`` in the ML Metadata venv on the graph file of this run."""
    import subprocess

    tip_ids = [
        (int(t.split("/")[0].removeprefix("model")) - 1) * args.chain + args.chain for t in tips
    ]
    out = subprocess.run(
        [
            args.mlmd,
            str(Path(__file__).resolve().parent / "mlmd_peer.py"),
            args.graph_file,
            "--tips",
            ",".join(map(str, tip_ids)),
            "--versions",
            ",".join(map(str, picks)),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    with scratch_database(args.url) as url:
        db = Database(url, pool_size=2)
        try:
            upgrade(db)
            sizes = load(db, args, rng)
            print(f"loaded {json.dumps(sizes)}", flush=True)
            repo = LineageRepository(db)
            day = datetime.date(2023, 10, 15)
            n = args.queries
            tips = [f"model{k}/ckpt-{args.chain}" for k in rng.sample(range(1, args.models + 1), n)]
            picks = rng.sample(range(1, args.versions + 1), n)
            versions = [
                format_version_name(
                    f"ds{(v - 1) // DATASETS_PER_100 + 1}", day, (v - 1) % DATASETS_PER_100 + 1
                )
                for v in picks
            ]
            # Warm caches and the connection pool the way a running service would be.
            timed(repo.lineage, tips[: min(20, n)])
            timed(lambda v: repo.consumers(v, transitive=True), versions[: min(20, n)])

            up_t: list[float] = []
            direct_t: list[float] = []
            trans_t: list[float] = []
            rounds: list[dict[str, float]] = []
            for _ in range(args.rounds):
                t, up_r = timed(
                    repo.lineage,
                    tips,
                    lambda r: (len(r.versions), len(r.chain), len(r.history)),
                )
                up_t += t
                d, direct_r = timed(
                    lambda v: repo.consumers(v, transitive=False),
                    versions,
                    lambda r: (len(r.checkpoints), len(r.models())),
                )
                direct_t += d
                tr, trans_r = timed(
                    lambda v: repo.consumers(v, transitive=True),
                    versions,
                    lambda r: len(r.checkpoints),
                )
                trans_t += tr
                rounds.append(
                    {
                        "upstream_p50_ms": summary(t)["p50_ms"],
                        "direct_p50_ms": summary(d)["p50_ms"],
                        "transitive_p50_ms": summary(tr)["p50_ms"],
                    }
                )
            # The data history's share of an upstream answer, alone: for each tip's ~950
            # versions, walked with an empty per-process cache (a worker's first sight of
            # them) and with the repository's warm one.
            history_cold, history_warm = _history_only(db, repo, tips)
            first_parts = _first_answer_parts(db, tips)
            http = (
                {
                    "own_process": _over_http(url, tips, versions, args, own_process=True),
                    "in_process": _over_http(url, tips, versions, args, own_process=False),
                }
                if not args.skip_http
                else None
            )
            peer_inputs = [(int(t.split("/")[0].removeprefix("model")), args.chain) for t in tips]
            peer_n = min(n, args.peer_queries)
            peer_t, peer_r = timed(lambda r: hop_by_hop(db, r), peer_inputs[:peer_n], len)
            for (distinct, _chain, _history), peer_distinct in zip(up_r, peer_r, strict=False):
                assert distinct == peer_distinct, "the peer found a different answer"
            complete = all(chain == args.chain for _distinct, chain, _history in up_r)
            # every tip's first checkpoint trained on the chain's tip: its whole history answers
            history_complete = all(history == args.data_chain for *_, history in up_r)
            assert history_complete, "an upstream answer left out part of the data chain"
        finally:
            db.dispose()
    result = {
        "database": "postgresql",
        "sizes": sizes,
        "upstream": {
            **summary(up_t),
            "distinct_versions_mean": round(statistics.mean(d for d, *_ in up_r), 1),
            "chain_length": args.chain,
            "complete": complete,
            "data_chain": args.data_chain,
            "history_complete": history_complete,
        },
        "downstream_direct": {
            **summary(direct_t),
            "checkpoints_mean": round(statistics.mean(c for c, _ in direct_r), 1),
            "models_mean": round(statistics.mean(m for _, m in direct_r), 1),
        },
        "downstream_transitive": {
            **summary(trans_t),
            "checkpoints_mean": round(statistics.mean(trans_r), 1),
        },
        "peer_hop_by_hop_upstream": {**summary(peer_t), "queries": peer_n},
        "history_only_cold": summary(history_cold),
        "history_only_warm": summary(history_warm),
        "first_answer_parts": first_parts,
        "http_client": http,
        "ml_metadata": _mlmd(args, tips, picks) if args.mlmd else None,
        "queries": n,
        "rounds": rounds,
        # Other work on these 2 vCPUs shows in the tails: record how busy the machine was.
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    result["upstream"]["speedup_vs_hop_by_hop"] = round(
        result["peer_hop_by_hop_upstream"]["p50_ms"] / result["upstream"]["p50_ms"], 1
    )
    return result


def print_table(result: dict[str, Any]) -> None:
    rows = [
        ("upstream: lineage(model/ckpt-100), complete chain", result["upstream"]),
        *(
            (f"HTTP + client ({http['service']}): {label}", http[key])
            for http in (result.get("http_client") or {}).values()
            for label, key in (
                ("client.lineage(model/ckpt-100), first request", "upstream_first"),
                ("client.lineage(model/ckpt-100), asked again", "upstream_again"),
                ("client.consumers(version, transitive=False)", "downstream_direct"),
            )
        ),
        *(
            [
                (
                    "ML Metadata get_lineage_subgraph UPSTREAM, 100 hops (incomplete)",
                    result["ml_metadata"]["upstream"],
                ),
                (
                    "ML Metadata get_lineage_subgraph DOWNSTREAM, 2 hops",
                    result["ml_metadata"]["downstream_direct"],
                ),
            ]
            if result.get("ml_metadata")
            else []
        ),
        ("downstream, direct: consumers(version)", result["downstream_direct"]),
        ("downstream, transitive: + descendants", result["downstream_transitive"]),
        ("peer: upstream hop by hop", result["peer_hop_by_hop_upstream"]),
        ("data history alone, cold per-process cache", result["history_only_cold"]),
        ("data history alone, warm cache", result["history_only_warm"]),
    ]
    print()
    print("| query | p50 ms | p99 ms |")
    print("|---|---:|---:|")
    for label, figures in rows:
        print(f"| {label} | {figures['p50_ms']} | {figures['p99_ms']} |")
    parts = result["first_answer_parts"]
    print()
    print(
        "first answer in process, p50 ms: "
        + ", ".join(f"{k.removesuffix('_p50_ms')} {v}" for k, v in parts.items() if "p50" in k)
        + f" ({parts['answer_bytes']:,} bytes packed)"
    )
    print()
    print(json.dumps(result, indent=2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="an existing database to connect to for CREATE/DROP DATABASE",
    )
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--chain", type=int, default=100)
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--per-segment", type=int, default=10)
    parser.add_argument(
        "--data-chain",
        type=int,
        default=50,
        help="derived versions in a chain in front of the checkpoint graph (0: none)",
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--peer-queries", type=int, default=50)
    parser.add_argument(
        "--rounds", type=int, default=3, help="repeat the timed series; figures pool all rounds"
    )
    parser.add_argument("--seed", type=int, default=20231015)
    parser.add_argument(
        "--mlmd",
        metavar="PYTHON",
        help="python of a venv with ml-metadata: run the ML Metadata peer on the same graph",
    )
    parser.add_argument("--skip-http", action="store_true", help="no HTTP/client timings")
    args = parser.parse_args(argv)
    args.graph_file = None
    if args.mlmd or not args.skip_http:
        import tempfile

        args.graph_file = str(Path(tempfile.mkdtemp(prefix="rk-lineage-")) / "graph.txt")
    if args.versions % DATASETS_PER_100:
        parser.error(f"--versions must be a multiple of {DATASETS_PER_100}")
    result = run(args)
    print_table(result)
    OUT.mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    (OUT / f"lineage-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

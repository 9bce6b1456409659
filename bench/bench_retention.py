#!/usr/bin/env python3
"""A retention plan at scale on PostgreSQL, through the service's real schema and repository.

Builds, in a scratch database (``rk_retention_bench_<random>``, dropped afterwards):

* 1,000 committed versions (10 datasets x 100 versions), 1,000 shards each: 1,000,000 shards;
* derived versions sharing objects: every even-indexed shard of a version is the object its
  dataset's first version registered (500,000 shard rows name 5,000 objects), odd ones are the
  version's own;
* per dataset an alias on version 50 (and ``latest``), a pin on version 40, a checkpoint that
  trained on version 30; a service-wide policy ``keep_last=10``.

So each dataset keeps 13 versions and expires 87; the first version's even shards stay
(referenced by kept versions), every expired version frees its 500 odd objects: 435,000
objects.  Timed (medians of ``--rounds``):

* **plan**: ``RetentionRepository.plan()`` over every dataset — the facts (aliases, latest,
  checkpoints through parent chains, pins), the decisions, and the objects and bytes freed,
  each object counted once, under the deletion rule (set-wise);
* **peer**: the same freed objects found as a collector listing per version does today (gc's
  ``GET /gc/candidates`` style: one query for each expired version's shards, then
  ``deletion.referenced_elsewhere`` on them in chunks), same database, same run.

Both must find the same objects and bytes.

    .venv/bin/python bench/bench_retention.py [--url postgresql://postgres@127.0.0.1:5432/test]
        [--rounds 3] [--datasets 10] [--versions 100] [--shards 1000]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import select

from recordkeeper.core.naming import format_version_name
from recordkeeper.core.retention import RetentionPolicy
from recordkeeper.core.roots import AllowedRoots
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.migrate import upgrade
from recordkeeper_service.repository.deletion import referenced_elsewhere
from recordkeeper_service.repository.retention import RetentionRepository

OUT = Path(__file__).resolve().parent / "out"


@contextmanager
def scratch_database(admin_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database for the run, dropped afterwards."""
    name = f"rk_retention_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = admin_url.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _uri(dataset: int, name: str, index: int, count: int) -> str:
    return f"file:///bench/ds{dataset}/{name}/train-{index:05d}-of-{count:05d}.tfrecord"


def load(db: Database, args: argparse.Namespace) -> dict[str, Any]:
    """Fill the real tables with COPY; return sizes and load seconds."""
    started = time.perf_counter()
    now = datetime.datetime.now(datetime.UTC)
    day = datetime.date(2023, 10, 15)
    n, per, count = args.datasets, args.versions, args.shards
    sha = "0" * 64
    raw = db.engine.raw_connection()
    try:
        conn: psycopg.Connection[Any] = raw.driver_connection
        with conn.cursor() as cur:
            with cur.copy(
                "COPY datasets (id, name, description, next_number, next_stage, created_at, "
                "created_by) FROM STDIN"
            ) as copy:
                for d in range(1, n + 1):
                    copy.write_row((d, f"ds{d}", "", per + 1, 1, now, "bench"))
            names: dict[int, str] = {}
            with cur.copy(
                "COPY versions (id, dataset_id, number, name, date, convention, state, "
                "storage_prefix, content_digest, record_count, shard_count, size, metadata, "
                "created_at, created_by, committed_at) FROM STDIN"
            ) as copy:
                for d in range(1, n + 1):
                    for number in range(1, per + 1):
                        vid = (d - 1) * per + number
                        name = names[vid] = format_version_name(f"ds{d}", day, number)
                        copy.write_row(
                            (vid, d, number, name, day, "rk1", "committed",
                             f"file:///bench/ds{d}/{name}/", f"sha256:{vid:064x}",
                             count * 10, count, count * 1000, "{}", now, "bench",
                             now - datetime.timedelta(days=per - number))
                        )  # fmt: skip
            with cur.copy(
                'COPY shards (version_id, split, "index", count, uri, compression, size, '
                "sha256, crc32c, records_sha256, record_count, registered_at) FROM STDIN"
            ) as copy:
                for d in range(1, n + 1):
                    first = names[(d - 1) * per + 1]
                    for number in range(1, per + 1):
                        vid = (d - 1) * per + number
                        for i in range(count):
                            owner = first if i % 2 == 0 else names[vid]
                            copy.write_row(
                                (vid, "train", i, count, _uri(d, owner, i, count), "none",
                                 1000 + i, sha, "00000000", sha, 10, now)
                            )  # fmt: skip
            for table in ("datasets", "versions", "shards"):
                cur.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT max(id) FROM {table}))"
                )
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")
        conn.autocommit = False
    finally:
        raw.close()
    return {
        "datasets": n,
        "versions": n * per,
        "shards": n * per * count,
        "load_seconds": round(time.perf_counter() - started, 1),
    }


def facts(db: Database, repo: RetentionRepository, args: argparse.Namespace) -> None:
    """Aliases, pins, a checkpoint per dataset, and the service-wide policy (the repository's
    own writes)."""
    from recordkeeper_service.repository.aliases import AliasRepository
    from recordkeeper_service.repository.lineage import (
        CheckpointInput,
        DataInput,
        LineageRepository,
    )

    aliases, lineage = AliasRepository(db), LineageRepository(db)
    for d in range(1, args.datasets + 1):
        aliases.set(f"ds{d}", "prod", f"ds{d}@v{args.versions // 2}", actor="bench")
        repo.pin([f"ds{d}@v{args.versions * 2 // 5}"], "train.lock.yaml", actor="bench")
        spec = CheckpointInput(run="r1", data=(DataInput(f"ds{d}@v{args.versions * 3 // 10}"),))
        lineage.register("det", f"ckpt-{d}", spec, actor="bench")
    repo.set_policy("*", RetentionPolicy(keep_last=10), actor="bench")


def peer(db: Database, expired: list[int]) -> tuple[int, int]:
    """Per version, as a collector listing candidates one by one: its shards, then which of
    them a live version outside the expired set references."""
    freed: dict[str, int] = {}
    releasing = set(expired)
    with db.transaction(write=False) as session:
        for vid in expired:
            rows = session.execute(
                select(m.Shard.uri, m.Shard.size).where(m.Shard.version_id == vid)
            ).all()
            kept = referenced_elsewhere(session, [u for u, _ in rows], releasing=releasing)
            for uri, size in rows:
                if uri not in kept:
                    freed.setdefault(uri, size)
    return len(freed), sum(freed.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--datasets", type=int, default=10)
    parser.add_argument("--versions", type=int, default=100, help="per dataset")
    parser.add_argument("--shards", type=int, default=1000, help="per version")
    args = parser.parse_args()
    with scratch_database(args.url) as url:
        db = Database(url, pool_size=2)
        try:
            upgrade(db)
            sizes = load(db, args)
            repo = RetentionRepository(db, AllowedRoots.of(["file:///bench/"]))
            facts(db, repo, args)
            plans, peers = [], []
            answer: dict[str, Any] = {}
            found: tuple[int, int] = (0, 0)
            for _ in range(args.rounds):
                start = time.perf_counter()
                plan = repo.plan()
                plans.append(time.perf_counter() - start)
                answer = plan.to_json()
                expired = [
                    vid
                    for vid, item in zip(_ids(db), plan.items, strict=True)
                    if item.action == "delete"
                ]
                start = time.perf_counter()
                found = peer(db, expired)
                peers.append(time.perf_counter() - start)
            assert (answer["objects"], answer["bytes"]) == found, (answer["objects"], found)
            result = {
                **sizes,
                "expired_versions": answer["delete"],
                "kept_versions": answer["keep"],
                "objects_freed": answer["objects"],
                "bytes_freed": answer["bytes"],
                "plan_median_s": round(statistics.median(plans), 2),
                "peer_median_s": round(statistics.median(peers), 2),
                "peer_over_plan": round(statistics.median(peers) / statistics.median(plans), 1),
                "rounds": args.rounds,
            }
        finally:
            db.dispose()
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_retention.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


def _ids(db: Database) -> list[int]:
    """Version ids in the plan's order (dataset name, number)."""
    with db.transaction(write=False) as session:
        return list(
            session.scalars(
                select(m.Version.id)
                .join(m.Dataset, m.Dataset.id == m.Version.dataset_id)
                .where(m.Version.state.in_(("committed", "deprecated")))
                .order_by(m.Dataset.name, m.Version.number)
            )
        )


if __name__ == "__main__":
    sys.exit(main())

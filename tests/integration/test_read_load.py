"""Cheap reads stay served beside expensive ones (issue 21, item 9), over a real socket.

``recordkeeper serve --workers 2`` on PostgreSQL with ``RECORDKEEPER_AUTH=required``; two
versions of 10,000 shards that differ in every shard and 300 checkpoints trained on the first
(:mod:`tests.integration._read_load`).  ``whoami`` is probed alone, then while four clients with
a read token ask in a loop for the diff of the two versions and the lineage graph of the first
— bounded: a few seconds per phase, one probe thread, the heavy clients in a process of their
own.

What is asserted is the mechanism, never a latency (the project has no timed assertions): every
cheap and every expensive request succeeds under the load, and each expensive answer is bounded
— a page of the diff (not the 4.9 MB of every change the old main sent) and at most ``limit``
nodes of the graph.  The latencies are printed; the ratio under load against alone, with its
figures at full scale, is measured by ``bench/bench_read_load.py`` (docs/reliability.md).  That
the diff is computed once and the graph reads no more rows than it lists is tested in
``tests/service/test_expensive_reads.py``.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.integration._load import serve
from tests.integration._read_load import API, heavy_paths, measure, populate

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

#: A page of the diff of 10,000 changed shards at the default page size is well under this; the
#: whole diff the old main sent was 4.9 MB.
PAGE_BYTES = 1_500_000


def test_expensive_reads_succeed_bounded_beside_cheap_ones(
    postgres_database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "store").mkdir()
    with serve(postgres_database_url, tmp_path, workers=2) as (served, tokens):
        scenario = populate(served.url, tokens["write"], shards=10_000, consumers=300)
        report = measure(
            served.url,
            tokens["read"],
            heavy_paths(scenario),
            heavy_clients=4,
            seconds=3.0,
            warmup=2.0,
        )
        headers = {"Authorization": f"Bearer {tokens['read']}"}
        with httpx.Client(base_url=served.url, headers=headers, timeout=120) as http:
            diff = http.get(f"{API}/versions/{scenario.old}/diff/{scenario.new}")
            graph = http.get(
                f"{API}/lineage/graph",
                params={
                    "version": scenario.old,
                    "depth": 1,
                    "direction": "downstream",
                    "limit": 50,
                },
            )
    alone, loaded = report.alone, report.loaded
    print(f"read load: alone {alone.summary()}, loaded {loaded.summary()}")
    assert not alone.errors and not loaded.errors, (alone.errors, loaded.errors)
    assert alone.probes_ms and loaded.probes_ms  # the cheap reader was answered in both phases
    assert loaded.heavy_done >= 4, loaded.summary()  # the load was there
    assert diff.status_code == 200 and len(diff.content) < PAGE_BYTES, len(diff.content)
    changes = diff.json()["shards"]
    assert changes["counts"]["changed"] == 10_000 and changes["more"] is True
    assert len(changes["changed"]) == changes["limit"]
    assert graph.status_code == 200, graph.text
    assert len(graph.json()["nodes"]) <= 50 and graph.json()["truncated"] is True

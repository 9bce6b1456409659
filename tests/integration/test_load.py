"""Load over real sockets: ``recordkeeper serve --workers 2`` on PostgreSQL with
``RECORDKEEPER_AUTH=required``, 8 publishers + 16 resolvers for ~20 s (the driver is
``tests/integration/_load.py``, the same one ``bench/bench_load.py`` runs with 32 + 64 for
minutes).  Correctness only, no timing: no 5xx and no other error, every acknowledged version
number once per dataset with no gap, every acknowledged commit resolvable afterwards with its
digest, and the workers' RSS growing less than a generous bound after warm-up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration._load import run_load, serve

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

#: Worker RSS growth allowed after warm-up in 20 s (the cache is capped at 4 MiB below).
RSS_GROWTH_BOUND_MIB = 64.0


def test_publishers_and_resolvers_under_load(postgres_database_url: str, tmp_path: Path) -> None:
    with serve(postgres_database_url, tmp_path, workers=2, cache_bytes=4 * 2**20) as (
        served,
        tokens,
    ):
        report = run_load(served, tokens, publishers=8, resolvers=16, seconds=20, datasets=4)
    print("\n" + report.summary())
    assert report.workers == 2
    assert report.errors == {}, (report.errors, report.server_log_tail)
    assert report.publish.count > 0 and report.resolve.count > 0
    assert report.duplicate_numbers == [] and report.missing_numbers == []
    assert report.unresolvable_commits == []
    assert len(report.rss) >= 3
    assert all(g < RSS_GROWTH_BOUND_MIB for g in report.rss_growth_mib.values()), report.rss

"""PostgreSQL plans from statistics only ANALYZE gathers; the service keeps those of the
tables it bulk-loads (``Database.analyzed``), so a look-up of shards by URI takes the index
after a bulk registration or a derived version's copied rows, with autovacuum off or behind.

Without it, a freshly loaded ``shards`` table has no statistics and PostgreSQL answers "which
versions list these 500 URIs?" (asked per 500 shards at every registration) by reading every
row: ~1 s per question at 300,000 shards on this machine's server (autovacuum is off there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from recordkeeper_service import migrate
from recordkeeper_service.app import create_app
from recordkeeper_service.db import ANALYZE_MIN_ROWS, Database
from recordkeeper_service.settings import Settings
from tests.service._helpers import API, commit, register, shards, stage

pytestmark = pytest.mark.postgres


@pytest.fixture
def fresh(
    postgres_database_factory: Callable[[], str], tmp_path: object
) -> Iterator[tuple[Database, TestClient]]:
    """A migrated PostgreSQL database of its own (never analyzed) and a client of the app."""
    url = postgres_database_factory()
    database = Database(url, pool_size=1)
    migrate.upgrade(database)
    store = f"file:///tmp/rk-planner-stats-{id(database)}/"
    settings = Settings(
        database_url=url, storage_root=store, allowed_roots=[store], host="127.0.0.1"
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield database, client
    database.dispose()


def _rows_known(database: Database) -> float:
    """The planner's row count of ``shards`` (``pg_class.reltuples``, set by ANALYZE in its
    own transaction; -1: never analyzed)."""
    with database.engine.connect() as conn:
        return float(
            conn.execute(
                text("SELECT reltuples FROM pg_class WHERE relname = 'shards'")
            ).scalar_one()
        )


def _uri_plan(database: Database, uris: list[str]) -> str:
    with database.engine.connect() as conn:
        rows = conn.execute(
            text("EXPLAIN SELECT version_id FROM shards WHERE uri = ANY(CAST(:uris AS text[]))"),
            {"uris": uris},
        ).scalars()
        return "\n".join(rows)


def test_a_bulk_registration_leaves_statistics_the_uri_index_is_planned_from(
    fresh: tuple[Database, TestClient],
) -> None:
    database, client = fresh
    few = stage(client, "coco", desc="few")
    assert register(client, few["name"], shards(few["storage_prefix"], 10)).status_code == 200
    assert _rows_known(database) < 0  # ten rows: nothing to gain
    many = stage(client, "coco", desc="many")
    bodies = shards(many["storage_prefix"], ANALYZE_MIN_ROWS + 500)
    for start in range(0, len(bodies), 500):  # the client's batches
        done = register(client, many["name"], bodies[start : start + 500])
        assert done.status_code == 200, done.text
    assert _rows_known(database) >= ANALYZE_MIN_ROWS
    assert commit(client, many["name"]).status_code == 200
    # the planner expects what it will find (50 rows), not a share of the table by default
    plan = _uri_plan(database, [b["uri"] for b in bodies[:50]])
    estimate = int(plan.split("rows=", 1)[1].split()[0])
    assert estimate <= 100, plan[:200]


def test_a_derived_versions_copied_rows_refresh_the_statistics(
    fresh: tuple[Database, TestClient],
) -> None:
    database, client = fresh
    base = stage(client, "coco", desc="base")
    bodies = shards(base["storage_prefix"], ANALYZE_MIN_ROWS)
    assert register(client, base["name"], bodies).status_code == 200
    assert commit(client, base["name"]).status_code == 200
    assert _rows_known(database) == ANALYZE_MIN_ROWS  # analyzed after the registration
    derived = stage(client, "coco", base=base["name"], desc="derived")
    done = client.post(
        f"{API}/versions/{derived['name']}/commit",
        json={"on_duplicate": "commit", "changes": {"rename_splits": {"train": "all"}}},
    )
    assert done.status_code == 200, done.text
    assert _rows_known(database) == 2 * ANALYZE_MIN_ROWS  # analyzed again after the copy


def test_sqlite_and_unknown_tables() -> None:
    database = Database("sqlite://", pool_size=1)
    try:
        assert database.analyzed("shards", 10**6) is False  # SQLite plans by its indexes
    finally:
        database.dispose()


def test_small_registrations_ask_postgresql_nothing(
    fresh: tuple[Database, TestClient],
) -> None:
    """The check stays off the registration's path until this process's rows add up."""
    from sqlalchemy import event

    database, _client = fresh
    sent: list[str] = []
    event.listen(database.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    for _ in range(9):
        assert database.analyzed("shards", ANALYZE_MIN_ROWS // 10) is False
    assert sent == []
    assert database.analyzed("shards", ANALYZE_MIN_ROWS // 10) is True  # 1,000 rows: asked
    assert sent and sent[-1].startswith("ANALYZE")

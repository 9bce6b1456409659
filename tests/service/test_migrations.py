"""Migrations: empty → head, no drift from the models, one head; start-up refuses otherwise."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from sqlalchemy import inspect, text

from recordkeeper_service import migrate
from recordkeeper_service.app import create_app
from recordkeeper_service.db import Database
from recordkeeper_service.repository.lineage import CheckpointInput, LineageRepository
from recordkeeper_service.settings import Settings
from recordkeeper_service.startup import StartupError
from recordkeeper_service.tables import Base


@pytest.fixture
def empty_db(empty_database_url: str) -> Database:
    database = Database(empty_database_url, pool_size=1)
    yield database  # type: ignore[misc]
    database.dispose()


def test_exactly_one_head() -> None:
    script = ScriptDirectory.from_config(migrate.alembic_config())
    assert len(script.get_heads()) == 1
    assert migrate.head_revision() == script.get_current_head()


def test_revisions_do_not_import_the_orm() -> None:
    script = ScriptDirectory.from_config(migrate.alembic_config())
    for revision in script.walk_revisions():
        source = open(revision.path, encoding="utf-8").read()  # noqa: SIM115
        assert "recordkeeper_service.tables" not in source, revision.path
        assert "recordkeeper_service" not in source, revision.path


def test_upgrade_empty_to_head_and_no_drift(empty_db: Database) -> None:
    assert migrate.current_revision(empty_db) is None
    status = migrate.upgrade(empty_db)
    assert status.at_head
    tables = set(inspect(empty_db.engine).get_table_names())
    registry = {
        "datasets",
        "versions",
        "shards",
        "schemas",
        "aliases",
        "alias_history",
        "audit_events",
        "api_tokens",
    }
    assert registry <= tables
    # `alembic check`: autogenerate finds no difference between the models and the database
    config = migrate.alembic_config(empty_db)
    with empty_db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.check(config)
    # every constraint is named by the naming convention
    inspector = inspect(empty_db.engine)
    for table in registry:
        for unique in inspector.get_unique_constraints(table):
            assert unique["name"] and unique["name"].startswith("uq_"), (table, unique)
        for fk in inspector.get_foreign_keys(table):
            assert fk["name"] and fk["name"].startswith("fk_"), (table, fk)
    # upgrading again is a no-op
    assert migrate.upgrade(empty_db).current == status.current


def test_downgrade_to_base_and_back(empty_db: Database) -> None:
    migrate.upgrade(empty_db)
    config = migrate.alembic_config(empty_db)
    with empty_db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "base")
    assert migrate.current_revision(empty_db) is None
    assert migrate.upgrade(empty_db).at_head


def test_downgrade_refuses_what_the_older_schema_cannot_hold(empty_db: Database) -> None:
    """Below 1ccf43ccea4c a checkpoint name is unique per model: a name in two runs makes the
    downgrade stop with a message naming it, before changing anything."""
    migrate.upgrade(empty_db)
    head = migrate.current_revision(empty_db)
    lineage = LineageRepository(empty_db)
    for run in ("r1", "r2"):
        lineage.register("det", "ckpt-1", CheckpointInput(run=run), actor="t")
    config = migrate.alembic_config(empty_db)
    with (
        pytest.raises(RuntimeError, match=r"det/ckpt-1 \(2 runs\)"),
        empty_db.engine.begin() as conn,
    ):
        config.attributes["connection"] = conn
        command.downgrade(config, "000576a38782")
    assert migrate.current_revision(empty_db) == head  # nothing was changed


def test_models_cover_the_registry_tables() -> None:
    names = set(Base.metadata.tables)
    assert {"datasets", "versions", "shards", "schemas", "api_tokens"} <= names


def test_service_refuses_an_empty_database(
    make_settings: Callable[..., Settings], empty_database_url: str
) -> None:
    app = create_app(make_settings(database_url=empty_database_url))
    with pytest.raises(StartupError, match="recordkeeper db upgrade"), TestClient(app):
        pass


def test_service_refuses_an_unknown_revision(
    make_settings: Callable[..., Settings], empty_db: Database, empty_database_url: str
) -> None:
    migrate.upgrade(empty_db)
    with empty_db.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffffffffffff'"))
    app = create_app(make_settings(database_url=empty_database_url))
    with pytest.raises(StartupError, match="newer recordkeeper"), TestClient(app):
        pass


def test_readyz_reports_a_database_not_at_head(
    make_settings: Callable[..., Settings], empty_db: Database, empty_database_url: str
) -> None:
    migrate.upgrade(empty_db)
    app = create_app(make_settings(database_url=empty_database_url))
    with TestClient(app) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {
            "status": "ready",
            "database": "ok",
            "revision": migrate.head_revision(),
        }
        with empty_db.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = 'ffffffffffff'"))
        not_ready = client.get("/readyz")
        assert not_ready.status_code == 503
        assert not_ready.json()["code"] == "not_ready"
        assert "recordkeeper db upgrade" in not_ready.json()["detail"]
        assert client.get("/healthz").json() == {"status": "ok"}


def test_checkpoints_without_a_run_get_the_run_their_directory_derives(empty_db: Database) -> None:
    """Revision 1ccf43ccea4c gives every existing checkpoint a run (issue 9): the one its URI's
    directory derives (as new registrations do), ``default`` without a URI; explicit runs stay."""
    from recordkeeper.core.lineage import DEFAULT_RUN, run_of

    migrate.upgrade(empty_db, "25be41bb25cb")
    now = "2026-11-30 12:00:00"
    with empty_db.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO models (name, created_at, created_by) VALUES ('det', :t, 'a')"),
            {"t": now},
        )
        model_id = conn.execute(text("SELECT id FROM models")).scalar_one()
        conn.execute(
            text(
                "INSERT INTO runs (model_id, name, created_at, created_by) "
                "VALUES (:m, 'sweep-7', :t, 'a')"
            ),
            {"m": model_id, "t": now},
        )
        sweep = conn.execute(text("SELECT id FROM runs")).scalar_one()
        rows = [
            ("ckpt-1", "file:///ck/run1/ckpt-1", None),
            ("ckpt-2", "file:///ck/run1/ckpt-2", None),
            ("ckpt-3", None, None),
            ("ckpt-4", "file:///ck/other/ckpt-4", sweep),
        ]
        for name, uri, run_id in rows:
            conn.execute(
                text(
                    "INSERT INTO checkpoints (model_id, name, uri, run_id, saved_models, "
                    "metrics, metadata, created_at, created_by) "
                    "VALUES (:m, :name, :uri, :run, '[]', '{}', '{}', :t, 'a')"
                ),
                {"m": model_id, "name": name, "uri": uri, "run": run_id, "t": now},
            )
    assert migrate.upgrade(empty_db).at_head
    with empty_db.engine.connect() as conn:
        got = dict(
            conn.execute(
                text(
                    "SELECT c.name, r.name FROM checkpoints c JOIN runs r ON r.id = c.run_id "
                    "WHERE c.state = 'present'"
                )
            ).all()
        )
        directory = conn.execute(
            text("SELECT directory FROM runs WHERE name = :n"),
            {"n": run_of(None, "file:///ck/run1/ckpt-1")},
        ).scalar_one()
    derived = run_of(None, "file:///ck/run1/ckpt-1")
    assert derived.startswith("run1-")
    assert got == {"ckpt-1": derived, "ckpt-2": derived, "ckpt-3": DEFAULT_RUN, "ckpt-4": "sweep-7"}
    assert directory == "file:///ck/run1"


def test_split_totals_of_versions_committed_before_are_filled(
    make_settings: Callable[..., Settings], empty_db: Database, empty_database_url: str
) -> None:
    """Revision a7c3e5d9b1f2 fills ``version_splits`` for the committed versions it finds
    (totals only: a derived version's prefixes are unknown, so a diff compares shards)."""
    from tests.service._helpers import API, publish, register, shards, stage

    migrate.upgrade(empty_db)
    app = create_app(make_settings(database_url=empty_database_url))
    with TestClient(app) as client:
        base = publish(client, "coco", count=3, splits=("test", "train"))["name"]
        derived = stage(client, "coco", base=base)
        assert register(client, derived["name"], shards(derived["storage_prefix"], 2)).is_success
        derived_name = client.post(f"{API}/versions/{derived['name']}/commit", json={}).json()[
            "name"
        ]
        stage(client, "coco")  # staged: no totals
    query = text(
        "SELECT v.name, s.split, s.shard_count, s.record_count, s.size, s.base_prefix "
        "FROM version_splits s JOIN versions v ON v.id = s.version_id ORDER BY v.name, s.split"
    )
    with empty_db.engine.connect() as conn:
        written = conn.execute(query).all()
    assert [(r[0], r[1], r[2], r[5]) for r in written] == [
        (base, "test", 3, None),
        (base, "train", 3, None),
        (derived_name, "test", 3, 3),
        (derived_name, "train", 5, 3),
    ]
    config = migrate.alembic_config(empty_db)
    with empty_db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "3b8c6d0e5f14")
    assert "version_splits" not in inspect(empty_db.engine).get_table_names()
    migrate.upgrade(empty_db)
    with empty_db.engine.connect() as conn:
        filled = conn.execute(query).all()
    assert filled == [(*r[:5], None) for r in written]
    with TestClient(create_app(make_settings(database_url=empty_database_url))) as client:
        diff = client.get(f"{API}/versions/{base}/diff/{derived_name}").json()
        assert diff["basis"] == "shards"
        assert diff["shards"]["counts"] == {"added": 2, "removed": 0, "changed": 0}

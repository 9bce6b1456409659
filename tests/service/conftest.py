"""Fixtures for the service tests: the same tests run on SQLite and on PostgreSQL.

``database_url`` is parametrised over both backends and gives a migrated, empty database:

* SQLite: a copy of a template file migrated once per session;
* PostgreSQL: one database per session migrated once, emptied (``TRUNCATE``) before each test.

PostgreSQL comes from the shared server fixtures of ``tests/servers/plugin.py``
(``postgres_server_url``, ``postgres_database_factory``); under ``CI=true`` an unavailable
PostgreSQL fails the tests instead of skipping them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import text

from recordkeeper_service import migrate
from recordkeeper_service.app import create_app
from recordkeeper_service.db import Database
from recordkeeper_service.settings import Settings

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(scope="session")
def _migrated_postgres(postgres_server_url: str) -> str:
    """The session's PostgreSQL database (from tests/servers/plugin.py), migrated once."""
    database = Database(postgres_server_url, pool_size=1)
    try:
        migrate.upgrade(database)
    finally:
        database.dispose()
    return postgres_server_url


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "registry.db"
    database = Database(f"sqlite:///{path}", pool_size=1)
    try:
        migrate.upgrade(database)
    finally:
        database.dispose()
    return path


def _truncate_all(url: str) -> None:
    database = Database(url, pool_size=1)
    try:
        with database.engine.begin() as conn:
            names = conn.execute(
                text(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                    "AND tablename <> 'alembic_version'"
                )
            ).scalars()
            tables = ", ".join(f'"{name}"' for name in names)
            if tables:
                conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    finally:
        database.dispose()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or ``postgres``."""
    return str(request.param)


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """URL of a migrated, empty registry database on the parametrised backend."""
    if backend == "sqlite":
        template: Path = request.getfixturevalue("_sqlite_template")
        target = tmp_path / "registry.db"
        shutil.copyfile(template, target)
        return f"sqlite:///{target}"
    url: str = request.getfixturevalue("_migrated_postgres")
    _truncate_all(url)
    return url


@pytest.fixture
def empty_database_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """URL of a database with no tables at all, on the parametrised backend."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.db'}"
    factory: Callable[[], str] = request.getfixturevalue("postgres_database_factory")
    return factory()


@pytest.fixture
def store(tmp_path: Path) -> str:
    """The storage root (a ``file://`` URI of a tmp dir, with a trailing slash)."""
    path = tmp_path / "store"
    path.mkdir()
    return path.as_uri() + "/"


#: A second allowed root, for shards registered in place.
DATA_ROOT = "s3://ml-data/datasets/"


@pytest.fixture
def make_settings(database_url: str, store: str) -> Callable[..., Settings]:
    """``make_settings(**overrides)`` → Settings on the test database and storage root."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "database_url": database_url,
            "storage_root": store,
            "allowed_roots": [store, DATA_ROOT],
            "host": "127.0.0.1",
            "auth": "auto",
        }
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()


@pytest.fixture
def make_client(
    make_settings: Callable[..., Settings],
) -> Iterator[Callable[..., TestClient]]:
    """``make_client(**settings_overrides)`` → a started TestClient (closed at teardown)."""
    clients: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        app: FastAPI = create_app(make_settings(**overrides))
        client = TestClient(app, raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    """A client of the app with open access (auth=auto on 127.0.0.1)."""
    return make_client()

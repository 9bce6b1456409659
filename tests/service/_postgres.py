"""PostgreSQL for the service tests when the shared server plugin is not active.

The shared plugin (``tests.servers.plugin``) provides ``postgres_server_url`` and
``postgres_database_factory``; until it is enabled for a run, :class:`LocalPostgres` creates
databases on ``127.0.0.1:5432`` (trust auth, as on the development machines).  Under
``CI=true`` an unreachable server fails the tests instead of skipping them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable

import pytest

from recordkeeper.service.db import Database

__all__ = ["FALLBACK_ADMIN_URL", "PLUGIN", "LocalPostgres", "plugin_active", "postgres_factory"]

PLUGIN = "tests.servers.plugin"
FALLBACK_ADMIN_URL = os.environ.get(
    "RECORDKEEPER_TEST_POSTGRES_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def plugin_active(config: pytest.Config) -> bool:
    """True when the shared server fixtures are registered for this run."""
    return config.pluginmanager.hasplugin(PLUGIN)


def _strict() -> bool:
    return os.environ.get("CI", "").lower() == "true" or os.environ.get(
        "RECORDKEEPER_TEST_STRICT", ""
    ).lower() in ("1", "true", "yes")


class LocalPostgres:
    """Creates (and at the end drops) databases through an admin connection."""

    def __init__(self, admin_url: str = FALLBACK_ADMIN_URL) -> None:
        self.admin = Database(admin_url, pool_size=1)
        self.created: list[str] = []

    @classmethod
    def connect_or_skip(cls) -> LocalPostgres:
        """Connect, or skip (fail under CI) with the reason."""
        try:
            local = cls()
            local._execute("SELECT 1")
        except Exception as exc:
            message = f"PostgreSQL UNAVAILABLE: {FALLBACK_ADMIN_URL}: {str(exc).splitlines()[0]}"
            if _strict():
                pytest.fail(f"{message} (CI=true: a missing server fails)", pytrace=False)
            pytest.skip(message)
        return local

    def _execute(self, sql: str) -> None:
        with self.admin.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(sql)

    def create(self) -> str:
        """URL of a new, empty database."""
        name = f"rk_test_{uuid.uuid4().hex[:12]}"
        self._execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return self.admin.url.set(database=name).render_as_string(hide_password=False)

    def close(self) -> None:
        for name in self.created:
            self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.admin.dispose()


def postgres_factory(request: pytest.FixtureRequest) -> Callable[[], str]:
    """A callable giving fresh database URLs: the plugin's factory, or a local fallback
    whose databases are dropped when the requesting test finishes."""
    if plugin_active(request.config):
        factory: Callable[[], str] = request.getfixturevalue("postgres_database_factory")
        return factory
    local = LocalPostgres.connect_or_skip()
    request.addfinalizer(local.close)
    return local.create

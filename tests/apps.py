"""A fresh service app for tests that talk to it in-process: :func:`sqlite_app`.

The registry database is ``tmp_path/registry.db`` unless ``database_url`` is given (either is
migrated to head), the storage root
``tmp_path/store`` (created); ``allowed_roots`` defaults to that root alone.  Further settings go
to :class:`~recordkeeper_service.settings.Settings` as keywords.  The app runs inside a
``fastapi.testclient.TestClient`` (its lifespan started), which the context manager yields.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

__all__ = ["migrated", "sqlite_app"]


def migrated(url: str) -> str:
    """``url`` after migrating its database to the head revision."""
    from recordkeeper_service import migrate
    from recordkeeper_service.db import Database

    database = Database(url, pool_size=1)
    try:
        migrate.upgrade(database)
    finally:
        database.dispose()
    return url


@contextmanager
def sqlite_app(
    tmp_path: Path, *, raise_server_exceptions: bool = True, **settings: Any
) -> Iterator[TestClient]:
    """A ``TestClient`` of a fresh app on a migrated registry (SQLite in ``tmp_path`` unless
    ``database_url`` is given)."""
    from fastapi.testclient import TestClient

    from recordkeeper_service.app import create_app
    from recordkeeper_service.settings import Settings

    store = tmp_path / "store"
    store.mkdir(exist_ok=True)
    settings["database_url"] = migrated(
        settings.get("database_url") or f"sqlite:///{tmp_path / 'registry.db'}"
    )
    settings.setdefault("storage_root", store.as_uri())
    settings.setdefault("allowed_roots", [settings["storage_root"]])
    app = create_app(Settings(**settings))
    with TestClient(app, raise_server_exceptions=raise_server_exceptions) as http:
        yield http

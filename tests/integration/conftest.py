"""``live_service``: the recordkeeper service under real uvicorn on a free 127.0.0.1 port.

The app is built with ``create_app(Settings(...))`` on a fresh, migrated database (SQLite in a
temp dir; ``live_service_factory(database_url=...)`` takes a PostgreSQL URL too) and served by
``uvicorn.Server`` in a background thread, so clients talk to it over a real socket exactly as
users do.  ``allowed_roots`` name the tmp dirs and test buckets shards may live in.  A SQLite
registry is a copy of one migrated once per session (the migrations are the same for every
service; ``start_live_service`` still runs the upgrade, which finds it at the head).
"""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from tests.waiting import started, wait_for


@dataclass
class LiveService:
    """A running service: ``url``, the ``settings`` it runs with, and a way to stop it."""

    url: str
    storage_root: str
    allowed_roots: list[str]
    database_url: str
    _server: Any = field(repr=False, default=None)
    _thread: threading.Thread | None = field(repr=False, default=None)

    def client(self, **kwargs: Any) -> rk.Client:
        """A client for this service (extra kwargs go to :class:`recordkeeper.Client`)."""
        return rk.Client(self.url, **kwargs)

    @property
    def env(self) -> dict[str, str]:
        return {"RECORDKEEPER_URL": self.url}

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=15)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_live_service(
    *,
    storage_root: str,
    allowed_roots: Sequence[str],
    database_url: str,
) -> LiveService:
    """Migrate ``database_url``, build the app and serve it on a free loopback port."""
    uvicorn = pytest.importorskip("uvicorn")
    from recordkeeper_service import migrate
    from recordkeeper_service.app import create_app
    from recordkeeper_service.db import Database
    from recordkeeper_service.settings import Settings

    database = Database(database_url)
    try:
        migrate.upgrade(database)
    finally:
        database.dispose()
    settings = Settings(
        database_url=database_url,
        storage_root=storage_root,
        allowed_roots=list(allowed_roots),
        auth="auto",
        host="127.0.0.1",
    )
    app = create_app(settings)
    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn:{port}", daemon=True)
    thread.start()
    try:
        wait_for(started(server, thread), timeout=30, what=f"uvicorn on 127.0.0.1:{port}")
    except AssertionError:
        server.should_exit = True
        raise
    return LiveService(
        url=f"http://127.0.0.1:{port}",
        storage_root=storage_root,
        allowed_roots=list(allowed_roots),
        database_url=database_url,
        _server=server,
        _thread=thread,
    )


@pytest.fixture(scope="session")
def _migrated_sqlite_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty SQLite registry at the migrations' head, migrated once for the session."""
    from recordkeeper_service import migrate
    from recordkeeper_service.db import Database

    path = tmp_path_factory.mktemp("sqlite-registry") / "registry.db"
    database = Database(f"sqlite:///{path}")
    try:
        migrate.upgrade(database)
    finally:
        database.dispose()
    return path


@pytest.fixture
def live_service_factory(
    tmp_path_factory: pytest.TempPathFactory, _migrated_sqlite_registry: Path
) -> Iterator[Callable[..., LiveService]]:
    """``start(storage_root=..., allowed_roots=[...], database_url=None)`` → LiveService."""
    started: list[LiveService] = []

    def start(
        *,
        storage_root: str | None = None,
        allowed_roots: Sequence[str] | None = None,
        database_url: str | None = None,
    ) -> LiveService:
        base = tmp_path_factory.mktemp("rk-service")
        root = storage_root or (base / "store").as_uri()
        if storage_root is None:
            (base / "store").mkdir()
        roots = list(allowed_roots or [root])
        if root not in roots:
            roots.append(root)
        if database_url is None:
            shutil.copyfile(_migrated_sqlite_registry, base / "registry.db")
        url = database_url or f"sqlite:///{base / 'registry.db'}"
        service = start_live_service(storage_root=root, allowed_roots=roots, database_url=url)
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A tmp dir for shards users already have (inside the live service's allowed roots)."""
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def live_service(
    live_service_factory: Callable[..., LiveService], tmp_path: Path, data_dir: Path
) -> LiveService:
    """A service on SQLite whose allowed roots are its own store and ``data_dir``."""
    store = tmp_path / "store"
    store.mkdir()
    return live_service_factory(
        storage_root=store.as_uri(), allowed_roots=[store.as_uri(), data_dir.as_uri()]
    )

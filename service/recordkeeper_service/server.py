"""Running the service under uvicorn, with one or several worker processes.

The listening socket is created here, with ``TCP_NODELAY`` set on it; Linux copies that option
to every accepted connection, so keep-alive responses are never held back by Nagle's algorithm
waiting for the client's delayed ACK (the ~40 ms stall seen with ``uvicorn --workers N``, see
docs/operations.md).  With several workers the socket is shared by uvicorn's process
supervisor; each worker builds its app from the environment (:func:`settings_environment`).

Logging is configured for uvicorn and the service alike (:func:`recordkeeper_service.logs.
logging_config`: JSON lines by default), in every worker.  With several workers the runner gives
them a shared metrics directory (:func:`metrics_directory`, ``PROMETHEUS_MULTIPROC_DIR``) so that
``/metrics`` sums every worker, whichever one answers the scrape.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from recordkeeper_service.db import Database, normalize_database_url
from recordkeeper_service.logs import logging_config
from recordkeeper_service.metrics import MULTIPROCESS_ENV
from recordkeeper_service.settings import Settings
from recordkeeper_service.startup import check_startup, prepare_embedded_database

__all__ = ["listening_socket", "metrics_directory", "run", "settings_environment"]

log = logging.getLogger("recordkeeper_service")
APP_FACTORY = "recordkeeper_service.app:app_from_env"


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound TCP socket with ``SO_REUSEADDR`` and ``TCP_NODELAY`` (inherited by accepts)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def settings_environment(settings: Settings) -> dict[str, str]:
    """``RECORDKEEPER_*`` variables that make ``Settings()`` in a worker equal ``settings``."""
    env = {
        "RECORDKEEPER_STORAGE_ROOT": settings.storage_root,
        "RECORDKEEPER_ALLOWED_ROOTS": ",".join(settings.allowed_roots),
        "RECORDKEEPER_AUTH": settings.auth,
        "RECORDKEEPER_HOST": settings.host,
        "RECORDKEEPER_PORT": str(settings.port),
        "RECORDKEEPER_MAX_BODY_BYTES": str(settings.max_body_bytes),
        "RECORDKEEPER_MAX_SMALL_BODY_BYTES": str(settings.max_small_body_bytes),
        "RECORDKEEPER_VERSION_CACHE_BYTES": str(settings.version_cache_bytes),
        "RECORDKEEPER_SHARD_PAGES_CACHE_BYTES": str(settings.shard_pages_cache_bytes),
        "RECORDKEEPER_LINEAGE_CACHE_BYTES": str(settings.lineage_cache_bytes),
        "RECORDKEEPER_DB_POOL_SIZE": str(settings.db_pool_size),
        "RECORDKEEPER_LOG_LEVEL": settings.log_level,
        "RECORDKEEPER_LOG_FORMAT": settings.log_format,
        "RECORDKEEPER_REQUEST_LOG": "true" if settings.request_log else "false",
        "RECORDKEEPER_METRICS": settings.metrics,
        "RECORDKEEPER_TRUSTED_PROXIES": ",".join(settings.trusted_proxies),
    }
    if settings.database_url is not None:
        env["RECORDKEEPER_DATABASE_URL"] = settings.database_url
    return env


def preflight(settings: Settings) -> None:
    """Create the embedded database if new, then run the start-up checks once, up front."""
    if prepare_embedded_database(settings):
        log.info("created the embedded registry database")
    database = Database(settings.effective_database_url, pool_size=1)
    try:
        check_startup(settings, database)
    finally:
        database.dispose()


@contextmanager
def metrics_directory(workers: int) -> Iterator[str | None]:
    """The directory the workers share their metrics in, for the duration of the server.

    ``PROMETHEUS_MULTIPROC_DIR`` if set (its stale ``*.db`` files from an earlier run are
    removed: counts restart with the server); else, with several workers, a new temporary
    directory removed at exit; else (one worker) none: metrics live in the process.
    """
    configured = os.environ.get(MULTIPROCESS_ENV)
    if configured:
        directory = Path(configured)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink()
        yield str(directory)
        return
    if workers <= 1:
        yield None
        return
    created = tempfile.mkdtemp(prefix="recordkeeper-metrics-")
    os.environ[MULTIPROCESS_ENV] = created
    try:
        yield created
    finally:
        os.environ.pop(MULTIPROCESS_ENV, None)
        shutil.rmtree(created, ignore_errors=True)


def run(
    settings: Settings,
    *,
    workers: int = 1,
    access_log: bool = False,
    loop: str = "auto",
    http: str = "auto",
) -> None:
    """Serve until interrupted.  Raises :class:`~.startup.StartupError` if unsafe."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    preflight(settings)
    os.environ.update(settings_environment(settings))
    sock = listening_socket(settings.host, settings.port)
    config = uvicorn.Config(
        APP_FACTORY,
        factory=True,
        workers=workers,
        log_config=logging_config(settings.log_level, settings.log_format),
        log_level=settings.log_level,
        access_log=access_log,
        loop=loop,
        http=http,
        lifespan="on",
        server_header=False,
        # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise (and reads
        # FORWARDED_ALLOW_IPS from the environment): only the configured proxies are believed.
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=list(settings.trusted_proxies),
    )
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in str(host) else host
    print(
        f"recordkeeper serving on http://{shown}:{port} with {workers} worker(s); "
        f"auth: {'open (loopback, direct requests)' if settings.open_access else 'token'}; "
        f"database: {normalize_database_url(settings.effective_database_url).render_as_string()}",
        flush=True,
    )
    try:
        with metrics_directory(workers):
            if workers > 1:
                Multiprocess(config, sockets=[sock]).run()
            else:
                uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()

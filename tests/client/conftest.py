"""Fixtures shared by the client tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import recordkeeper as rk
from recordkeeper import _native


@pytest.fixture(params=["native", "python"])
def implementation(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """Run a test with the C fast paths and with the pure-Python reference code.

    The C extension is built by every install on a machine with a compiler; in CI (CI=true) a
    missing build fails instead of skipping.
    """
    if request.param == "python":
        monkeypatch.setattr(_native, "speedups", None)
    elif _native.speedups is None:
        reason = "recordkeeper._speedups is not built (no compiler at install time?)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    yield request.param


@pytest.fixture
def client(tmp_path: Path) -> Iterator[rk.Client]:
    """A client of the service in-process (SQLite, default settings); a test file that needs
    other settings defines its own ``client``."""
    pytest.importorskip("fastapi")
    from tests.apps import sqlite_app

    with sqlite_app(tmp_path) as http:
        yield rk.Client(http_client=http)

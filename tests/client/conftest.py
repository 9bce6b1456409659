"""Fixtures shared by the client tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

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

"""Choosing the C fast paths or the pure-Python code (recordkeeper._native)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from recordkeeper import _native

PROBE = "from recordkeeper import _native; print(_native.speedups is None)"


def _pure(value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != _native.PURE_PYTHON_ENV}
    if value is not None:
        env[_native.PURE_PYTHON_ENV] = value
    return subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "on"])
def test_the_usual_spellings_of_true_select_pure_python(value: str) -> None:
    assert _pure(value).stdout.strip() == "True"


@pytest.mark.parametrize("value", [None, "", "0", "false", "off"])
def test_off_or_unset_selects_the_c_fast_paths(value: str | None) -> None:
    if _native.speedups is None and os.environ.get("CI") != "true":
        pytest.skip("recordkeeper._speedups is not built here")
    assert _pure(value).stdout.strip() == "False"


def test_a_misspelt_value_is_a_clear_error() -> None:
    result = _pure("maybe")
    assert result.returncode != 0
    assert "RECORDKEEPER_PURE_PYTHON='maybe' is neither on" in result.stderr

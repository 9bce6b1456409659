"""``python3 dev.py test`` spreads the suite over the cores (pytest-xdist, a file per worker)
unless the arguments choose otherwise or only collect."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_whole_suite_runs_a_file_per_worker_on_every_core() -> None:
    dev = _dev()
    assert dev._pytest_args([]) == ["-n", "auto", "--dist", "loadfile"]
    assert dev._pytest_args(["tests/core", "-k", "naming"]) == [
        "-n",
        "auto",
        "--dist",
        "loadfile",
        "tests/core",
        "-k",
        "naming",
    ]


@pytest.mark.parametrize(
    "args",
    [["-n", "0"], ["-n0"], ["--numprocesses=1"], ["-p", "no:xdist"], ["--collect-only", "-q"]],
)
def test_arguments_that_choose_are_left_as_they_are(args: list[str]) -> None:
    assert _dev()._pytest_args(args) == args

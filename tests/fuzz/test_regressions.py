"""The kept minimal failing inputs (regressions.py), on both implementations and TensorFlow."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from recordkeeper import _native

from ._harness import (
    TensorFlowOracle,
    agree_with_tensorflow,
    differential,
    engine,
    implementation,
)
from .regressions import CASES, TENSORFLOW_CRASHES

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("chunk", [1, 13, 8 << 20])
@pytest.mark.parametrize("name", list(CASES))
def test_c_and_python_agree(name: str, chunk: int) -> None:
    data, compression = CASES[name]
    differential(data, compression, chunk)


@pytest.mark.tf
@pytest.mark.parametrize("name", list(CASES))
def test_tensorflow_agrees(tf_oracle: TensorFlowOracle, name: str) -> None:
    data, compression = CASES[name]
    theirs = tf_oracle.read(data, compression)
    assert theirs is not None or name in TENSORFLOW_CRASHES, "TensorFlow did not answer"
    agree_with_tensorflow(differential(data, compression, 8 << 20), theirs, compression)


def test_recordkeeper_pure_python_gives_what_the_c_paths_give(tmp_path: Path) -> None:
    if _native.speedups is None and os.environ.get("CI") != "true":
        pytest.skip("recordkeeper._speedups is not built here")
    out = tmp_path / "pure.pickle"
    env = {**os.environ, "RECORDKEEPER_PURE_PYTHON": "TRUE"}
    probe = "from recordkeeper import _native; assert _native.speedups is None"
    subprocess.run([sys.executable, "-c", probe], env=env, check=True, cwd=REPO)
    subprocess.run(
        [sys.executable, "-m", "tests.fuzz.regressions", str(out)], env=env, check=True, cwd=REPO
    )
    with out.open("rb") as fh:
        pure = pickle.load(fh)
    with implementation("native"):
        native = {name: engine(data, comp) for name, (data, comp) in CASES.items()}
    assert pure == native

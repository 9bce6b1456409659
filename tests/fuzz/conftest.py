"""Fixtures of the fuzz harness: the TensorFlow oracle process."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from tests.servers.plugin import skip_or_fail

from ._harness import TensorFlowOracle


@pytest.fixture(scope="session")
def tf_oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TensorFlowOracle]:
    """TensorFlow reading files in a subprocess.  TensorFlow is not imported here: the oracle
    also serves the sanitizer run (scripts/sanitize.sh), whose process TensorFlow would not
    survive; the subprocess runs without the sanitizers."""
    if importlib.util.find_spec("tensorflow") is None:
        skip_or_fail("TensorFlow UNAVAILABLE: the fuzz oracle needs tensorflow")
    oracle = TensorFlowOracle(tmp_path_factory.mktemp("tf-oracle"))
    yield oracle
    oracle.close()

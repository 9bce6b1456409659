"""Differential fuzzing of the TFRecord engine: C against Python, both against TensorFlow.

Budget: ``RECORDKEEPER_FUZZ_EXAMPLES`` cases per test (default 120); the long run before a
release sets it to 20000 (docs/development.md).  A failure prints the minimal case; add it to
``regressions.py`` so that it runs on every test run from then on.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from . import _harness
from ._harness import (
    COMPRESSIONS,
    READ_SIZES,
    TensorFlowOracle,
    agree_with_tensorflow,
    differential,
    file_mutations,
    fuzz_settings,
    record_sets,
)

FUZZ = fuzz_settings()


@st.composite
def cases(draw: st.DrawFn) -> tuple[bytes, str, int]:
    compression = draw(st.sampled_from(COMPRESSIONS))
    data = _harness.write(draw(record_sets()), compression)
    return draw(file_mutations(data, compression)), compression, draw(st.sampled_from(READ_SIZES))


@pytest.mark.tf
@FUZZ
@given(case=cases())
def test_c_python_and_tensorflow_agree(
    tf_oracle: TensorFlowOracle, case: tuple[bytes, str, int]
) -> None:
    data, compression, chunk = case
    ours = differential(data, compression, chunk)
    agree_with_tensorflow(ours, tf_oracle.read(data, compression), compression)


@FUZZ
@given(records=record_sets(), compression=st.sampled_from(COMPRESSIONS))
def test_intact_shards_read_back_exactly(records: list[bytes], compression: str) -> None:
    ours = differential(_harness.write(records, compression), compression, 8 << 20)
    assert ours["error"] is None
    assert ours["records"] == records

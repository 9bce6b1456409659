"""The C functions called directly with hostile arguments, checked against their contracts.

Under ``scripts/sanitize.sh`` these calls run with AddressSanitizer and UBSan.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from recordkeeper.schema_inference import _KindClash, _Malformed, _parse

from ._harness import RECORD, SPEEDUPS, frame_header, framed, fuzz_settings, mutated
from .regressions import OVERLONG_LENGTH

DIRECT = fuzz_settings(scale=2)

pytestmark = pytest.mark.skipif(SPEEDUPS is None, reason="recordkeeper._speedups is not built")


def reference_deframe(buf: bytes, pos: int) -> tuple[list[bytes], int]:
    """The good complete frames from ``pos``, and where the rest starts (CRCs checked)."""
    from recordkeeper.tfrecord import masked_crc32c

    records = []
    while pos + 12 <= len(buf):
        length = int.from_bytes(buf[pos : pos + 8], "little")
        if masked_crc32c(buf[pos : pos + 8]) != int.from_bytes(buf[pos + 8 : pos + 12], "little"):
            break
        end = pos + 12 + length
        if end + 4 > len(buf):
            break
        data = buf[pos + 12 : end]
        if masked_crc32c(data) != int.from_bytes(buf[end : end + 4], "little"):
            break
        records.append(data)
        pos = end + 4
    return records, pos


@st.composite
def buffers(draw: st.DrawFn) -> tuple[bytes, int]:
    records = draw(st.lists(st.binary(max_size=30), max_size=6))
    buf = framed(records)
    how = draw(st.sampled_from(["intact", "flip", "cut", "claim", "noise"]))
    if how == "flip" and buf:
        at = draw(st.integers(0, len(buf) - 1))
        buf = buf[:at] + bytes([buf[at] ^ 0xFF]) + buf[at + 1 :]
    elif how == "cut":
        buf = buf[: draw(st.integers(0, len(buf)))]
    elif how == "claim":
        buf += frame_header(draw(st.integers(0, (1 << 64) - 1))) + draw(st.binary(max_size=8))
    elif how == "noise":
        buf = draw(st.binary(max_size=64))
    return buf, draw(st.integers(0, len(buf)))


@DIRECT
@given(case=buffers(), verify=st.booleans(), copy=st.booleans())
def test_deframe_walks_exactly_the_good_frames(
    case: tuple[bytes, int], verify: bool, copy: bool
) -> None:
    assert SPEEDUPS is not None
    buf, pos = case
    found, end, count, error = SPEEDUPS.deframe(buf, pos, verify, copy)
    summary, slow, end_keys, count_keys, error_keys = SPEEDUPS.deframe_keys(buf, pos, verify)
    assert (end_keys, count_keys, error_keys) == (end, count, error)
    if verify:
        records, stop = reference_deframe(buf, pos)
        assert (count, end) == (len(records), stop)
        if copy:
            assert found == records
        assert sum(n for _, n in summary.values()) + len(slow) == count
    for bad in (-1, len(buf) + 1):
        with pytest.raises(ValueError):
            SPEEDUPS.deframe(buf, bad, verify, copy)


@DIRECT
@given(records=st.lists(mutated(RECORD), max_size=10))
@example(records=[b"", OVERLONG_LENGTH])  # issue 14.1
def test_equal_structure_keys_mean_equal_summaries(records: list[bytes]) -> None:
    """The contract of structure_keys: a record outside ``slow`` parses, and records with one
    key have one summary (so Python parses one record per key)."""
    assert SPEEDUPS is not None
    by_key: dict[bytes, object] = {}
    for record in records:
        summary, slow = SPEEDUPS.structure_keys([record])
        if slow:
            continue
        ((key, _),) = summary.items()
        try:
            signature, _ = _parse(record)
        except (_Malformed, _KindClash) as exc:
            raise AssertionError(f"C gave a key to a record Python refuses: {record!r}") from exc
        assert by_key.setdefault(key, signature) == signature, record

"""The C functions called directly with hostile arguments, checked against their contracts.

Under ``scripts/sanitize.sh`` these calls run with AddressSanitizer and UBSan.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from recordkeeper.schema_inference import _KindClash, _Malformed, _parse

from ._harness import (
    RECORD,
    SPEEDUPS,
    entry,
    field,
    frame_header,
    framed,
    fuzz_settings,
    mutated,
    record_sets,
)
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


def _ints(packed: bytes) -> bytes:
    """An Example with one packed int64 list: its varints' high bits make its value count."""
    return field(0x0A, entry("n", field(0x1A, field(0x0A, packed))))


@st.composite
def alike(draw: st.DrawFn) -> list[bytes]:
    """Records sharing a layout: one template with single bytes changed (a value, a length, a
    tag or a name; the varint bits of packed int64s included), as a dataset's records are."""
    records = draw(record_sets())
    if not records:
        return records
    template = records[0]
    out = [template]
    for _ in range(draw(st.integers(0, 8))):
        record = bytearray(draw(st.sampled_from(out)))
        if record:
            at = draw(st.integers(0, len(record) - 1))
            record[at] ^= draw(st.sampled_from([0x80, 0x01, 0x7F, 0xFF]))
        out.append(bytes(record))
    return out + records[1:]


@DIRECT
@given(
    records=st.one_of(alike(), st.lists(mutated(RECORD), max_size=10)),
    offset=st.integers(0, 40),
    crc=st.integers(0, (1 << 32) - 1),
)
@example(records=[b"\x0a\x02\x81\x01"], offset=0, crc=0)
@example(records=[_ints(b"\x01\x01"), _ints(b"\x81\x01"), _ints(b"\x01\x81")], offset=0, crc=0)
@example(records=[_ints(b"\x81\x01"), _ints(b"\x01\x01"), _ints(b"\x02\x01")], offset=1, crc=7)
def test_frame_into_is_frame_and_structure_keys(
    records: list[bytes], offset: int, crc: int
) -> None:
    """frame_into writes what frame() builds, answers its CRC32C, and (with keys) the summary
    structure_keys() gives, in the same order: the layout shortcut never changes a key."""
    assert SPEEDUPS is not None
    from crc32c import crc32c

    expected = SPEEDUPS.frame(records)
    buf = bytearray(b"\xee" * (offset + len(expected) + 3))
    end, crc_out, summary, slow = SPEEDUPS.frame_into(records, buf, offset, True, crc)
    assert end == offset + len(expected)
    assert bytes(buf[offset:end]) == expected
    assert buf[:offset] == b"\xee" * offset and buf[end:] == b"\xee" * 3
    assert crc_out == crc32c(expected, crc)
    want_summary, want_slow = SPEEDUPS.structure_keys(records)
    assert list(summary.items()) == list(want_summary.items())
    assert slow == want_slow
    assert SPEEDUPS.frame_into(records, buf, offset, False, crc) == (end, crc_out, None, None)
    if expected:
        with pytest.raises(ValueError):
            SPEEDUPS.frame_into(records, buf, len(buf) - len(expected) + 1, True, crc)
    with pytest.raises(ValueError):
        SPEEDUPS.frame_into(records, buf, -1, True, crc)

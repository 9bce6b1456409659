"""recordkeeper.core.record_identity: record hashes and the canonical Example form.

The Examples are encoded by hand here (the core has no protobuf); tests/client/
test_record_identity_tf.py checks the canonical form against TensorFlow's own parser.
"""

from __future__ import annotations

import hashlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recordkeeper.core.errors import InvalidInput
from recordkeeper.core.record_identity import (
    NotAnExample,
    canonical_example,
    record_hash,
    validate_identity,
)


def _v(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _ld(field: int, payload: bytes) -> bytes:
    return _v(field << 3 | 2) + _v(len(payload)) + payload


def _ints(values: list[int], packed: bool = True) -> bytes:
    if packed:
        return _ld(3, _ld(1, b"".join(_v(x % 2**64) for x in values)))
    return _ld(3, b"".join(_v(1 << 3) + _v(x % 2**64) for x in values))


def _floats(values: list[float], packed: bool = True) -> bytes:
    raw = [struct.pack("<f", x) for x in values]
    if packed:
        return _ld(2, _ld(1, b"".join(raw)))
    return _ld(2, b"".join(b"\x0d" + r for r in raw))


def _bytes(values: list[bytes]) -> bytes:
    return _ld(1, b"".join(_ld(1, x) for x in values))


def _example(entries: list[tuple[str, bytes]]) -> bytes:
    return _ld(1, b"".join(_ld(1, _ld(1, k.encode()) + _ld(2, f)) for k, f in entries))


def test_bytes_identity_is_truncated_sha256() -> None:
    assert record_hash(b"abc") == hashlib.sha256(b"abc").digest()[:16]
    assert record_hash(b"abc", width=32) == hashlib.sha256(b"abc").digest()


@pytest.mark.parametrize(
    "kind,width", [("text", 16), ("bytes", 15), ("bytes", 33), ("bytes", True)]
)
def test_bad_identity_settings_are_refused(kind, width) -> None:
    with pytest.raises(InvalidInput):
        validate_identity(kind, width)


def test_feature_order_packing_and_repeats_do_not_change_the_example_identity() -> None:
    a = _example([("label", _ints([3, -1])), ("image", _bytes([b"png"])), ("w", _floats([0.5]))])
    b = _example(
        [
            ("w", _floats([0.5], packed=False)),
            ("image", _bytes([b"png"])),
            ("label", _ints([3, -1], packed=False)),
        ]
    )
    c = _example(
        [
            ("label", _ints([9])),
            ("image", _bytes([b"png"])),
            ("w", _floats([0.5])),
            ("label", _ints([3, -1])),
        ]
    )
    assert a != b
    assert record_hash(a, "example") == record_hash(b, "example") == record_hash(c, "example")
    assert record_hash(a) != record_hash(b)  # the bytes identity sees the difference
    assert canonical_example(canonical_example(b)) == canonical_example(b)


def test_a_value_change_changes_the_example_identity() -> None:
    a = _example([("label", _ints([3]))])
    assert record_hash(a, "example") != record_hash(_example([("label", _ints([4]))]), "example")
    assert record_hash(a, "example") != record_hash(
        _example([("label", _floats([3.0]))]), "example"
    )
    assert record_hash(a, "example") != record_hash(_example([("lab", _ints([3]))]), "example")


def test_a_sequence_example_never_equals_an_example() -> None:
    ex = _example([("x", _ints([1]))])
    seq = ex + _ld(2, b"")
    assert record_hash(ex, "example") != record_hash(seq, "example")


def test_a_record_that_is_not_an_example_keeps_a_separate_identity() -> None:
    with pytest.raises(NotAnExample):
        canonical_example(b"\xff\xff")
    raw = b"\xff\xff"
    assert record_hash(raw, "example") == hashlib.sha256(b"\x00" + raw).digest()[:16]
    # A raw record spelling out the canonical tag and form cannot take an Example's identity.
    ex = _example([("x", _ints([1]))])
    assert record_hash(b"\x01" + canonical_example(ex), "example") != record_hash(ex, "example")


@given(st.binary(max_size=200))
def test_any_bytes_get_an_example_identity(data) -> None:
    assert len(record_hash(data, "example")) == 16

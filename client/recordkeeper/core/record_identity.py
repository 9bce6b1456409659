"""What "the same record" means: a record's identity hash, and the canonical form of an Example.

Two kinds of identity (docs/record-identity.md):

``bytes`` (the default)
    ``sha256(record)[:width]``: the record's bytes as the writer framed them, nothing else.
    Compression, sharding and order do not change it; anyone can recompute it from one record
    with any sha256 tool.
``example``
    ``sha256(tag || payload)[:width]`` where, for a record that parses as a
    ``tf.train.Example`` or ``tf.train.SequenceExample`` built only of the fields those messages
    define, ``tag`` is ``0x01`` and ``payload`` its :func:`canonical_example` form; for any other
    record ``tag`` is ``0x00`` and ``payload`` the record's bytes.  The tag keeps the two inputs
    apart: no raw record can take the identity of a canonical form.  So the same example written
    by two writers (feature maps in another order, numeric lists packed or not, a key repeated)
    matches, and a record that is not an Example still has an identity.

Width: 16 bytes (128 bits) by default, any width from 16 to 32 allowed.  Accidental collisions:
among ``n`` records the chance that any two share a 128-bit identity is below ``n² / 2¹²⁹`` —
3·10⁻¹⁹ for ten billion records.  Deliberate ones: finding two different records with the same
``w``-byte identity is a birthday search of about ``2^(4w)`` sha256 evaluations — 2⁶⁴ at 16
bytes, beyond a cluster's reach for years but not beyond the largest proof-of-work networks; a
registry that fears such an adversary indexes with ``width=32`` (full sha256, 2¹²⁸).  The width is
stored in every index and is part of every set digest, so identities of two widths never compare
equal by accident.

Pure: standard library only (``hashlib``, ``struct``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Final, Literal

from recordkeeper.core.errors import InvalidInput

__all__ = [
    "DEFAULT_WIDTH",
    "IDENTITY_KINDS",
    "KIND_CODES",
    "MAX_RECORD_SET_SPLITS",
    "MAX_WIDTH",
    "MIN_WIDTH",
    "IdentityKind",
    "NotAnExample",
    "canonical_example",
    "record_hash",
    "record_hasher",
    "validate_identity",
]

IdentityKind = Literal["bytes", "example"]
IDENTITY_KINDS: Final[tuple[IdentityKind, ...]] = ("bytes", "example")
#: The byte an index header and a set digest store for each kind (never renumber one).
KIND_CODES: Final[dict[IdentityKind, int]] = {"bytes": 1, "example": 2}
DEFAULT_WIDTH: Final = 16
MIN_WIDTH: Final = 16
MAX_WIDTH: Final = 32
#: The most splits one version's record identity covers (its record sets): a version with
#: more publishes and reads as any other, but is not indexed.
MAX_RECORD_SET_SPLITS: Final = 1000

_CANONICAL_TAG: Final = b"\x01"
_RAW_TAG: Final = b"\x00"

_Hasher = Callable[[bytes], bytes]


class NotAnExample(ValueError):
    """The record is not an Example/SequenceExample made only of the fields they define."""


def validate_identity(kind: object, width: object) -> tuple[IdentityKind, int]:
    """``(kind, width)`` checked: a known kind and a width from 16 to 32 bytes."""
    if kind not in IDENTITY_KINDS:
        raise InvalidInput(f"identity kind must be one of {', '.join(IDENTITY_KINDS)}: {kind!r}")
    if isinstance(width, bool) or not isinstance(width, int) or not MIN_WIDTH <= width <= MAX_WIDTH:
        raise InvalidInput(f"identity width must be {MIN_WIDTH} to {MAX_WIDTH} bytes: {width!r}")
    return kind, width


def record_hash(record: bytes, kind: IdentityKind = "bytes", width: int = DEFAULT_WIDTH) -> bytes:
    """The ``width``-byte identity of one record (see the module docstring)."""
    return record_hasher(kind, width)(record)


def record_hasher(kind: IdentityKind = "bytes", width: int = DEFAULT_WIDTH) -> _Hasher:
    """A function record → identity for ``kind`` and ``width`` (one check, then no branches)."""
    kind, width = validate_identity(kind, width)
    sha256 = hashlib.sha256
    if kind == "bytes":

        def by_bytes(record: bytes) -> bytes:
            return sha256(record).digest()[:width]

        return by_bytes

    def by_example(record: bytes) -> bytes:
        try:
            payload = _CANONICAL_TAG + canonical_example(record)
        except NotAnExample:
            payload = _RAW_TAG + bytes(record)
        return sha256(payload).digest()[:width]

    return by_example


# --------------------------------------------------------------------------- canonical Example
#
# Example         = {1: Features}
# SequenceExample = {1: Features context, 2: FeatureLists}
# Features        = {1: map<string, Feature>}       map entry = {1: key, 2: value}
# FeatureLists    = {1: map<string, FeatureList>}   FeatureList = {1: repeated Feature}
# Feature         = oneof {1: BytesList, 2: FloatList, 3: Int64List}
# BytesList = {1: repeated bytes}; FloatList = {1: repeated float}; Int64List = {1: repeated int64}


def _varint(buf: bytes, pos: int, stop: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= stop or shift > 63:
            raise NotAnExample("bad varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7


def _enc_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fields(buf: bytes, start: int, stop: int) -> list[tuple[int, int, int, int]]:
    """The fields of one message: (field number, wire type, start, end of the value).

    Only varint (0), fixed32 (5) and length-delimited (2) values occur in these messages; any
    other wire type, or a length past the message, raises :class:`NotAnExample`.
    """
    out: list[tuple[int, int, int, int]] = []
    pos = start
    while pos < stop:
        key, pos = _varint(buf, pos, stop)
        number, wire = key >> 3, key & 7
        if wire == 2:
            length, pos = _varint(buf, pos, stop)
            end = pos + length
        elif wire == 0:
            _, end = _varint(buf, pos, stop)
        elif wire == 5:
            end = pos + 4
        else:
            raise NotAnExample(f"wire type {wire}")
        if end > stop:
            raise NotAnExample("value past the end of its message")
        out.append((number, wire, pos, end))
        pos = end
    return out


def _ld(number: int, payload: bytes) -> bytes:
    return _enc_varint(number << 3 | 2) + _enc_varint(len(payload)) + payload


def _feature(buf: bytes, start: int, stop: int) -> bytes:
    """A Feature's canonical bytes: the list that the oneof ends with (protobuf merges a list
    repeated on the wire and lets a later member replace an earlier one); numeric lists packed,
    int64 varints minimal.  A Feature with no list set gives ``b""``."""
    kind = 0
    items: list[bytes] = []  # bytes values, or 4-byte floats
    ints: list[int] = []
    for number, wire, s, e in _fields(buf, start, stop):
        if number not in (1, 2, 3) or wire != 2:
            raise NotAnExample("unknown Feature field")
        if number != kind:
            kind, items, ints = number, [], []
        for n, w, vs, ve in _fields(buf, s, e):
            if n != 1:
                raise NotAnExample("unknown list field")
            if number == 1:
                if w != 2:
                    raise NotAnExample("bytes value not length-delimited")
                items.append(buf[vs:ve])
            elif number == 2:
                if w == 5:
                    items.append(buf[vs:ve])
                elif w == 2 and (ve - vs) % 4 == 0:
                    items.extend(buf[i : i + 4] for i in range(vs, ve, 4))
                else:
                    raise NotAnExample("bad float list")
            elif w == 0:
                ints.append(_varint(buf, vs, ve)[0])
            elif w == 2:
                pos = vs
                while pos < ve:
                    value, pos = _varint(buf, pos, ve)
                    ints.append(value)
            else:
                raise NotAnExample("bad int64 list")
    if kind == 0:
        return b""
    if kind == 1:
        body = b"".join(_ld(1, v) for v in items)
    elif kind == 2:
        body = _ld(1, b"".join(items)) if items else b""
    else:
        body = _ld(1, b"".join(_enc_varint(v) for v in ints)) if ints else b""
    return _ld(kind, body)


def _map(
    buf: bytes, start: int, stop: int, value: Callable[[bytes, int, int], bytes | None]
) -> dict[bytes, bytes]:
    """A ``{1: map<string, V>}`` message as key → canonical value bytes (the last entry of a
    repeated key wins; a value that canonicalises to None is left out)."""
    entries: dict[bytes, bytes | None] = {}
    for number, wire, s, e in _fields(buf, start, stop):
        if number != 1 or wire != 2:
            raise NotAnExample("unknown map field")
        key = b""
        val: bytes | None = value(buf, 0, 0)
        for n, w, vs, ve in _fields(buf, s, e):
            if w != 2 or n not in (1, 2):
                raise NotAnExample("bad map entry")
            if n == 1:
                key = buf[vs:ve]
            else:
                val = value(buf, vs, ve)
        try:
            key.decode("utf-8")
        except UnicodeDecodeError:
            raise NotAnExample("feature name not UTF-8") from None
        entries[key] = val
    return {k: v for k, v in entries.items() if v is not None}


def _example_feature(buf: bytes, start: int, stop: int) -> bytes | None:
    body = _feature(buf, start, stop)
    return body or None  # a Feature with no list is absent (tf.io.parse_example agrees)


def _feature_list(buf: bytes, start: int, stop: int) -> bytes:
    steps: list[bytes] = []
    for number, wire, s, e in _fields(buf, start, stop):
        if number != 1 or wire != 2:
            raise NotAnExample("unknown FeatureList field")
        steps.append(_ld(1, _feature(buf, s, e)))
    return b"".join(steps)


def _encode_map(entries: dict[bytes, bytes]) -> bytes:
    return b"".join(_ld(1, _ld(1, k) + _ld(2, entries[k])) for k in sorted(entries))


def canonical_example(record: bytes) -> bytes:
    """The canonical serialization of an Example or SequenceExample record.

    The result is itself a valid record of the same message: features sorted by name (UTF-8
    byte order), each name once (the last entry on the wire wins, as protobuf's map parsing
    does), messages repeated on the wire merged, Features with no list left out, float and
    int64 lists packed, int64 varints minimal; float values keep their exact bits.  A
    SequenceExample keeps its ``feature_lists`` field (even when empty), so it never equals an
    Example.  Raises :class:`NotAnExample` for anything else (unknown fields, wrong wire types,
    truncated values, names that are not UTF-8).
    """
    buf = bytes(record)
    context: dict[bytes, bytes] = {}
    lists: dict[bytes, bytes] | None = None
    for number, wire, s, e in _fields(buf, 0, len(buf)):
        if wire != 2 or number not in (1, 2):
            raise NotAnExample("unknown Example field")
        if number == 1:
            context.update(_map(buf, s, e, _example_feature))
        else:
            lists = {} if lists is None else lists
            lists.update(_map(buf, s, e, _feature_list))
    out = _ld(1, _encode_map(context)) if context else b""
    if lists is not None:
        out += _ld(2, _encode_map(lists))
    return out

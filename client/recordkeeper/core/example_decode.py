"""Decode ``tf.train.Example`` / ``SequenceExample`` records for people to read (no TensorFlow).

``recordkeeper head`` shows a version's first records with it.  The decoding follows the
protobuf wire format of ``tensorflow/core/example/{example,feature}.proto``: an Example is
``features`` (field 1), a SequenceExample adds ``feature_lists`` (field 2).  Each feature
becomes a list of values: ``int64_list`` → ints, ``float_list`` → floats, ``bytes_list`` →
:class:`bytes`.  Records that are not Examples raise :class:`NotAnExample`; :func:`shown`
turns values into JSON-able text (bytes as UTF-8 when they are text, else a hex prefix).
"""

from __future__ import annotations

import math
import struct
from typing import Any

__all__ = ["DecodedRecord", "NotAnExample", "decode_example", "shown"]

#: name → values; for a SequenceExample also ``feature_lists``: name → one list per step.
DecodedRecord = dict[str, Any]


class NotAnExample(ValueError):
    """The bytes are not a serialized Example or SequenceExample."""


def _varint(buf: bytes, pos: int, stop: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= stop or shift > 63:
            raise NotAnExample("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes, start: int, stop: int) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) — value: int (varint), bytes-span (start, stop) for
    length-delimited, raw 4/8 bytes for fixed."""
    out: list[tuple[int, int, Any]] = []
    pos = start
    while pos < stop:
        key, pos = _varint(buf, pos, stop)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise NotAnExample("field number 0")
        if wire == 0:
            value, pos = _varint(buf, pos, stop)
            out.append((number, wire, value))
        elif wire == 2:
            length, pos = _varint(buf, pos, stop)
            if pos + length > stop:
                raise NotAnExample("length past the end")
            out.append((number, wire, (pos, pos + length)))
            pos += length
        elif wire == 5:
            if pos + 4 > stop:
                raise NotAnExample("truncated fixed32")
            out.append((number, wire, buf[pos : pos + 4]))
            pos += 4
        elif wire == 1:
            if pos + 8 > stop:
                raise NotAnExample("truncated fixed64")
            out.append((number, wire, buf[pos : pos + 8]))
            pos += 8
        else:
            raise NotAnExample(f"wire type {wire}")
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _feature(buf: bytes, start: int, stop: int) -> list[Any]:
    values: list[Any] = []
    for number, wire, span in _fields(buf, start, stop):
        if wire != 2 or number not in (1, 2, 3):
            raise NotAnExample("not a Feature")
        for inner, inner_wire, value in _fields(buf, *span):
            if inner != 1:
                raise NotAnExample("not a value list")
            if number == 1:  # bytes_list
                if inner_wire != 2:
                    raise NotAnExample("bytes value is not length-delimited")
                values.append(bytes(buf[value[0] : value[1]]))
            elif number == 2:  # float_list: packed, or one fixed32 per value
                if inner_wire == 2:
                    data = buf[value[0] : value[1]]
                    if len(data) % 4:
                        raise NotAnExample("packed floats of a length not a multiple of 4")
                    values.extend(struct.unpack(f"<{len(data) // 4}f", data))
                elif inner_wire == 5:
                    values.append(struct.unpack("<f", value)[0])
                else:
                    raise NotAnExample("float value of another wire type")
            else:  # int64_list: packed varints, or one varint per value
                if inner_wire == 2:
                    pos, end = value
                    while pos < end:
                        item, pos = _varint(buf, pos, end)
                        values.append(_signed(item))
                elif inner_wire == 0:
                    values.append(_signed(value))
                else:
                    raise NotAnExample("int64 value of another wire type")
    return values


def _map(buf: bytes, start: int, stop: int, decode: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, wire, span in _fields(buf, start, stop):
        if number != 1 or wire != 2:
            raise NotAnExample("not a feature map")
        key = b""
        value: Any = None
        for inner, inner_wire, inner_span in _fields(buf, *span):
            if inner_wire != 2 or inner not in (1, 2):
                raise NotAnExample("not a map entry")
            if inner == 1:
                key = bytes(buf[inner_span[0] : inner_span[1]])
            else:
                value = decode(buf, *inner_span)
        try:
            name = key.decode("utf-8")
        except UnicodeDecodeError:
            raise NotAnExample("a feature name is not UTF-8") from None
        out[name] = value if value is not None else []
    return out


def _feature_list(buf: bytes, start: int, stop: int) -> list[list[Any]]:
    steps = []
    for number, wire, span in _fields(buf, start, stop):
        if number != 1 or wire != 2:
            raise NotAnExample("not a FeatureList")
        steps.append(_feature(buf, *span))
    return steps


def decode_example(record: bytes) -> DecodedRecord:
    """An Example's features (name → values, by name); a SequenceExample's context features
    with its ``feature_lists`` under that key.  Raises :class:`NotAnExample`."""
    features: dict[str, Any] = {}
    lists: dict[str, Any] | None = None
    for number, wire, span in _fields(record, 0, len(record)):
        if wire != 2 or number not in (1, 2):
            raise NotAnExample("not an Example or SequenceExample")
        if number == 1:
            features.update(_map(record, span[0], span[1], _feature))
        else:
            lists = {**(lists or {}), **_map(record, span[0], span[1], _feature_list)}
    decoded = dict(sorted(features.items()))
    if lists is not None:
        decoded["feature_lists"] = dict(sorted(lists.items()))
    return decoded


def _float32(value: float) -> float:
    """The shortest decimal that is the same float32 as ``value`` (a ``float_list`` value):
    ``0.1`` rather than ``0.10000000149011612``, its float64 widening."""
    if not math.isfinite(value):
        return value
    stored = struct.pack("<f", value)
    for digits in range(1, 10):  # 9 significant digits always round-trip a float32
        short = float(f"{value:.{digits}g}")
        try:
            if struct.pack("<f", short) == stored:
                return short
        except OverflowError:  # rounded up past the largest float32
            continue
    return value


def _value(value: Any, width: int) -> Any:
    if isinstance(value, float):
        return _float32(value)
    if isinstance(value, bytes):
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and text.isprintable():
            return text if len(text) <= width else f"{text[:width]}… ({len(value)} bytes)"
        more = "…" if len(value) > width // 2 else ""
        return f"<{len(value)} bytes: {value[: width // 2].hex()}{more}>"
    if isinstance(value, list):
        return [_value(v, width) for v in value]
    if isinstance(value, dict):
        return {k: _value(v, width) for k, v in value.items()}
    return value


def shown(decoded: DecodedRecord, *, width: int = 64) -> dict[str, Any]:
    """``decoded`` with bytes made readable: UTF-8 text (cut at ``width`` characters), or
    ``<N bytes: 89504e47…>`` for binary values (images, tensors); floats (float32 on the wire)
    as their shortest decimal, ``0.1`` not ``0.10000000149011612``."""
    return {k: _value(v, width) for k, v in decoded.items()}

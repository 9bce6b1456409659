"""Canonical JSON bytes, the form every content digest hashes.

UTF-8, keys sorted, no whitespace, non-ASCII written as is: byte for byte what
``orjson.dumps(value, option=orjson.OPT_SORT_KEYS)`` gives for the values digests cover
(strings, integers, lists, objects), so digests computed before the core existed still match.
"""

from __future__ import annotations

import json

__all__ = ["canonical_json"]

_ENCODER = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
)


def canonical_json(value: object) -> bytes:
    """``value`` as canonical JSON bytes (see the module docstring)."""
    return _ENCODER.encode(value).encode("utf-8")

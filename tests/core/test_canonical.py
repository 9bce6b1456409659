"""Canonical JSON: byte-identical to what digests were computed with before the core existed."""

from __future__ import annotations

import orjson
import pytest

from recordkeeper.core.canonical import canonical_json

VALUES = [
    {"format": "rk-manifest-1", "splits": {"train": [["ab" * 32, 3]], "b": []}},
    {"k" + chr(cp): [chr(cp), cp, -cp] for cp in range(0, 0x800)},
    {"é": "\u2028\u2029\ufeff\U0010ffff", "z": [True, False, None, 2**63 - 1, -(2**63)]},
    {"nested": {"b": {"d": 1, "c": 2}, "a": []}},
]


@pytest.mark.parametrize("value", VALUES)
def test_same_bytes_as_orjson_sorted(value: object) -> None:
    assert canonical_json(value) == orjson.dumps(value, option=orjson.OPT_SORT_KEYS)

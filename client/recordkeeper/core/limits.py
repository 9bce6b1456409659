"""Text and number limits that client and service must agree on.

Integers the service stores are 64-bit signed (PostgreSQL ``BIGINT``, orjson's range), so every
count, size, step and id is bounded by :data:`MAX_INT64`; a number written in decimal (a version
number in a reference) is bounded by its length *before* it is converted
(:func:`parse_decimal`), so no input reaches Python's int-string limit.

Text is Unicode scalar values other than NUL: JSON's ``"\\ud800"`` escape decodes to a lone
surrogate, which no UTF-8 encoder (the database, orjson, the JSON renderer) accepts, and
``"\\u0000"`` to NUL, which PostgreSQL's text and JSON types cannot hold (SQLite would store it).
:func:`invalid_text_at` finds either anywhere in a decoded JSON value; the service refuses such a
body as a whole (``422 invalid_request``) before any field is looked at.

Numbers in a body are what both databases store alike: integers 64-bit signed, floats finite.
Python's JSON decoder also yields ``NaN``/``Infinity`` (not JSON) and turns ``1e400`` into an
infinity, which SQLite would store as null and PostgreSQL refuses; :func:`invalid_number_at`
finds such a number, or an integer beyond 64 bits, anywhere in a decoded JSON value.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAX_CHECKPOINT_NAME_LENGTH",
    "MAX_DATASET_NAME_LENGTH",
    "MAX_DECIMAL_DIGITS",
    "MAX_DESCRIPTION_LENGTH",
    "MAX_DESC_LENGTH",
    "MAX_INT64",
    "MAX_JSON_OBJECT_BYTES",
    "MAX_MODEL_NAME_LENGTH",
    "MAX_REASON_LENGTH",
    "MAX_REFERENCE_LENGTH",
    "MAX_RUN_NAME_LENGTH",
    "MAX_SAVED_MODEL_NAME_LENGTH",
    "MAX_SHARDS_PER_REQUEST",
    "MAX_SHARD_COUNT",
    "MAX_URI_LENGTH",
    "MIN_INT64",
    "invalid_number_at",
    "invalid_text_at",
    "is_scalar_text",
    "is_valid_text",
    "parse_decimal",
]

#: Bounds of a 64-bit signed integer (sizes, record counts, steps, ids).
MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
#: Dataset names (``coco``) and version descriptions (``add_person``).
MAX_DATASET_NAME_LENGTH = 64
MAX_DESC_LENGTH = 80
#: Model (``coco_detection``) and checkpoint (``ckpt-1234``) names.
MAX_MODEL_NAME_LENGTH = 128
MAX_CHECKPOINT_NAME_LENGTH = 128
MAX_RUN_NAME_LENGTH = 128
#: A dataset's free-text description, and the reason given when deprecating a version.
MAX_DESCRIPTION_LENGTH = 4000
MAX_REASON_LENGTH = 2000
#: Storage URIs, in UTF-8 bytes.
MAX_URI_LENGTH = 2048
#: Shards in one registration request; clients send more in several requests.
MAX_SHARDS_PER_REQUEST = 10_000
#: Upper bound of a split's shard count (``count``), far above any real dataset.
MAX_SHARD_COUNT = 10_000_000
#: Free-form JSON objects (version ``metadata``, checkpoint ``metrics``), as compact UTF-8 JSON.
#: Every listing answers them, so they stay small: data belongs in shards, not metadata.
MAX_JSON_OBJECT_BYTES = 64 * 1024

#: A version reference (``coco_20231015_v3_add_person``, ``coco@sha256:…``): dataset name, date,
#: number, desc and separators fit well within it.
MAX_REFERENCE_LENGTH = 256
#: A saved model's name inside a checkpoint registration.
MAX_SAVED_MODEL_NAME_LENGTH = 128
#: Decimal digits accepted for a number before it is converted: 19 digits hold every 64-bit value.
MAX_DECIMAL_DIGITS = len(str(MAX_INT64))

_ASCII_DIGITS = re.compile(r"[0-9]+")


def parse_decimal(digits: str, *, maximum: int = MAX_INT64) -> int | None:
    """``int(digits)`` for ASCII decimal digits within ``0..maximum``; None otherwise.

    The length is checked before the conversion (a 5,000-digit string never reaches ``int``),
    and only ASCII ``0-9`` count as digits (``int("\\u0661")`` would accept an Arabic-Indic one).
    """
    if not isinstance(digits, str) or len(digits) > MAX_DECIMAL_DIGITS:
        return None
    if not _ASCII_DIGITS.fullmatch(digits):
        return None
    value = int(digits)
    return value if value <= maximum else None


def is_scalar_text(text: str) -> bool:
    """True if ``text`` holds Unicode scalar values only (no lone surrogate U+D800-U+DFFF)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_valid_text(text: str) -> bool:
    """True if ``text`` is text every backend stores alike: Unicode scalar values, no NUL."""
    return "\x00" not in text and is_scalar_text(text)


def invalid_text_at(value: object, path: str = "") -> str | None:
    """The path (``saved_models[0].uri``) of the first string or key in ``value`` (a decoded JSON
    value) that is not valid text (:func:`is_valid_text`: a lone surrogate, a NUL), or None when
    all of it is.

    ``path`` prefixes the answer; the root itself is reported as ``path`` (or ``"body"``).
    """
    try:  # the common case in one C pass: all of it encodes, and no NUL (escaped as \u0000)
        rendered = json.dumps(value, ensure_ascii=False, check_circular=False)
        rendered.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError):
        # The encoder recurses once per level: a body nested a few hundred levels deep (that
        # the JSON decoder still took) exhausts the stack here; the walk below has none.
        pass
    else:
        if "\\u0000" not in rendered:
            return None
    stack: list[tuple[str, object]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if not is_valid_text(item):
                return where or "body"
        elif isinstance(item, Mapping):
            children: list[tuple[str, object]] = []
            for key, child in item.items():
                name = key if isinstance(key, str) else str(key)
                if isinstance(key, str) and not is_valid_text(key):
                    return f"{where}.<key>" if where else "<key>"
                children.append((f"{where}.{name}" if where else name, child))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            stack.extend((f"{where}[{i}]", child) for i, child in reversed(list(enumerate(item))))
    return None


def _numbers_ok(value: Any) -> bool:
    # The common case, fast (decoded JSON: exact dict, list, str, int, float; 10,000 shards cost
    # ~10-20 ms): only containers go on the stack.
    stack = [value]
    while stack:
        container = stack.pop()
        items = container.values() if type(container) is dict else container
        for item in items:
            kind = type(item)
            if kind is str:
                continue
            if kind is int:
                if not MIN_INT64 <= item <= MAX_INT64:
                    return False
            elif kind is float:
                if not math.isfinite(item):
                    return False
            elif kind is dict or kind is list:
                stack.append(item)
            elif isinstance(item, Mapping):
                stack.append(dict(item))
            elif isinstance(item, list | tuple):
                stack.append(item)
            elif _number_problem(item):
                return False
    return True


def _number_problem(item: object) -> bool:
    if isinstance(item, bool):
        return False
    if isinstance(item, int):
        return not MIN_INT64 <= item <= MAX_INT64
    return isinstance(item, float) and not math.isfinite(item)


def invalid_number_at(value: object, path: str = "") -> str | None:
    """The path (``metadata.loss``) of the first number in ``value`` (a decoded JSON value) that
    both databases cannot store alike: a float that is not finite (``NaN``, ``Infinity``,
    ``1e400``) or an integer outside 64-bit signed; None when there is none.

    ``path`` prefixes the answer; the root itself is reported as ``path`` (or ``"body"``).
    """
    if _number_problem(value):
        return path or "body"
    if not isinstance(value, Mapping | list | tuple) or _numbers_ok(
        dict(value) if isinstance(value, Mapping) else value
    ):
        return None
    stack: list[tuple[str, object]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if _number_problem(item):
            return where or "body"
        if isinstance(item, Mapping):
            children = [
                (f"{where}.{key}" if where else str(key), child) for key, child in item.items()
            ]
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            stack.extend((f"{where}[{i}]", child) for i, child in reversed(list(enumerate(item))))
    return None

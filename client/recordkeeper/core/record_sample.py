"""A version's sample records: its first few records per split, decoded for people to read.

The service never reads shards, so the publisher records the sample: the client that writes or
publishes a version keeps the first :data:`SAMPLE_RECORDS` records of each split as they stream
by (no extra pass over the data) and sends them, decoded like ``recordkeeper head`` shows them
(:mod:`recordkeeper.core.example_decode`), with the version; ``recordkeeper head REF
--record-sample`` attaches one to a version committed without.  The UI's version page shows it.

The document (one rule for client and service)::

    {"splits": [{"split": "train", "records": [
        {"index": 0, "size": 120, "kind": "example", "features": {"label": [3], "text": ["a cat"]}},
        {"index": 1, "size": 9, "kind": "bytes", "features": "<9 bytes: 0a07…>"}]}]}

``features`` of an Example maps a feature name to its values (ints, floats, text); a
SequenceExample adds ``feature_lists`` (name → one list of values per step).  Text values are
cut at ``width`` characters, binary ones shown as a hex prefix; a float that is not finite is
the text ``"nan"``, ``"inf"`` or ``"-inf"`` (JSON has no such number).  Its compact JSON is at
most :data:`MAX_SAMPLE_BYTES`: :func:`build_sample` shortens values, then drops records, until
it fits; :func:`validate_sample` refuses anything else (:class:`InvalidSample`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from recordkeeper.core.errors import InvalidSample
from recordkeeper.core.example_decode import NotAnExample, decode_example, shown
from recordkeeper.core.limits import MAX_INT64, invalid_number_at, invalid_text_at
from recordkeeper.core.splits import is_split_name

__all__ = [
    "MAX_SAMPLE_BYTES",
    "MAX_SAMPLE_RECORDS",
    "MAX_SAMPLE_SPLITS",
    "MAX_SAMPLE_VALUES",
    "SAMPLE_RECORDS",
    "SAMPLE_WIDTH",
    "build_sample",
    "record_row",
    "sample_size",
    "validate_sample",
]

#: Records per split a publisher samples by default.
SAMPLE_RECORDS = 3
#: At most this many records per split in a sample document.
MAX_SAMPLE_RECORDS = 10
#: At most this many splits in a sample document.
MAX_SAMPLE_SPLITS = 64
#: Characters of a text value kept by default (``recordkeeper head --width``).
SAMPLE_WIDTH = 64
#: A sample document's compact JSON (UTF-8) is at most this many bytes.
MAX_SAMPLE_BYTES = 32 * 1024
#: Feature names and values kept per record at most (a record of 10,000 features is cut).
MAX_SAMPLE_FEATURES = 200
#: Values per feature kept in a sample (then ``"…"``), and shown by ``recordkeeper head``.
MAX_SAMPLE_VALUES = 50
_MAX_VALUES = MAX_SAMPLE_VALUES
_KINDS = ("example", "bytes")
_MIN_WIDTH = 8


def _finite(value: Any, cap: bool) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, list):
        values = [_finite(v, cap) for v in (value[:_MAX_VALUES] if cap else value)]
        return [*values, "…"] if cap and len(value) > _MAX_VALUES else values
    if isinstance(value, dict):
        items = list(value.items())
        return {k: _finite(v, cap) for k, v in (items[:MAX_SAMPLE_FEATURES] if cap else items)}
    return value


def record_row(
    index: int, record: bytes, *, width: int = SAMPLE_WIDTH, cap: bool = True
) -> dict[str, Any]:
    """One record as ``recordkeeper head`` shows it and a sample stores it: ``index``, ``size``
    (bytes), ``kind`` (``example``, else ``bytes``) and ``features`` (decoded, values made
    readable, non-finite floats as text; for other records a hex prefix).  ``cap``: at most
    200 features and 50 values per feature (then ``"…"``), as a sample keeps them."""
    try:
        features: Any = _finite(shown(decode_example(record), width=width), cap)
        kind = "example"
    except NotAnExample:
        features = shown({"bytes": record}, width=width)["bytes"]
        kind = "bytes"
    return {"index": index, "size": len(record), "kind": kind, "features": features}


def sample_size(document: Mapping[str, Any]) -> int:
    """Bytes of ``document`` as compact UTF-8 JSON (what :data:`MAX_SAMPLE_BYTES` bounds)."""
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return len(text.encode("utf-8"))


def build_sample(
    records: Mapping[str, Iterable[bytes]],
    *,
    per_split: int = SAMPLE_RECORDS,
    width: int = SAMPLE_WIDTH,
) -> dict[str, Any]:
    """The sample document of the first ``per_split`` records of each split (split → records in
    order), within :data:`MAX_SAMPLE_BYTES`: values are shortened (``width`` halved down to
    8 characters), then the last records dropped, until it fits."""
    per_split = max(0, min(per_split, MAX_SAMPLE_RECORDS))
    chosen: dict[str, list[bytes]] = {}
    for split in sorted(records)[:MAX_SAMPLE_SPLITS]:
        taken: list[bytes] = []
        for record in records[split]:
            if len(taken) >= per_split:
                break
            taken.append(bytes(record))
        chosen[split] = taken

    def document(w: int, keep: int) -> dict[str, Any]:
        return {
            "splits": [
                {
                    "split": s,
                    "records": [record_row(i, r, width=w) for i, r in enumerate(rs[:keep])],
                }
                for s, rs in chosen.items()
            ]
        }

    keep = per_split
    while True:
        w = width
        while True:
            doc = document(w, keep)
            if sample_size(doc) <= MAX_SAMPLE_BYTES:
                return doc
            if w <= _MIN_WIDTH:
                break
            w = max(_MIN_WIDTH, w // 2)
        if keep == 0:
            return {"splits": [{"split": s, "records": []} for s in chosen]}
        keep -= 1


def _scalar(value: Any) -> bool:
    return (isinstance(value, int | float | str)) and not isinstance(value, bool)


def _check_values(values: Any, where: str) -> None:
    if not isinstance(values, list) or not all(_scalar(v) for v in values):
        raise InvalidSample(f"{where}: a feature's values must be a list of numbers and text")


def _check_record(row: Any, where: str) -> None:
    if not isinstance(row, Mapping) or set(row) != {"index", "size", "kind", "features"}:
        raise InvalidSample(f"{where}: a record has exactly index, size, kind and features")
    for field in ("index", "size"):
        value = row[field]
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_INT64:
            raise InvalidSample(f"{where}.{field}: must be an integer from 0")
    kind, features = row["kind"], row["features"]
    if kind not in _KINDS:
        raise InvalidSample(f"{where}.kind: must be one of {', '.join(_KINDS)}")
    if kind == "bytes":
        if not isinstance(features, str):
            raise InvalidSample(f"{where}.features: a bytes record's features are one text")
        return
    if not isinstance(features, Mapping) or len(features) > MAX_SAMPLE_FEATURES + 1:
        raise InvalidSample(f"{where}.features: an Example's features are an object of features")
    for name, values in features.items():
        if name == "feature_lists" and isinstance(values, Mapping):
            for list_name, steps in values.items():
                if not isinstance(steps, list):
                    raise InvalidSample(f"{where}.features.feature_lists.{list_name}: not steps")
                for step, step_values in enumerate(steps):
                    _check_values(
                        step_values, f"{where}.features.feature_lists.{list_name}[{step}]"
                    )
            continue
        _check_values(values, f"{where}.features.{name}")


def validate_sample(document: Any) -> dict[str, Any]:
    """``document`` checked as a sample document (see the module's description): its shape,
    split names, text (:func:`~recordkeeper.core.limits.invalid_text_at`), numbers and size.
    Raises :class:`InvalidSample` naming the first problem."""
    if not isinstance(document, Mapping) or set(document) != {"splits"}:
        raise InvalidSample("a sample is an object with one field, splits")
    where = invalid_text_at(document) or invalid_number_at(document)
    if where is not None:
        raise InvalidSample(f"{where}: not text or a number every backend stores alike")
    splits = document["splits"]
    if not isinstance(splits, list) or len(splits) > MAX_SAMPLE_SPLITS:
        raise InvalidSample(f"splits: a list of at most {MAX_SAMPLE_SPLITS} splits")
    seen: set[str] = set()
    for i, entry in enumerate(splits):
        at = f"splits[{i}]"
        if not isinstance(entry, Mapping) or set(entry) != {"split", "records"}:
            raise InvalidSample(f"{at}: a split has exactly split and records")
        name = entry["split"]
        if not is_split_name(name):
            raise InvalidSample(f"{at}.split: {name!r} is not a split name")
        if name in seen:
            raise InvalidSample(f"{at}.split: {name!r} is sampled twice")
        seen.add(name)
        rows = entry["records"]
        if not isinstance(rows, list) or len(rows) > MAX_SAMPLE_RECORDS:
            raise InvalidSample(f"{at}.records: a list of at most {MAX_SAMPLE_RECORDS} records")
        for j, row in enumerate(rows):
            _check_record(row, f"{at}.records[{j}]")
    size = sample_size(document)
    if size > MAX_SAMPLE_BYTES:
        raise InvalidSample(
            f"the sample is {size} bytes as compact JSON; at most {MAX_SAMPLE_BYTES} are allowed"
        )
    return {"splits": [dict(s) for s in splits]}

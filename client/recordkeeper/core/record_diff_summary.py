"""The stored summary of a record diff: what the registry keeps of ``recordkeeper diff A B
--records`` so the UI's compare page can show it (the service never reads storage).

The client computes the diff from the versions' record indexes
(:func:`recordkeeper.core.record_diff.diff_records`) and sends this summary; the service checks it
with :func:`validate_record_diff` (one rule for both sides) and against what it knows of the
two versions.  The document::

    {"kind": "bytes", "width": 16, "new": 1, "gone": 1,
     "splits": [{"split": "train", "records_a": 360000, "records_b": 360000,
                 "added": 1, "removed": 1, "common": 359999, "moved_in": 0, "moved_out": 0,
                 "duplicates_a": 0, "duplicates_b": 0,
                 "sample_added": ["4f1c…"], "sample_removed": ["9b7e…"]}]}

Per split (multiset counts, copies counted, as in the diff): ``records_a``/``records_b`` in each
version, ``added``, ``removed``, ``common``, ``duplicates_a``/``duplicates_b`` (extra copies
within the split); ``moved_in``/``moved_out``: distinct identities added to this split that
another split of A held and lost / removed from it and added to another split of B (an identity
counted once per other split, so at most ``added`` / ``removed`` times the other splits); samples:
at most :data:`MAX_DIFF_SAMPLE` identities each, as ``2 * width`` lowercase hex digits.
Whole document: ``new``/``gone`` (distinct identities in one version and no split of the
other).  Anything that does not add up is :class:`InvalidRecordDiff`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from recordkeeper.core.errors import InvalidInput, InvalidRecordDiff
from recordkeeper.core.limits import MAX_INT64
from recordkeeper.core.record_diff import RecordDiff
from recordkeeper.core.record_identity import validate_identity
from recordkeeper.core.splits import is_split_name

__all__ = [
    "COUNT_FIELDS",
    "MAX_DIFF_SAMPLE",
    "MAX_DIFF_SPLITS",
    "diff_summary",
    "validate_record_diff",
]

#: Identities kept per sample list (added, removed) and split.
MAX_DIFF_SAMPLE: Final = 10
#: Splits in one stored diff (the union of both versions' splits).
MAX_DIFF_SPLITS: Final = 256

#: The counts of one split, in the order the document lists them.
COUNT_FIELDS: Final = (
    "records_a",
    "records_b",
    "added",
    "removed",
    "common",
    "moved_in",
    "moved_out",
    "duplicates_a",
    "duplicates_b",
)
_SAMPLE_FIELDS: Final = ("sample_added", "sample_removed")
_SPLIT_FIELDS: Final = frozenset(("split", *COUNT_FIELDS, *_SAMPLE_FIELDS))
_TOP_FIELDS: Final = frozenset(("kind", "width", "new", "gone", "splits"))
_HEX = re.compile(r"[0-9a-f]+")


def diff_summary(diff: RecordDiff, kind: str, width: int) -> dict[str, Any]:
    """The summary of ``diff`` (computed with identities of ``kind``/``width``) to store: built
    field by field from the diff, samples cut to :data:`MAX_DIFF_SAMPLE`."""
    moved_in: dict[str, int] = {}
    moved_out: dict[str, int] = {}
    for (src, dst), n in diff.moved.items():
        moved_out[src] = moved_out.get(src, 0) + n
        moved_in[dst] = moved_in.get(dst, 0) + n
    splits = []
    for name in sorted(diff.splits):
        d = diff.splits[name]
        splits.append(
            {
                "split": name,
                "records_a": d.records_a,
                "records_b": d.records_b,
                "added": d.added,
                "removed": d.removed,
                "common": d.common,
                "moved_in": moved_in.get(name, 0),
                "moved_out": moved_out.get(name, 0),
                "duplicates_a": d.duplicates_a,
                "duplicates_b": d.duplicates_b,
                "sample_added": list(d.sample_added[:MAX_DIFF_SAMPLE]),
                "sample_removed": list(d.sample_removed[:MAX_DIFF_SAMPLE]),
            }
        )
    return {"kind": kind, "width": width, "new": diff.new, "gone": diff.gone, "splits": splits}


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT64:
        raise InvalidRecordDiff(f"{where} must be an integer from 0 to 2**63-1: {value!r}")
    return value


def _sample(value: object, width: int, limit: int, where: str) -> list[str]:
    if not isinstance(value, list) or len(value) > min(limit, MAX_DIFF_SAMPLE):
        raise InvalidRecordDiff(
            f"{where} must be a list of at most {min(limit, MAX_DIFF_SAMPLE)} identities"
        )
    for item in value:
        if not isinstance(item, str) or len(item) != 2 * width or not _HEX.fullmatch(item):
            raise InvalidRecordDiff(
                f"{where} holds {str(item)[:80]!r}: an identity is {2 * width} lowercase hex "
                f"digits ({width} bytes)"
            )
    if len(set(value)) != len(value):
        raise InvalidRecordDiff(f"{where} names an identity twice")
    return list(value)


def _split(entry: object, width: int, at: int) -> dict[str, Any]:
    if not isinstance(entry, Mapping) or set(entry) != _SPLIT_FIELDS:
        raise InvalidRecordDiff(
            f"splits[{at}] must be an object with exactly {', '.join(sorted(_SPLIT_FIELDS))}"
        )
    name = entry["split"]
    if not is_split_name(name):
        raise InvalidRecordDiff(f"splits[{at}].split is not a split name: {str(name)[:80]!r}")
    c = {f: _count(entry[f], f"{name}.{f}") for f in COUNT_FIELDS}
    if c["records_a"] != c["common"] + c["removed"] or c["records_b"] != c["common"] + c["added"]:
        raise InvalidRecordDiff(
            f"{name}: records_a must be common + removed and records_b common + added "
            f"({c['records_a']} vs {c['common']} + {c['removed']}, "
            f"{c['records_b']} vs {c['common']} + {c['added']})"
        )
    for side in ("a", "b"):
        if c[f"duplicates_{side}"] > max(0, c[f"records_{side}"] - 1):
            raise InvalidRecordDiff(f"{name}: more duplicates_{side} than extra copies can be")
    return {
        "split": name,
        **c,
        "sample_added": _sample(entry["sample_added"], width, c["added"], f"{name}.sample_added"),
        "sample_removed": _sample(
            entry["sample_removed"], width, c["removed"], f"{name}.sample_removed"
        ),
    }


def validate_record_diff(document: object) -> dict[str, Any]:
    """``document`` checked (shape, counts that add up, hex identities of the document's
    width, bounded sizes) and returned with its splits in name order; :class:`InvalidRecordDiff`
    otherwise."""
    if not isinstance(document, Mapping) or set(document) != _TOP_FIELDS:
        raise InvalidRecordDiff(f"a record diff has exactly {', '.join(sorted(_TOP_FIELDS))}")
    try:
        kind, width = validate_identity(document["kind"], document["width"])
    except InvalidInput as exc:
        raise InvalidRecordDiff(str(exc)) from None
    entries = document["splits"]
    if not isinstance(entries, list) or len(entries) > MAX_DIFF_SPLITS:
        given = f" (this one has {len(entries)})" if isinstance(entries, list) else ""
        raise InvalidRecordDiff(
            f"splits must be a list of at most {MAX_DIFF_SPLITS} splits{given}: a record diff "
            f"of versions with more splits between them is not stored"
        )
    splits = [_split(e, width, i) for i, e in enumerate(entries)]
    names = [s["split"] for s in splits]
    if len(set(names)) != len(names):
        raise InvalidRecordDiff("a split is named twice")
    new, gone = _count(document["new"], "new"), _count(document["gone"], "gone")
    if sum(s["moved_in"] for s in splits) != sum(s["moved_out"] for s in splits):
        raise InvalidRecordDiff("the moves into splits do not add up to the moves out of them")
    others = len(splits) - 1  # a record moves from or to each of the other splits at most
    for s in splits:
        for moved, changed in (("moved_in", "added"), ("moved_out", "removed")):
            if s[moved] > s[changed] * others:
                raise InvalidRecordDiff(
                    f"{s['split']}: {moved} is {s[moved]}, but {s[changed]} records were "
                    f"{changed} there ({others} other split(s) to move from or to)"
                )
    if new > sum(s["added"] for s in splits) or gone > sum(s["removed"] for s in splits):
        raise InvalidRecordDiff("new must be at most the records added, gone the records removed")
    splits.sort(key=lambda s: s["split"])
    return {"kind": kind, "width": width, "new": new, "gone": gone, "splits": splits}

"""Record-level diff and leakage over sorted record indexes (streaming, memory bounded).

Both work on the batches of :func:`recordkeeper.core.record_index.merge_sorted`: every copy of an
identity arrives in one batch, so counts are exact while memory stays bounded by the number of
index streams times their chunk size, whatever the number of records.

Diff (:func:`diff_records`), per split, multiset semantics: ``common`` = Σ min(a, b) over
identities, ``removed`` = Σ (a - min), ``added`` = Σ (b - min), where ``a`` and ``b`` count an
identity's copies in the split of version A and B; ``duplicates_a``/``duplicates_b`` count the
extra copies (a record held 3 times in a split counts 2).  ``moved`` counts distinct identities
removed from split X and added to split Y (X ≠ Y).  ``new`` and ``gone`` count distinct
identities in one version and in no split of the other.

Leakage (:func:`leakage`): for each pair (evaluation split E, other split S), the records of E
whose identity occurs in S (``leaked``, copies counted), the distinct identities shared
(``distinct``), and ``rate`` = leaked / records of E.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from recordkeeper.core.errors import InvalidInput
from recordkeeper.core.record_index import merge_sorted

__all__ = [
    "DEFAULT_SAMPLE",
    "MAX_SAMPLE",
    "LeakPair",
    "RecordDiff",
    "SplitRecordDiff",
    "diff_records",
    "is_training_split",
    "leakage",
    "validate_sample",
]

DEFAULT_SAMPLE: Final = 5
#: The most identities sampled per split and direction (or per leakage pair): each is read back
#: and decoded; every change is what ``emit`` (``--jsonl``) is for.
MAX_SAMPLE: Final = 10_000

#: ``emit(category, split, identity)``: the full lists, streamed (category: ``added``,
#: ``removed``, ``duplicate_a``, ``duplicate_b``; split as ``"X->Y"`` for ``moved``).
Emit = Callable[[str, str, bytes], None]

Chunks = Iterator[bytes]


def validate_sample(sample: object) -> int:
    """``sample`` (identities kept per split and direction, or per leakage pair) checked: an
    integer from 0 to :data:`MAX_SAMPLE`; :class:`InvalidInput` otherwise."""
    if isinstance(sample, bool) or not isinstance(sample, int) or not 0 <= sample <= MAX_SAMPLE:
        raise InvalidInput(
            f"sample must be an integer from 0 to {MAX_SAMPLE} (identities kept per split and "
            f"direction; emit= or --jsonl lists every change): {sample!r}"
        )
    return sample


def is_training_split(name: str) -> bool:
    """The default rule: a split named ``train`` or ``train…`` (``train_extra``) trains."""
    return name == "train" or name.startswith("train")


#: ``record_diff_stream(sources, nsplits, width, sample)``: the whole diff merged and counted
#: in C, see ``client/recordkeeper/_speedups.c`` (sources: ``(side * nsplits + split, chunks)``).
NativeDiff = Callable[
    [list[tuple[int, Chunks]], int, int, int],
    tuple[list[list[int]], list[int], int, int, list[list[bytes]], list[list[bytes]]],
]


def _diff_native(
    sources: list[tuple[tuple[int, str], Chunks]],
    names: list[str],
    width: int,
    sample: int,
    native: NativeDiff,
    result: RecordDiff,
) -> RecordDiff:
    """:func:`diff_records` merged and counted by ``native``: the same k-way merge over the
    streams' chunks (one chunk per stream in memory), every distinct identity visited once."""
    if not names:
        return result
    number = {n: i for i, n in enumerate(names)}
    k = len(names)
    tagged = [(side * k + number[split], chunks) for (side, split), chunks in sources]
    stats, moved, new, gone, added, removed = native(tagged, k, width, sample)
    for i, name in enumerate(names):
        d = result.splits[name]
        (d.records_a, d.records_b, d.added, d.removed, d.common, d.duplicates_a,
         d.duplicates_b) = stats[i]  # fmt: skip
        _take(d.sample_added, added[i], sample)
        _take(d.sample_removed, removed[i], sample)
    for i, n in enumerate(moved):
        if n:
            result.moved[(names[i // k], names[i % k])] = n
    result.new, result.gone = new, gone
    return result


def _take(sample: list[str], items: Iterable[bytes], limit: int) -> None:
    for h in items:
        if len(sample) >= limit:
            return
        sample.append(h.hex())


@dataclass
class SplitRecordDiff:
    """One split of a record diff (see the module docstring)."""

    split: str
    records_a: int = 0
    records_b: int = 0
    added: int = 0
    removed: int = 0
    common: int = 0
    duplicates_a: int = 0
    duplicates_b: int = 0
    sample_added: list[str] = field(default_factory=list)
    sample_removed: list[str] = field(default_factory=list)
    #: The sampled records decoded, in sample order (filled by the client when it reads them:
    #: ``{"record": hex, "shard", "position", "size", "kind", "features"}`` or
    #: ``{"record": hex, "error": why}``); empty when not decoded.
    decoded_added: list[dict[str, Any]] = field(default_factory=list)
    decoded_removed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "records_a": self.records_a,
            "records_b": self.records_b,
            "added": self.added,
            "removed": self.removed,
            "common": self.common,
            "duplicates_a": self.duplicates_a,
            "duplicates_b": self.duplicates_b,
            "sample_added": list(self.sample_added),
            "sample_removed": list(self.sample_removed),
            "decoded_added": list(self.decoded_added),
            "decoded_removed": list(self.decoded_removed),
        }


@dataclass
class RecordDiff:
    """The record diff of two versions: per split, moves between splits, new and gone."""

    splits: dict[str, SplitRecordDiff]
    moved: dict[tuple[str, str], int]
    new: int = 0
    gone: int = 0

    @property
    def identical(self) -> bool:
        return not any(s.changed for s in self.splits.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "identical": self.identical,
            "splits": [self.splits[k].to_dict() for k in sorted(self.splits)],
            "moved": [
                {"from": a, "to": b, "records": n} for (a, b), n in sorted(self.moved.items())
            ],
            "new": self.new,
            "gone": self.gone,
        }


def diff_records(
    a: Iterable[tuple[str, Chunks]],
    b: Iterable[tuple[str, Chunks]],
    width: int,
    *,
    sample: int = DEFAULT_SAMPLE,
    emit: Emit | None = None,
    native: NativeDiff | None = None,
) -> RecordDiff:
    """Diff version A against version B from their index streams ``(split, chunks)`` (one
    stream per shard; several streams may share a split).

    ``native`` is a compiled merge with the contract of
    ``recordkeeper._speedups.record_diff_stream`` (the client passes it when built): the same
    answer, merged and counted in C; without ``emit`` only (the full lists are streamed by the
    Python code).
    """
    sample = validate_sample(sample)
    sources: list[tuple[tuple[int, str], Chunks]] = [((0, s), c) for s, c in a]
    sources += [((1, s), c) for s, c in b]
    names = sorted({tag[1] for tag, _ in sources})
    result = RecordDiff({n: SplitRecordDiff(n) for n in names}, {})
    if emit is None and native is not None:
        return _diff_native(sources, names, width, sample, native, result)
    for batch in merge_sorted(sources, width, sort=False):
        removed_sets: dict[str, set[bytes]] = {}
        added_sets: dict[str, set[bytes]] = {}
        all_a: set[bytes] = set()
        all_b: set[bytes] = set()
        here = {tag[1] for tag in batch}
        for name in here:
            la = batch.get((0, name), [])
            lb = batch.get((1, name), [])
            d = result.splits[name]
            d.records_a += len(la)
            d.records_b += len(lb)
            if la == lb:  # the common case of a small change: one comparison in C
                sa = set(la)
                d.common += len(la)
                d.duplicates_a += len(la) - len(sa)
                d.duplicates_b += len(lb) - len(sa)
                if len(here) > 1:
                    all_a |= sa
                    all_b |= sa
                if emit is not None and len(sa) != len(la):
                    for h, n in sorted(Counter(la).items()):
                        for _ in range(n - 1):
                            emit("duplicate_a", name, h)
                            emit("duplicate_b", name, h)
                continue
            sa, sb = set(la), set(lb)
            if len(here) > 1:
                all_a |= sa
                all_b |= sb
            else:
                all_a, all_b = sa, sb
            if len(sa) == len(la) and len(sb) == len(lb):  # no copies: set arithmetic in C
                gone, came = sa - sb, sb - sa
                d.removed += len(gone)
                d.added += len(came)
                d.common += len(la) - len(gone)
            else:
                ca, cb = Counter(la), Counter(lb)
                d.duplicates_a += len(la) - len(sa)
                d.duplicates_b += len(lb) - len(sb)
                gone, came = set(), set()
                for h in sa | sb:
                    x, y = ca.get(h, 0), cb.get(h, 0)
                    m = min(x, y)
                    d.common += m
                    if x > m:
                        d.removed += x - m
                        gone.add(h)
                    if y > m:
                        d.added += y - m
                        came.add(h)
                if emit is not None:
                    for h in sorted(ca):
                        for _ in range(ca[h] - 1):
                            emit("duplicate_a", name, h)
                    for h in sorted(cb):
                        for _ in range(cb[h] - 1):
                            emit("duplicate_b", name, h)
            if gone:
                removed_sets[name] = gone
                _take(d.sample_removed, sorted(gone), sample)
            if came:
                added_sets[name] = came
                _take(d.sample_added, sorted(came), sample)
            if emit is not None:
                for h in sorted(gone):
                    emit("removed", name, h)
                for h in sorted(came):
                    emit("added", name, h)
        for src, gone in removed_sets.items():
            for dst, came in added_sets.items():
                if src != dst:
                    both = gone & came
                    if both:
                        result.moved[(src, dst)] = result.moved.get((src, dst), 0) + len(both)
                        if emit is not None:
                            for h in sorted(both):
                                emit("moved", f"{src}->{dst}", h)
        result.new += len(all_b - all_a)
        result.gone += len(all_a - all_b)
    return result


@dataclass
class LeakPair:
    """Records of evaluation split ``split`` (of ``ref``) found in ``other_split`` of
    ``other_ref``."""

    ref: str
    split: str
    other_ref: str
    other_split: str
    records: int = 0  # records of the evaluation split
    leaked: int = 0  # ... whose identity occurs in the other split (copies counted)
    distinct: int = 0  # distinct identities shared
    sample: list[str] = field(default_factory=list)
    #: The sampled records decoded from the evaluation split, in sample order (as
    #: :attr:`SplitRecordDiff.decoded_added`); empty when not decoded.
    decoded: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.leaked / self.records if self.records else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "split": self.split,
            "other_ref": self.other_ref,
            "other_split": self.other_split,
            "records": self.records,
            "leaked": self.leaked,
            "distinct": self.distinct,
            "rate": self.rate,
            "sample": list(self.sample),
            "decoded": list(self.decoded),
        }


Tag = tuple[str, str]  # (ref, split)


#: ``record_leakage_stream(sources, ntags, width, pairs, sample)``: the leakage counts merged
#: in C (``client/recordkeeper/_speedups.c``): sources ``(tag number, chunks)``, pairs
#: ``(eval tag number, other tag number)``; one ``(records, leaked, distinct, sample)`` per pair.
NativeLeakage = Callable[
    [list[tuple[int, Chunks]], int, int, list[tuple[int, int]], int],
    list[tuple[int, int, int, list[bytes]]],
]


def leakage(
    sources: Iterable[tuple[Tag, Chunks]],
    pairs: Iterable[tuple[Tag, Tag]],
    width: int,
    *,
    sample: int = DEFAULT_SAMPLE,
    native: NativeLeakage | None = None,
) -> list[LeakPair]:
    """For each ``(evaluation, other)`` pair of ``(ref, split)`` tags, how many records of the
    evaluation split occur in the other split, from the index streams of every split named.

    ``native``: a compiled merge with the contract of
    ``recordkeeper._speedups.record_leakage_stream`` (the client passes it when built): the
    same answer, merged and counted in C."""
    sample = validate_sample(sample)
    wanted = list(dict.fromkeys(pairs))
    out = {p: LeakPair(p[0][0], p[0][1], p[1][0], p[1][1]) for p in wanted}
    if native is not None:
        listed = list(sources)
        number: dict[Tag, int] = {}
        for tag, _ in listed:
            number.setdefault(tag, len(number))
        for e, o in wanted:
            number.setdefault(e, len(number))
            number.setdefault(o, len(number))
        if not number:
            return list(out.values())
        tagged = [(number[tag], chunks) for tag, chunks in listed]
        numbered = [(number[e], number[o]) for e, o in wanted]
        rows = native(tagged, len(number), width, numbered, sample)
        for result, (records, leaked, distinct, ids) in zip(out.values(), rows, strict=True):
            result.records, result.leaked, result.distinct = records, leaked, distinct
            _take(result.sample, ids, sample)
        return list(out.values())
    for batch in merge_sorted(sources, width, sort=False):
        sets: dict[Tag, set[bytes]] = {}
        for (e, o), result in out.items():
            le = batch.get(e)
            if not le:
                continue
            result.records += len(le)
            lo = batch.get(o)
            if not lo:
                continue
            se = sets.get(e) or sets.setdefault(e, set(le))
            so = sets.get(o) or sets.setdefault(o, set(lo))
            both = se & so
            if not both:
                continue
            result.distinct += len(both)
            result.leaked += len(both) if len(se) == len(le) else sum(h in so for h in le)
            _take(result.sample, sorted(both), sample)
    return list(out.values())

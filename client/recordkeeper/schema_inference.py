"""Infer a :class:`~recordkeeper.core.schema.Schema` from serialized ``tf.train.Example`` records.

The protobuf wire format is parsed directly (no TensorFlow, no ``protobuf``)::

    Example         = {1: Features}
    SequenceExample = {1: Features context, 2: FeatureLists}
    Features        = {1: map<string, Feature>}          map entry = {1: key, 2: value}
    FeatureLists    = {1: map<string, FeatureList>}      FeatureList = {1: repeated Feature}
    Feature         = oneof {1: BytesList, 2: FloatList, 3: Int64List}
    BytesList       = {1: repeated bytes}
    FloatList       = {1: repeated float}      (packed: one length-delimited run of fixed32)
    Int64List       = {1: repeated int64}      (packed: one length-delimited run of varints)

Numeric lists may be packed or unpacked (or both), as protobuf allows.  Rules:

- A record that carries field 2 makes the shard a ``sequence_example``; its field-1 features are
  then reported with scope ``context``.  (A SequenceExample without feature lists is
  indistinguishable from an Example on the wire.)
- A ``Feature`` with no list set is treated as **absent**: ``tf.io.parse_example`` does the same
  (a ``FixedLenFeature`` falls back to its default, a ``VarLenFeature`` sees no values).  An empty
  list (``float_list {}``) is present with 0 values.
- An empty ``FeatureList`` (0 steps) is present with 0 steps; its kind comes from other records
  (if no record gives it a kind, it is left out).  A step without a kind counts as 0 values.
- Anything else on the wire (unknown fields, wrong wire types, bad lengths, keys that are not
  UTF-8) makes the record, and so the whole schema, ``opaque``.  Map semantics are honoured:
  when a key repeats in one record the last entry wins.
- A feature seen with two kinds raises :class:`~recordkeeper.errors.SchemaConflict` from
  :meth:`SchemaInferencer.result`, as :func:`~recordkeeper.core.schema.merge_schemas` does
  across shards.

Speed: every record's structure is checked exactly, but records that share a *layout* with an
earlier one (same length, same bytes everywhere except the values, same varint boundaries in the
int64 values) are recognised by a few C-level operations, batched over many records, instead of
being parsed again.  Only the first record of each layout goes through the Python parser.
"""

from __future__ import annotations

import re
import struct
import threading
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import compress, repeat
from operator import and_, attrgetter, call, eq, itemgetter, not_
from typing import Any, cast

from recordkeeper import _native
from recordkeeper.core.errors import SchemaConflict
from recordkeeper.core.schema import (
    SCOPES,
    Feature,
    FeatureKind,
    RecordType,
    Schema,
    Scope,
    _max_opt,
    _min_opt,
)

__all__ = ["SchemaInferencer", "infer_schema"]

_KINDS = {0x0A: "bytes", 0x12: "float", 0x1A: "int64"}  # Feature oneof tag -> kind
_HIGH_BIT = bytes(0x80 if b & 0x80 else 0 for b in range(256))  # translate table: keep bit 7
_HIGH_BYTES = bytes(range(0x80, 0x100))
_LONG_VARINT = re.compile(rb"[\x80-\xff]{10}")
_MAX_REGIONS = 64  # records with more value regions than this are always parsed
_MAX_LAYOUT_RECORD = 1 << 16  # ... and so are records larger than this
_MAX_LAYOUT_BYTES = 1 << 24  # layouts remembered: at most this many bytes of example records
_MAX_LAYOUTS_PER_LENGTH = 64
_MAX_SIGNATURES = 10_000  # distinct per-record summaries kept before folding them into totals

# A per-record summary entry: (scope, key, kind, min_count, max_count, steps).
# scope 0 = features/context (steps is None), scope 1 = feature_lists.
_Entry = tuple[int, str, str | None, int | None, int | None, int | None]
# A per-record summary: (is_sequence_example, entries).
_Signature = tuple[bool, tuple[_Entry, ...]]
# Value regions of a record: (start, end, is_int64).
_Regions = list[tuple[int, int, bool]]


class _Malformed(Exception):
    """The record is not an Example / SequenceExample."""


class _KindClash(Exception):
    def __init__(self, key: str, kinds: set[str]) -> None:
        super().__init__(key)
        self.key = key
        self.kinds = kinds


# --------------------------------------------------------------------------- wire-format parser
#
# Every tag the grammar allows fits in one byte, so tags are compared as single bytes; anything
# else is malformed.  Running off the end of the buffer raises IndexError, which _parse turns
# into _Malformed; every length-delimited field is checked against its parent's end.


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode the varint at ``pos``: (value, position after it)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise _Malformed


def _span(buf: bytes, pos: int, stop: int) -> tuple[int, int]:
    """The (start, end) of the length-delimited payload whose length prefix is at ``pos``."""
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = _varint(buf, pos)
    end = pos + n
    if end > stop:
        raise _Malformed
    return pos, end


def _values(buf: bytes, pos: int, stop: int, kind: int, regions: _Regions) -> int:
    """Number of values in a BytesList / FloatList / Int64List body; records value regions.

    ``kind`` is the Feature tag: 0x0A bytes, 0x12 float, 0x1A int64.
    """
    count = 0
    while pos < stop:
        tag = buf[pos]
        if tag == 0x0A:  # a bytes value, or a packed float / int64 run
            start, end = _span(buf, pos + 1, stop)
            if kind == 0x0A:
                count += 1
            elif kind == 0x12:
                if (end - start) & 3:
                    raise _Malformed
                count += (end - start) >> 2
            else:
                payload = buf[start:end]
                if payload and (payload[-1] & 0x80 or _LONG_VARINT.search(payload)):
                    raise _Malformed
                count += len(payload.translate(None, _HIGH_BYTES))  # varint terminators
            if end > start:
                regions.append((start, end, kind == 0x1A))
            pos = end
        elif tag == 0x0D and kind == 0x12:  # unpacked fixed32
            end = pos + 5
            if end > stop:
                raise _Malformed
            regions.append((pos + 1, end, False))
            pos = end
            count += 1
        elif tag == 0x08 and kind == 0x1A:  # unpacked varint
            _, end = _varint(buf, pos + 1)
            if end > stop:
                raise _Malformed
            regions.append((pos + 1, end, True))
            pos = end
            count += 1
        else:
            raise _Malformed
    return count


def _feature(buf: bytes, pos: int, stop: int, regions: _Regions, state: list[Any]) -> None:
    """Parse a Feature message into ``state`` = [kind tag or 0, count], merging as protobuf
    does: a list of the same kind extends the count, another kind replaces it."""
    while pos < stop:
        tag = buf[pos]
        if tag != 0x0A and tag != 0x12 and tag != 0x1A:
            raise _Malformed
        start, pos = _span(buf, pos + 1, stop)
        n = _values(buf, start, pos, tag, regions)
        if tag == state[0]:
            state[1] += n
        else:
            state[0], state[1] = tag, n


def _map(
    buf: bytes, pos: int, stop: int, regions: _Regions, value: Callable[..., None], init: Any
) -> Iterator[tuple[str, Any]]:
    """Parse the map entries of a Features / FeatureLists body: yield (key, state) where
    ``state`` starts as a copy of ``init`` and is updated by ``value`` for each value field."""
    while pos < stop:
        if buf[pos] != 0x0A:
            raise _Malformed
        p, pos = _span(buf, pos + 1, stop)
        key = b""
        state = init.copy()
        while p < pos:
            tag = buf[p]
            start, p = _span(buf, p + 1, pos)
            if tag == 0x0A:
                key = buf[start:p]
            elif tag == 0x12:
                value(buf, start, p, regions, state)
            else:
                raise _Malformed
        try:
            name = key.decode()
        except UnicodeDecodeError:
            raise _Malformed from None
        yield name, state


def _feature_list(buf: bytes, pos: int, stop: int, regions: _Regions, steps: list[Any]) -> None:
    """Parse a FeatureList into ``steps``, a list of [kind tag or 0, count] per step."""
    while pos < stop:
        if buf[pos] != 0x0A:
            raise _Malformed
        start, pos = _span(buf, pos + 1, stop)
        step = [0, 0]
        _feature(buf, start, pos, regions, step)
        steps.append(step)


def _parse(record: bytes) -> tuple[_Signature, _Regions]:
    """Summarise one record; raises _Malformed if it is not an Example / SequenceExample."""
    regions: _Regions = []
    entries: dict[Any, _Entry] = {}
    sequence = False
    pos, stop = 0, len(record)
    try:
        while pos < stop:
            tag = record[pos]
            start, pos = _span(record, pos + 1, stop)
            if tag == 0x0A:
                for key, (kind, count) in _map(record, start, pos, regions, _feature, [0, 0]):
                    if kind:
                        entries[(0, key)] = (0, key, _KINDS[kind], count, count, None)
                    else:  # no list set: absent, as for tf.io.parse_example
                        entries.pop((0, key), None)
            elif tag == 0x12:
                sequence = True
                for key, steps in _map(record, start, pos, regions, _feature_list, []):
                    entries[(1, key)] = _steps_entry(key, steps)
            else:
                raise _Malformed
    except IndexError:
        raise _Malformed from None
    return (sequence, tuple(entries.values())), regions


def _steps_entry(key: str, steps: list[list[int]]) -> _Entry:
    kinds = {_KINDS[kind] for kind, _ in steps if kind}
    if len(kinds) > 1:
        raise _KindClash(key, kinds)
    counts = [count for _, count in steps]
    lo, hi = (min(counts), max(counts)) if counts else (None, None)
    return (1, key, kinds.pop() if kinds else None, lo, hi, len(steps))


# --------------------------------------------------------------------------- layouts
#
# A record's *layout* is everything the parser's result depends on: its length, its bytes outside
# value regions (tags, length prefixes, keys) and the high bits of its int64 value bytes (which
# fix where each varint ends).  Records with equal layouts have equal summaries, so a layout seen
# once is recognised again by C-level slicing and comparisons instead of a parse.
#
# Several layouts can share a length.  Per length, a few byte positions that are fixed in every
# known layout and tell them apart select the candidate layout by a dict lookup; the candidate's
# fixed bytes and int64 high bits are then compared in full.

_Spans = list[tuple[int, int]]


def _fields(spans: _Spans, code: str = "s") -> Any:
    """``Struct.unpack_from`` returning a record's bytes at ``spans`` as a tuple (C-level).

    ``code`` "s" gives each span as a bytes object, "B" each position (spans of 1) as an int.
    """
    parts = []
    pos = 0
    for start, end in spans:
        parts.append(f"{start - pos}x" if start > pos else "")
        parts.append(f"{end - start}{code}" if code == "s" else code)
        pos = end
    return struct.Struct("<" + "".join(parts)).unpack_from


def _ints_getter(runs: _Spans) -> Any:
    """A callable returning the bytes of a record's int64 value runs, concatenated."""
    if len(runs) <= 1:  # the common case: one itemgetter call returning bytes
        return itemgetter(slice(*runs[0]) if runs else slice(0, 0))
    unpack = _fields(runs)

    def joined(record: bytes) -> bytes:
        return b"".join(unpack(record))

    return joined


def _intersect(a: _Spans, b: _Spans) -> _Spans:
    out: _Spans = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


class _Layout:
    """One record layout: how to recognise it, and the summary of records that have it."""

    __slots__ = (
        "fixed",
        "fixed_expect",
        "fixed_get",
        "ints_expect",
        "ints_get",
        "signature",
        "skeleton",
    )

    def __init__(self, record: bytes, regions: _Regions, signature: _Signature) -> None:
        regions.sort()
        fixed: _Spans = []
        ints: _Spans = []  # runs of int64 values with only fixed bytes between them
        pos = 0
        run = False  # extending the last span of ints
        for start, end, is_int in regions:
            if start > pos:
                fixed.append((pos, start))
            if is_int and run:
                ints[-1] = (ints[-1][0], end)
            elif is_int:
                ints.append((start, end))
            run = is_int
            pos = end
        if pos < len(record):
            fixed.append((pos, len(record)))
        skeleton = bytearray(len(record))  # the fixed bytes in place, the values zeroed
        for start, end in fixed:
            skeleton[start:end] = record[start:end]
        self.skeleton = bytes(skeleton)
        self.fixed = fixed
        self.fixed_get = _fields(fixed)
        self.fixed_expect: bytes | None = b"".join(self.fixed_get(record))
        self.ints_get = _ints_getter(ints)
        self.ints_expect = self.ints_get(record).translate(_HIGH_BIT)
        self.signature = signature

    def matches(self, record: bytes) -> bool:
        return bool(
            b"".join(self.fixed_get(record)) == self.fixed_expect
            and self.ints_get(record).translate(_HIGH_BIT) == self.ints_expect
        )


def _first_difference(a: bytes, b: bytes, spans: _Spans) -> int | None:
    for lo, hi in spans:
        if a[lo:hi] != b[lo:hi]:
            return next(i for i in range(lo, hi) if a[i] != b[i])
    return None


class _LengthIndex:
    """The layouts of one record length, keyed by their bytes at a few telling positions."""

    __slots__ = ("common", "key_get", "layouts", "positions", "table")

    def __init__(self, layout: _Layout | None = None) -> None:
        self.layouts = [] if layout is None else [layout]
        self.common = [] if layout is None else layout.fixed  # positions fixed in every layout
        self.positions: list[int] = []
        # With no telling positions the key is the (shared) length: C-level, unlike a lambda.
        self.key_get: Any = len
        self.table: dict[Any, _Layout] = {} if layout is None else {len(layout.skeleton): layout}

    def match(self, record: bytes) -> _Layout | None:
        layout = self.table.get(self.key_get(record))
        return layout if layout is not None and layout.matches(record) else None

    def add(self, layout: _Layout) -> None:
        self.layouts.append(layout)
        self.common = _intersect(self.common, layout.fixed)
        positions = [i for i in self.positions if _inside(i, self.common)]
        if positions == self.positions:
            key = self.key_get(layout.skeleton)
            if key not in self.table:
                self.table[key] = layout
                return
        # Add telling positions until no two layouts share a key (building keys cheaply here).
        while (clash := _clash(self.layouts, positions)) is not None:
            older, newer = clash
            where = _first_difference(newer.skeleton, older.skeleton, self.common)
            if where is None:  # indistinguishable at positions fixed in all: keep the newer
                self.layouts.remove(older)
            else:
                positions = sorted([*positions, where])
        self.positions = positions
        self.key_get = _positions(positions)
        self.table = {self.key_get(known.skeleton): known for known in self.layouts}


def _clash(layouts: list[_Layout], positions: list[int]) -> tuple[_Layout, _Layout] | None:
    """Two layouts with the same bytes at ``positions``, if any (older first)."""
    key = itemgetter(*positions) if positions else len
    seen: dict[Any, _Layout] = {}
    for layout in layouts:
        other = seen.setdefault(key(layout.skeleton), layout)
        if other is not layout:
            return other, layout
    return None


def _positions(positions: list[int]) -> Any:
    """A callable returning a record's bytes (as ints) at ``positions``, hashable."""
    if not positions:
        return len  # C-level, unlike a lambda; records of one index share their length
    return _fields([(i, i + 1) for i in positions], "B")


def _inside(i: int, spans: _Spans) -> bool:
    k = bisect_right(spans, (i, _BIG)) - 1
    return k >= 0 and spans[k][0] <= i < spans[k][1]


_BIG = 1 << 62


class _LayoutStore:
    """Layouts learnt so far, shared by every inferencer of the process.

    Shards of one dataset share their layouts, so a writer rolling over shards, or a scan of
    many, learns each layout once.  Sharing is safe: a layout only ever stands for records
    that match it exactly, and learning happens under a lock.  Layouts keep no values (only
    the skeleton of a record), at most ``_MAX_LAYOUT_BYTES`` of them.
    """

    def __init__(self) -> None:
        self.indexes: dict[int, _LengthIndex] = {}
        self.size = 0
        self.lock = threading.Lock()

    def learn(self, record: bytes, regions: _Regions, signature: _Signature) -> _Layout | None:
        """The layout of ``record`` (parsed into ``regions`` and ``signature``), remembered;
        None if it is not worth remembering."""
        if len(regions) > _MAX_REGIONS or len(record) > _MAX_LAYOUT_RECORD:
            return None
        with self.lock:
            index = self.indexes.get(len(record))
            if index is not None:
                known = index.match(record)  # learnt meanwhile by another inferencer
                if known is not None or len(index.layouts) >= _MAX_LAYOUTS_PER_LENGTH:
                    return known
            if self.size > _MAX_LAYOUT_BYTES:  # forget every layout (counts stay with users)
                self.indexes = {}
                self.size = 0
                index = None
            layout = _Layout(record, regions, signature)
            self.size += len(record)
            if index is None:
                self.indexes[len(record)] = _LengthIndex(layout)
            else:
                index.add(layout)
            return layout


_LAYOUTS = _LayoutStore()
_NO_INDEX = _LengthIndex()
_MISS = _Layout(b"", [], (False, ()))
_MISS.fixed_get, _MISS.fixed_expect = _fields([]), None  # b"" never equals None: no match
_KEY_GET, _TABLE = attrgetter("key_get"), attrgetter("table")
_FIXED_GET, _FIXED_EXPECT = attrgetter("fixed_get"), attrgetter("fixed_expect")
_INTS_GET, _INTS_EXPECT = attrgetter("ints_get"), attrgetter("ints_expect")


# --------------------------------------------------------------------------- the inferencer


# structure key (recordkeeper._speedups) -> summary, shared by inferencers: later shards of a
# dataset start warm.  Keys hold record structure and feature names, never values.
_KEYED_SIGNATURES: dict[bytes, _Signature] = {}
_MAX_KEYED_SIGNATURES = 1 << 16


class SchemaInferencer:
    """Accumulates a schema over serialized records; exact, streaming, mergeable.

    >>> inf = SchemaInferencer()
    >>> inf.add_many(records)      # or inf.add(record) one at a time
    >>> inf.result()
    Schema(record_type='example', record_count=..., features=(...))
    """

    def __init__(self) -> None:
        self._count = 0
        self._opaque = False
        self._sequence = False
        self._clash: tuple[str, set[str]] | None = None
        self._layouts = _LAYOUTS
        self._hits: Counter[_Layout] = Counter()
        self._signatures: Counter[_Signature] = Counter()
        # (scope, key, kind) -> [min_count, max_count, present, min_steps, max_steps]
        self._totals: dict[tuple[int, str, str | None], list[Any]] = {}

    @property
    def record_count(self) -> int:
        """Records seen so far."""
        return self._count

    def add(self, record: bytes) -> None:
        """Account for one serialized record."""
        self.add_many((record,))

    def add_many(self, records: Sequence[bytes]) -> None:
        """Account for a batch of serialized records (much faster than one ``add`` each)."""
        self._count += len(records)
        if self._opaque or not records:
            return
        if _native.speedups is not None:
            self._add_natively(records, _native.speedups)
            return
        indexes = list(map(self._layouts.indexes.get, map(len, records), repeat(_NO_INDEX)))
        keys = map(call, map(_KEY_GET, indexes), records)
        layouts = list(map(dict.get, map(_TABLE, indexes), keys, repeat(_MISS)))
        fixed = map(b"".join, map(call, map(_FIXED_GET, layouts), records))
        fixed_ok = map(eq, fixed, map(_FIXED_EXPECT, layouts))
        ints = map(call, map(_INTS_GET, layouts), records)
        ints_ok = map(eq, map(bytes.translate, ints, repeat(_HIGH_BIT)), map(_INTS_EXPECT, layouts))
        ok = list(map(and_, fixed_ok, ints_ok))
        self._hits.update(compress(layouts, ok))
        for record in compress(records, map(not_, ok)):
            self._add_slowly(record)
            if self._opaque:
                return

    def _add_natively(self, records: Sequence[bytes], speedups: Any) -> None:
        """:meth:`add_many` with ``recordkeeper._speedups.structure_keys``."""
        summary, slow = speedups.structure_keys(records)
        self.add_summary(
            {key: (records[first], count) for key, (first, count) in summary.items()},
            [records[index] for index in slow],
            count=0,
        )

    def add_summary(
        self,
        summary: dict[bytes, Any],
        slow: Sequence[bytes],
        *,
        count: int,
    ) -> None:
        """Account for records already summarised by structure key (``recordkeeper._speedups``):
        ``summary`` maps each key to (one record with that key, how many records had it);
        ``slow`` are records outside the fast path; ``count`` records are new to the total.

        Records with equal keys have equal summaries, so one record per key is parsed.
        """
        self._count += count
        if self._opaque:
            return
        for key, (record, n) in summary.items():
            signature = _KEYED_SIGNATURES.get(key)
            if signature is None:
                try:
                    signature, _ = _parse(record)
                except (_Malformed, _KindClash):  # not expected on the fast path; stay exact
                    for _ in range(n):
                        self._add_slowly(record)
                    continue
                if len(_KEYED_SIGNATURES) >= _MAX_KEYED_SIGNATURES:
                    _KEYED_SIGNATURES.clear()
                _KEYED_SIGNATURES[key] = signature
            self._signatures[signature] += n
        for record in slow:
            self._add_slowly(record)
            if self._opaque:
                return
        if len(self._signatures) > _MAX_SIGNATURES:
            self._fold()

    def _add_slowly(self, record: bytes) -> None:
        index = self._layouts.indexes.get(len(record))
        layout = index.match(record) if index is not None else None
        if layout is not None:  # a layout learnt since this batch started
            self._hits[layout] += 1
            return
        try:
            signature, regions = _parse(record)
        except _Malformed:
            self._opaque = True
            self._hits.clear()
            self._signatures.clear()
            self._totals.clear()
            return
        except _KindClash as clash:
            # the first by name, not by arrival: the C and Python paths see records in
            # different orders, and must name the same feature
            found = (clash.key, clash.kinds)
            self._clash = found if self._clash is None else min(self._clash, found, key=_first)
            return
        layout = self._layouts.learn(record, regions, signature)
        if layout is not None:
            self._hits[layout] += 1
            return
        self._signatures[signature] += 1
        if len(self._signatures) > _MAX_SIGNATURES:
            self._fold()

    def _fold(self) -> None:
        """Move template hits and per-record summaries into the running totals."""
        for layout, n in self._hits.items():
            self._signatures[layout.signature] += n
        self._hits.clear()
        totals = self._totals
        for (sequence, entries), n in self._signatures.items():
            self._sequence = self._sequence or sequence
            for scope, key, kind, lo, hi, steps in entries:
                t = totals.get((scope, key, kind))
                if t is None:
                    totals[(scope, key, kind)] = [lo, hi, n, steps, steps]
                    continue
                t[0] = _min_opt(t[0], lo)
                t[1] = _max_opt(t[1], hi)
                t[2] += n
                t[3] = _min_opt(t[3], steps)
                t[4] = _max_opt(t[4], steps)
        self._signatures.clear()

    def result(self) -> Schema:
        """The schema of every record added so far (may be called again after more adds)."""
        if self._count == 0:
            return Schema()
        if self._opaque:
            return Schema(record_type="opaque", record_count=self._count)
        if self._clash is not None:
            raise _conflict(*self._clash)
        self._fold()
        kinds: dict[tuple[int, str], str] = {}
        # in (scope, name) order, so that the feature named by a conflict does not depend on
        # the order records were summarised in (C and Python paths differ there)
        for scope, key, kind in sorted(self._totals, key=_scope_and_name):
            if kind is None:
                continue
            seen = kinds.setdefault((scope, key), kind)
            if seen != kind:
                raise _conflict(key, {seen, kind})
        record_type: RecordType = "sequence_example" if self._sequence else "example"
        scope_names: tuple[Scope, Scope] = (
            "context" if self._sequence else "features",
            "feature_lists",
        )
        features = []
        for (scope, key), kind in kinds.items():
            lo, hi, present, min_steps, max_steps = self._totals[(scope, key, kind)]
            untyped = self._totals.get((scope, key, None))
            if untyped is not None:  # empty feature lists, steps without a kind
                lo, hi = _min_opt(lo, untyped[0]), _max_opt(hi, untyped[1])
                present += untyped[2]
                min_steps = _min_opt(min_steps, untyped[3])
                max_steps = _max_opt(max_steps, untyped[4])
            features.append(
                Feature(
                    name=key,
                    kind=cast(FeatureKind, kind),  # a value of _KINDS
                    min_count=lo,
                    max_count=hi,
                    present_count=present,
                    scope=scope_names[scope],
                    min_steps=min_steps,
                    max_steps=max_steps,
                )
            )
        features.sort(key=lambda f: (SCOPES.index(f.scope), f.name))
        return Schema(record_type=record_type, record_count=self._count, features=tuple(features))


def _first(clash: tuple[str, set[str]]) -> str:
    return clash[0]


def _scope_and_name(total: tuple[int, str, str | None]) -> tuple[int, str, str]:
    return total[0], total[1], total[2] or ""


def _conflict(key: str, kinds: set[str]) -> SchemaConflict:
    return SchemaConflict(
        f"feature {key!r} has more than one kind in these records: {', '.join(sorted(kinds))}",
        feature=key,
        kinds=sorted(kinds),
    )


def infer_schema(records: Iterable[bytes]) -> Schema:
    """The schema of ``records`` (serialized Examples / SequenceExamples, or anything else)."""
    inferencer = SchemaInferencer()
    batch: list[bytes] = []
    for record in records:
        batch.append(record)
        if len(batch) >= 1024:
            inferencer.add_many(batch)
            batch.clear()
    inferencer.add_many(batch)
    return inferencer.result()

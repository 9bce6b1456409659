"""Differences between two versions: shards, record and shard counts per split, schema.

One rule for every entry point (``client.diff``, ``recordkeeper diff``, the service's
``GET /versions/{ref}/diff/{other}`` and the web UI's compare page):

* Shards are matched by ``(split, index)``; a shard is *changed* when its ``records_sha256`` or
  ``record_count`` differs.  Re-compressing or moving a shard is not a change of content.
  A shard whose records are found at another position of the same split in the other version
  is *unchanged* (shifted: a shard was removed or inserted before it), so a version derived by
  removing one shard of a split differs from its base by that one removal, not by every shard
  after it.
* A feature is matched by ``(scope, name)``; it is *added*, *removed*, *kind_changed* or
  *shape_changed* (values per record, or steps per sequence, differ).  Schemas are compared only
  when the two versions' schema digests differ (or one is unknown).
* ``same_content`` is true when both content digests are known and equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from recordkeeper.core.schema import Feature, Schema
from recordkeeper.core.shards import ShardRecord

__all__ = [
    "FeatureChange",
    "ShardChange",
    "ShardRow",
    "ShardTable",
    "SplitCounts",
    "SplitRows",
    "VersionDiff",
    "diff_rows",
    "diff_schemas",
    "diff_shards",
    "diff_tables",
    "diff_versions",
    "page_changes",
    "shard_rows",
]

S = TypeVar("S", bound=ShardRecord)


def _shard_summary(shard: ShardRecord | None) -> dict[str, Any] | None:
    if shard is None:
        return None
    return {
        "uri": shard.uri,
        "records_sha256": shard.records_sha256,
        "record_count": shard.record_count,
    }


def _shard_whole(shard: ShardRecord | None) -> dict[str, Any] | None:
    return None if shard is None else shard.to_json()


@dataclass(frozen=True)
class ShardChange(Generic[S]):
    """A shard present in only one version, or with other records in each."""

    split: str
    index: int
    change: Literal["added", "removed", "changed"]
    old: S | None
    new: S | None

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], shard: Callable[[Mapping[str, Any]], S]
    ) -> ShardChange[S]:
        """The change :meth:`to_dict` wrote; ``shard`` builds each side's record (from a whole
        record: ``to_dict(full=True)``)."""
        old, new = data["old"], data["new"]
        return cls(
            data["split"],
            int(data["index"]),
            data["change"],
            None if old is None else shard(old),
            None if new is None else shard(new),
        )

    def to_dict(self, *, full: bool = False) -> dict[str, Any]:
        """The change; ``full``: each side as the whole shard record, not its summary."""
        side = _shard_whole if full else _shard_summary
        return {
            "split": self.split,
            "index": self.index,
            "change": self.change,
            "old": side(self.old),
            "new": side(self.new),
        }


@dataclass(frozen=True)
class FeatureChange:
    """A feature added, removed, or whose kind or value count (shape) changed."""

    name: str
    scope: str
    change: Literal["added", "removed", "kind_changed", "shape_changed"]
    old: Feature | None
    new: Feature | None

    def describe(self) -> str:
        if self.change == "added" and self.new:
            return f"+ {self.name} ({self.new.kind}, {_shape(self.new)})"
        if self.change == "removed" and self.old:
            return f"- {self.name} ({self.old.kind}, {_shape(self.old)})"
        assert self.old and self.new
        if self.change == "kind_changed":
            return f"~ {self.name}: kind {self.old.kind} -> {self.new.kind}"
        return f"~ {self.name}: values per record {_shape(self.old)} -> {_shape(self.new)}"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeatureChange:
        """The change :meth:`to_dict` wrote."""
        old, new = data["old"], data["new"]
        return cls(
            data["name"],
            data["scope"],
            data["change"],
            None if old is None else Feature.from_dict(old),
            None if new is None else Feature.from_dict(new),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scope": self.scope,
            "change": self.change,
            "old": None if self.old is None else self.old.to_dict(),
            "new": None if self.new is None else self.new.to_dict(),
            "description": self.describe(),
        }


def _shape(feat: Feature) -> str:
    if feat.min_count == feat.max_count:
        return f"{feat.min_count} per record"
    return f"{feat.min_count}..{feat.max_count} per record"


@dataclass(frozen=True)
class SplitCounts:
    """Record and shard counts of one split in each version (0 when absent)."""

    split: str
    old_records: int
    new_records: int
    old_shards: int
    new_shards: int

    @property
    def record_delta(self) -> int:
        return self.new_records - self.old_records


@dataclass(frozen=True)
class VersionDiff(Generic[S]):
    """What changed from version ``old`` to version ``new``."""

    old: str
    new: str
    same_content: bool
    shards: tuple[ShardChange[S], ...]
    unchanged_shards: int
    splits: tuple[SplitCounts, ...]
    schema: tuple[FeatureChange, ...] = field(default_factory=tuple)
    #: How it was computed: ``shards`` (both versions' shards compared) or ``derivation``
    #: (one is derived from the other: only the positions after those both hold alike were
    #: read).  The answer is the same either way.
    basis: Literal["derivation", "shards"] = "shards"

    @property
    def added(self) -> list[ShardChange[S]]:
        return [c for c in self.shards if c.change == "added"]

    @property
    def removed(self) -> list[ShardChange[S]]:
        return [c for c in self.shards if c.change == "removed"]

    @property
    def changed(self) -> list[ShardChange[S]]:
        return [c for c in self.shards if c.change == "changed"]

    def _repr_html_(self) -> str:
        """Notebook display: split counts, shard changes, schema changes (escaped)."""
        from recordkeeper.core.display import diff_html

        return diff_html(self)

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], changes: Sequence[ShardChange[S]]
    ) -> VersionDiff[S]:
        """The diff :meth:`to_dict` wrote, with its shard ``changes`` (read from every page of
        it by :func:`page_changes`)."""
        return cls(
            old=data["old"],
            new=data["new"],
            same_content=bool(data["same_content"]),
            shards=tuple(changes),
            unchanged_shards=int(data["shards"]["unchanged"]),
            splits=tuple(
                SplitCounts(
                    split,
                    int(c["old_records"]),
                    int(c["new_records"]),
                    int(c["old_shards"]),
                    int(c["new_shards"]),
                )
                for split, c in sorted(data["splits"].items())
            ),
            schema=tuple(FeatureChange.from_dict(c) for c in data["schema"]),
            basis=data["basis"],
        )

    def to_dict(
        self, *, limit: int | None = None, offset: int = 0, full: bool = False
    ) -> dict[str, Any]:
        """The answer; with ``limit``, one page of the shard changes (``full``: each with its
        whole shard records, :meth:`ShardChange.to_dict`).

        The changes are in ``(split, index)`` order; a page lists those at positions
        ``offset`` to ``offset + limit`` (each in its ``added``/``removed``/``changed`` list).
        ``shards.counts`` has the totals of every kind and ``shards.more`` says whether changes
        follow the page; the record counts per split and the schema changes are always whole.
        """
        page = self.shards[offset:] if limit is None else self.shards[offset : offset + limit]
        counts = {"added": 0, "removed": 0, "changed": 0}
        for change in self.shards:
            counts[change.change] += 1
        listed: dict[str, list[dict[str, Any]]] = {"added": [], "removed": [], "changed": []}
        for change in page:
            listed[change.change].append(change.to_dict(full=full))
        return {
            "old": self.old,
            "new": self.new,
            "same_content": self.same_content,
            "basis": self.basis,
            "shards": {
                **listed,
                "unchanged": self.unchanged_shards,
                "counts": counts,
                "offset": offset,
                "limit": limit,
                "more": offset + len(page) < len(self.shards),
            },
            "splits": {
                s.split: {
                    "old_records": s.old_records,
                    "new_records": s.new_records,
                    "record_delta": s.record_delta,
                    "old_shards": s.old_shards,
                    "new_shards": s.new_shards,
                }
                for s in self.splits
            },
            "schema": [c.to_dict() for c in self.schema],
        }


def page_changes(
    shards: Mapping[str, Any], shard: Callable[[Mapping[str, Any]], S]
) -> list[ShardChange[S]]:
    """The shard changes of one page of :meth:`VersionDiff.to_dict`'s ``shards`` (listed there
    by kind), in ``(split, index)`` order."""
    page = [
        ShardChange.from_dict(c, shard)
        for kind in ("added", "removed", "changed")
        for c in shards[kind]
    ]
    page.sort(key=lambda c: (c.split, c.index))
    return page


def diff_schemas(old: Schema, new: Schema) -> list[FeatureChange]:
    """Features added/removed, and kind or per-record value count changes."""
    olds = {f.key: f for f in old.features}
    news = {f.key: f for f in new.features}
    out: list[FeatureChange] = []
    for key in sorted(olds.keys() | news.keys()):
        a, b = olds.get(key), news.get(key)
        scope, name = key
        if a is None:
            out.append(FeatureChange(name, scope, "added", None, b))
        elif b is None:
            out.append(FeatureChange(name, scope, "removed", a, None))
        elif a.kind != b.kind:
            out.append(FeatureChange(name, scope, "kind_changed", a, b))
        elif (a.min_count, a.max_count, a.min_steps, a.max_steps) != (
            b.min_count,
            b.max_count,
            b.min_steps,
            b.max_steps,
        ):
            out.append(FeatureChange(name, scope, "shape_changed", a, b))
    return out


#: What the diff reads of a shard: ``(split, index, records_sha256, record_count)``.
ShardRow = tuple[str, int, str, int]
#: One change found on rows: ``(split, index, change, old position, new position)``.
RowChange = tuple[str, int, Literal["added", "removed", "changed"], int | None, int | None]


def shard_rows(shards: Iterable[ShardRecord]) -> list[ShardRow]:
    """The rows :func:`diff_rows` compares, one per shard in the order given."""
    return [(s.split, s.index, s.records_sha256, s.record_count) for s in shards]


def diff_rows(old: Sequence[ShardRow], new: Sequence[ShardRow]) -> tuple[list[RowChange], int]:
    """The rule of :func:`diff_shards` on rows: the changes in ``(split, index)`` order, each
    with the positions of its shards in ``old``/``new``, and the number of unchanged shards.

    Nothing is built per shard: a 100,000-shard pair costs a few dict and set operations.
    """
    old_pos = {(r[0], r[1]): i for i, r in enumerate(old)}  # a repeated key: the last one
    new_pos = {(r[0], r[1]): i for i, r in enumerate(new)}
    old_content = {key: old[i][2:] for key, i in old_pos.items()}
    new_content = {key: new[i][2:] for key, i in new_pos.items()}
    same = {key for key, _ in old_content.items() & new_content.items()}
    unchanged = len(same)
    rest_old = {key: i for key, i in old_pos.items() if key not in same}
    rest_new = {key: i for key, i in new_pos.items() if key not in same}
    if rest_old and rest_new:  # the same records at another position of the split: shifted
        pool: dict[tuple[str, str, int], list[tuple[str, int]]] = {}
        for key in sorted(rest_old, reverse=True):
            a = old[rest_old[key]]
            pool.setdefault((a[0], a[2], a[3]), []).append(key)
        for key in sorted(rest_new):
            b = new[rest_new[key]]
            keys = pool.get((b[0], b[2], b[3]))
            if keys:
                del rest_old[keys.pop()]
                del rest_new[key]
                unchanged += 1
    changes: list[RowChange] = []
    for key in sorted(rest_old.keys() | rest_new.keys()):
        was, now = rest_old.get(key), rest_new.get(key)
        if was is None:
            changes.append((key[0], key[1], "added", None, now))
        elif now is None:
            changes.append((key[0], key[1], "removed", was, None))
        else:
            changes.append((key[0], key[1], "changed", was, now))
    return changes, unchanged


def _changes(
    found: Iterable[RowChange], old: Callable[[int], S], new: Callable[[int], S]
) -> list[ShardChange[S]]:
    """The shard changes of rows, with the records of only these shards built."""
    return [
        ShardChange(
            split,
            index,
            change,
            None if was is None else old(was),
            None if now is None else new(now),
        )
        for split, index, change, was, now in found
    ]


def diff_shards(old: Iterable[S], new: Iterable[S]) -> tuple[list[ShardChange[S]], int]:
    """Shard changes by ``(split, index)`` and the number of unchanged shards (shifted shards
    of a split count as unchanged, see the module docstring)."""
    olds, news = list(old), list(new)
    found, unchanged = diff_rows(shard_rows(olds), shard_rows(news))
    return _changes(found, olds.__getitem__, news.__getitem__), unchanged


def _cut(values: Sequence[Any], part: slice) -> Sequence[Any]:
    """``values[part]``, without a copy when that is all of them."""
    start, stop, _ = part.indices(len(values))
    return values if start == 0 and stop == len(values) else values[part]


@dataclass(frozen=True)
class SplitRows:
    """The shards of one split as columns (each ``split`` value should be ``name``), at
    positions ``start`` to ``start + len(index)`` of their :class:`ShardTable`."""

    name: str
    start: int
    split: Sequence[str]
    index: Sequence[int]
    records_sha256: Sequence[str]
    record_count: Sequence[int]

    def rows(self, lo: int = 0, hi: int | None = None) -> list[ShardRow]:
        """The rows of positions ``lo:hi`` of the part."""
        cut = slice(lo, hi)
        return list(
            zip(
                self.split[cut],
                self.index[cut],
                self.records_sha256[cut],
                self.record_count[cut],
                strict=True,
            )
        )

    def _equal(self, other: SplitRows, mine: slice, theirs: slice) -> bool:
        return all(
            _cut(a, mine) == _cut(b, theirs)
            for a, b in (
                (self.index, other.index),
                (self.records_sha256, other.records_sha256),
                (self.record_count, other.record_count),
            )
        )

    def common_ends(self, other: SplitRows) -> tuple[int, int]:
        """How many leading and trailing positions hold the same shard in both (found by
        bisection on column slices: no row is built).  For two :meth:`uniform` parts, each of
        these shards has the same key and records in both, so it is unchanged under the rule
        whatever the other positions hold."""
        mine, theirs = len(self.index), len(other.index)
        lo, hi = 0, min(mine, theirs)
        if self._equal(
            other, slice(0, hi), slice(0, hi)
        ):  # shards only added or removed at the end
            lo = hi
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._equal(other, slice(0, mid), slice(0, mid)):
                lo = mid
            else:
                hi = mid - 1
        head = lo
        lo, hi = 0, min(mine, theirs) - head
        if hi and self._equal(other, slice(mine - hi, mine), slice(theirs - hi, theirs)):
            lo = hi
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._equal(other, slice(mine - mid, mine), slice(theirs - mid, theirs)):
                lo = mid
            else:
                hi = mid - 1
        return head, lo

    def uniform(self) -> bool:
        """Every shard names this split and has an index of its own."""
        return set(self.split) <= {self.name} and len(set(self.index)) == len(self.index)


@dataclass(frozen=True)
class ShardTable(Generic[S]):
    """A version's shards as the diff reads them without building records: ``splits`` (the
    columns the rule reads, one part per split) and ``record(i)``, the record at position ``i``
    (called only for the shards in the answer)."""

    splits: Sequence[SplitRows]
    record: Callable[[int], S]

    @classmethod
    def of(cls, shards: Sequence[S]) -> ShardTable[S]:
        """The table of records in hand (each run of one split a part)."""
        parts: list[SplitRows] = []
        start = 0
        while start < len(shards):
            name = shards[start].split
            end = start
            while end < len(shards) and shards[end].split == name:
                end += 1
            run = shards[start:end]
            parts.append(
                SplitRows(
                    name,
                    start,
                    [s.split for s in run],
                    [s.index for s in run],
                    [s.records_sha256 for s in run],
                    [s.record_count for s in run],
                )
            )
            start = end
        return cls(parts, shards.__getitem__)

    def totals(self) -> dict[str, tuple[int, int]]:
        """``(records, shards)`` of each split, counted by what each shard names."""
        totals: dict[str, tuple[int, int]] = {}
        for part in self.splits:
            names = set(part.split)
            if len(names) == 1:  # as a split's shards do: one sum
                key = names.pop()
                records, count = totals.get(key, (0, 0))
                totals[key] = (records + sum(part.record_count), count + len(part.split))
                continue
            for split, n in zip(part.split, part.record_count, strict=True):
                records, count = totals.get(split, (0, 0))
                totals[split] = (records + n, count + 1)
        return totals


def diff_tables(old: ShardTable[S], new: ShardTable[S]) -> tuple[list[ShardChange[S]], int]:
    """:func:`diff_shards` on tables: in a split whose shards each name it with an index of
    their own (as always), the shards at the same leading and trailing positions of both are
    counted unchanged without a row (:meth:`SplitRows.common_ends`); the positions between go
    through :func:`diff_rows`, and only the shards in the answer are built.  Splits are
    independent under the rule (keys and shifts never cross a split), so a derived version
    costs in proportion to the positions that differ."""
    old_parts: dict[str, list[SplitRows]] = {}
    new_parts: dict[str, list[SplitRows]] = {}
    for part in old.splits:
        old_parts.setdefault(part.name, []).append(part)
    for part in new.splits:
        new_parts.setdefault(part.name, []).append(part)
    unchanged = 0
    old_rows: list[ShardRow] = []
    new_rows: list[ShardRow] = []
    old_at: list[int] = []
    new_at: list[int] = []
    for name in sorted(old_parts.keys() | new_parts.keys()):
        was, now = old_parts.get(name, []), new_parts.get(name, [])
        if len(was) == 1 and len(now) == 1 and was[0].uniform() and now[0].uniform():
            a, b = was[0], now[0]
            head, tail = a.common_ends(b)
            unchanged += head + tail
            a_end, b_end = len(a.index) - tail, len(b.index) - tail
            old_rows.extend(a.rows(head, a_end))
            old_at.extend(range(a.start + head, a.start + a_end))
            new_rows.extend(b.rows(head, b_end))
            new_at.extend(range(b.start + head, b.start + b_end))
            continue
        for part in was:
            old_rows.extend(part.rows())
            old_at.extend(range(part.start, part.start + len(part.index)))
        for part in now:
            new_rows.extend(part.rows())
            new_at.extend(range(part.start, part.start + len(part.index)))
    found, more = diff_rows(old_rows, new_rows)
    changes = _changes(found, lambda i: old.record(old_at[i]), lambda i: new.record(new_at[i]))
    return changes, unchanged + more


@dataclass(frozen=True)
class DiffSide(Generic[S]):
    """One version as the diff needs it; ``schema`` is asked only when the digests differ."""

    name: str
    content_digest: str | None
    schema_digest: str | None
    shards: Sequence[S]
    schema: Callable[[], Schema]
    #: The same shards as columns (faster: no record is read but those in the answer); when
    #: given, ``shards`` is not read.
    table: ShardTable[S] | None = None
    #: ``{split: (records, shards)}`` of the whole version, when ``shards``/``table`` hold only
    #: part of it (see ``common`` of :func:`diff_versions`); None: counted from them.
    totals: Mapping[str, tuple[int, int]] | None = None

    def shard_table(self) -> ShardTable[S]:
        if self.table is not None:
            return self.table
        return ShardTable.of(self.shards)


def diff_versions(old: DiffSide[S], new: DiffSide[S], *, common: int = 0) -> VersionDiff[S]:
    """What changed from ``old`` to ``new`` (see the module docstring for the rules).

    ``common``: shards known to be at the same ``(split, index)`` with the same records in
    both and left out of both sides' shards (a derived version's leading positions, which hold
    its base's rows: :attr:`recordkeeper.core.derive.SplitPlan.base_prefix`).  Such shards are
    unchanged under the rule whatever the other positions hold, and never take part in a shift,
    so the answer is the one the whole versions give; the sides' ``totals`` then count the
    whole versions."""
    old_table, new_table = old.shard_table(), new.shard_table()
    changes, unchanged = diff_tables(old_table, new_table)
    old_totals = old_table.totals() if old.totals is None else old.totals
    new_totals = new_table.totals() if new.totals is None else new.totals
    splits = tuple(
        SplitCounts(
            split=name,
            old_records=old_totals.get(name, (0, 0))[0],
            new_records=new_totals.get(name, (0, 0))[0],
            old_shards=old_totals.get(name, (0, 0))[1],
            new_shards=new_totals.get(name, (0, 0))[1],
        )
        for name in sorted(old_totals.keys() | new_totals.keys())
    )
    schema_changes: list[FeatureChange] = []
    if old.schema_digest is None or old.schema_digest != new.schema_digest:
        schema_changes = diff_schemas(old.schema(), new.schema())
    same = old.content_digest is not None and old.content_digest == new.content_digest
    return VersionDiff(
        old=old.name,
        new=new.name,
        same_content=same,
        shards=tuple(changes),
        unchanged_shards=unchanged + common,
        splits=splits,
        schema=tuple(schema_changes),
    )

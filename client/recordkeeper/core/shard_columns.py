"""The compact wire form of a shard list: one JSON array per field, URIs after a shared prefix.

The ordinary form of a version's shards is a list of objects that repeats every key for every
shard: 10,000 shards take ~5.4 MB of JSON, and a client turning them into 10,000 objects spends
more time on that than on the network.  The compact form (``GET /versions/{ref}/shards?
form=compact``) sends the same values as columns::

    {"uri_prefix": "s3://ml-data/datasets/coco/coco_20231015_v3/",
     "columns": {"split": ["train", ...], "index": [0, ...], "count": [16, ...],
                 "uri": ["train-00000-of-00016.tfrecord", ...], "compression": [...],
                 "size": [...], "sha256": [...], "crc32c": [...], "records_sha256": [...],
                 "record_count": [...], "storage_identity": [{...} or null, ...],
                 "schema_digest": [... or null]}}

``columns`` has one array per field of :class:`~recordkeeper.core.shards.ShardRecord`
(:data:`COLUMNS`), all of the same length, in the page's order (split, then index); each URI is
``uri_prefix + uri``.  The registration time (``registered_at``) is only in the full form.

:func:`to_columns` writes it; :class:`ShardColumns` reads it as a sequence of records built on
first access (a 10,000-shard version resolves without building 10,000 objects; its URIs, sizes
and record counts are read straight from the columns).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar, overload

from recordkeeper.core.limits import MAX_SHARDS_PER_REQUEST
from recordkeeper.core.shards import FIELDS, ShardRecord

__all__ = [
    "COLUMNS",
    "PACKED_ENCODINGS",
    "ShardColumns",
    "common_uri_prefix",
    "pack_columns",
    "pack_values",
    "to_columns",
    "unpack_columns",
    "unpack_values",
]

#: The arrays of the compact form, in the record's field order.
COLUMNS: tuple[str, ...] = FIELDS

R = TypeVar("R", bound=ShardRecord)


def common_uri_prefix(uris: Sequence[str]) -> str:
    """The longest prefix ending in ``/`` that every URI in ``uris`` starts with ('' if none)."""
    if not uris:
        return ""
    first, last = min(uris), max(uris)  # the common prefix of all is that of the extremes
    n = 0
    for a, b in zip(first, last, strict=False):
        if a != b:
            break
        n += 1
    return first[: first.rfind("/", 0, n) + 1]


def to_columns(shards: Sequence[ShardRecord]) -> dict[str, Any]:
    """The compact form of ``shards`` (in the order given)."""
    uris = [s.uri for s in shards]
    prefix = common_uri_prefix(uris)
    cut = len(prefix)
    columns: dict[str, list[Any]] = {}
    for name in COLUMNS:
        if name == "uri":
            columns[name] = [u[cut:] for u in uris]
        elif name == "storage_identity":
            columns[name] = [
                dict(s.storage_identity) if s.storage_identity is not None else None for s in shards
            ]
        else:
            columns[name] = [getattr(s, name) for s in shards]
    return {"uri_prefix": prefix, "columns": columns}


#: How a column of the packed form (``form=packed``) may be sent besides a plain JSON array:
#: ``runs`` — ``[[value, repeat], ...]`` for consecutive equal values (a split's name, its
#: count, the compression, the schema digest); ``lines`` — strings joined by ``"\n"`` (hashes,
#: URIs: one JSON string instead of one per shard); ``json_lines`` / ``json`` (only
#: ``storage_identity``) — each object as its JSON text, joined by ``"\n"`` or as an array of
#: texts (or nulls), decoded when a record is built.
PACKED_ENCODINGS: tuple[str, ...] = ("runs", "lines", "json_lines", "json")

#: Runs are sent when a column has at most one run per this many values.
_RUN_RATIO = 8


def _runs(values: Sequence[Any]) -> list[list[Any]] | None:
    """``[[value, repeat], ...]`` of ``values`` if they form few runs, else None."""
    runs: list[list[Any]] = []
    limit = len(values) // _RUN_RATIO + 1
    i, n = 0, len(values)
    while i < n:
        value = values[i]
        j = i + 1
        if i == 0 and values[n - 1] == value and list(values).count(value) == n:
            j = n  # one run (the usual case for a page of one split): counted in C
        while j < n and values[j] == value:
            j += 1
        runs.append([value, j - i])
        if len(runs) > limit:
            return None
        i = j
    return runs


def _lines(values: Sequence[Any]) -> str | None:
    """``values`` joined by ``"\n"`` if they are strings without one, else None (checked in C:
    the join refuses anything but strings, a newline inside one adds to the count)."""
    try:
        joined = "\n".join(values)
    except TypeError:
        return None
    return joined if joined.count("\n") == max(len(values) - 1, 0) else None


def pack_values(values: Sequence[Any]) -> Any:
    """One packed column: ``{"runs": …}`` when ``values`` form few runs, else ``{"lines": …}``
    when they are strings without a newline, else the plain array."""
    runs = _runs(values)
    if runs is not None:
        return {"runs": runs}
    lines = _lines(values) if values else None
    if lines is not None:
        return {"lines": lines}
    return list(values)


def pack_columns(columns: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """The packed form of compact ``columns`` (:data:`COLUMNS`, equal lengths), except that
    ``storage_identity`` holds each object's JSON text (or None): what a service reads from
    its rows.  Every column is one of :data:`PACKED_ENCODINGS` or a plain array."""
    packed: dict[str, Any] = {}
    for name in COLUMNS:
        values = columns[name]
        if name == "storage_identity":
            joined = _lines(values)
            packed[name] = {"json_lines": joined} if joined is not None else {"json": list(values)}
            continue
        packed[name] = pack_values(values)
    return packed


def unpack_values(name: str, value: Any, length: int) -> list[Any]:
    """The ``length`` values of one packed column (``runs``, ``lines``, ``json_lines``,
    ``json`` or a plain array), refused (``ValueError``/``TypeError``) before a run expands
    past ``length``."""
    if isinstance(value, list):
        column = value
    elif not isinstance(value, dict) or len(value) != 1:
        raise TypeError(f"packed column {name} is not an array or an encoding object")
    elif "runs" in value:
        column = []
        for item, repeat in value["runs"]:
            if type(repeat) is not int or not 0 <= repeat <= length - len(column):
                raise ValueError(
                    f"packed column {name}: a run of {repeat!r} (the page has {length} "
                    f"values, {len(column)} given before it)"
                )
            column += [item] * repeat
    elif "lines" in value or "json_lines" in value:
        text = value.get("lines", value.get("json_lines"))
        if not isinstance(text, str):
            raise TypeError(f"packed column {name}: lines are not a string")
        column = text.split("\n") if length else []
    elif "json" in value and isinstance(value["json"], list):
        column = value["json"]
    else:
        raise ValueError(f"packed column {name}: unknown encoding {sorted(value)}")
    if len(column) != length:
        raise ValueError(f"packed column {name} has {len(column)} values, not {length}")
    return column


def unpack_columns(packed: Mapping[str, Any], length: int) -> dict[str, list[Any]]:
    """Compact columns of ``length`` values each from the packed form (``storage_identity``
    as JSON texts, decoded by :class:`ShardColumns` when a record is built).

    Raises ``ValueError``/``TypeError`` on anything that is not the packed form, before any
    column is expanded past ``length`` values (a page holds at most
    :data:`~recordkeeper.core.limits.MAX_SHARDS_PER_REQUEST` shards): a run of 10^12 in a
    100-byte answer must not become a list of 10^12 items.
    """
    if type(length) is not int or not 0 <= length <= MAX_SHARDS_PER_REQUEST:
        raise ValueError(
            f"a packed page of {length!r} shards (a page holds 0 to {MAX_SHARDS_PER_REQUEST})"
        )
    columns: dict[str, list[Any]] = {}
    for name in COLUMNS:
        column = unpack_values(name, packed[name], length)
        if name == "storage_identity" and any(
            v is not None and not isinstance(v, str) for v in column
        ):
            raise TypeError("packed column storage_identity holds values that are not JSON text")
        columns[name] = column
    return columns


class ShardColumns(Sequence[R], Generic[R]):
    """A read-only sequence of shard records over compact-form columns.

    ``record_type`` is the record class to build (the client's ``rk.Shard``); an item is built
    the first time it is read and kept.  Equality is that of the records, as for a tuple.
    """

    __slots__ = ("_built", "_columns", "_prefix", "_record_type")

    def __init__(
        self, record_type: type[R], uri_prefix: str, columns: Mapping[str, Sequence[Any]]
    ) -> None:
        missing = [name for name in COLUMNS if name not in columns]
        if missing:
            raise ValueError(f"compact shard columns lack {', '.join(missing)}")
        lengths = {len(columns[name]) for name in COLUMNS}
        if len(lengths) > 1:
            raise ValueError(f"compact shard columns differ in length: {sorted(lengths)}")
        self._record_type = record_type
        self._prefix = uri_prefix
        self._columns = {name: columns[name] for name in COLUMNS}
        self._built: list[R | None] = [None] * (lengths.pop() if lengths else 0)

    def __len__(self) -> int:
        return len(self._built)

    @overload
    def __getitem__(self, index: int) -> R: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[R, ...]: ...
    def __getitem__(self, index: int | slice) -> R | tuple[R, ...]:
        if isinstance(index, slice):
            return tuple(self._build(i) for i in range(*index.indices(len(self._built))))
        if index < 0:
            index += len(self._built)
        if not 0 <= index < len(self._built):
            raise IndexError("shard index out of range")
        return self._build(index)

    def __iter__(self) -> Iterator[R]:
        for i in range(len(self._built)):
            yield self._build(i)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{len(self)} shards (compact)>"

    def column(self, name: str) -> Sequence[Any]:
        """The raw values of one field (``uri`` values with the prefix restored)."""
        if name == "uri":
            return self.uris()
        if name == "storage_identity":  # JSON texts when the page came packed
            return [json.loads(v) if isinstance(v, str) else v for v in self._columns[name]]
        return self._columns[name]

    def raw_slice(self, start: int, end: int) -> tuple[str, dict[str, list[Any]]]:
        """``(uri_prefix, columns)`` of the items ``start:end`` in the compact form."""
        return self._prefix, {
            name: values[start:end] if isinstance(values, list) else list(values[start:end])
            for name, values in self._columns.items()
        }

    def uris(self) -> list[str]:
        """Every shard's URI, without building the records."""
        prefix = self._prefix
        return [prefix + u for u in self._columns["uri"]]

    def _build(self, i: int) -> R:
        built = self._built[i]
        if built is None:
            row = {name: values[i] for name, values in self._columns.items()}
            row["uri"] = self._prefix + row["uri"]
            if isinstance(row["storage_identity"], str):  # packed: its JSON text
                row["storage_identity"] = json.loads(row["storage_identity"])
            built = self._built[i] = self._record_type.from_json(row)
        return built

"""An in-process cache of committed versions (with their shards), keyed by version id.

Everything about a committed version is immutable except its state and deprecation
(``state``, ``deprecated_at``, ``deprecated_reason``); those are read from the database on every
request and laid over the cached record, as are aliases and ``latest``, which are resolved live.
So the cache needs no invalidation.  It is per worker process and bounded by a number of versions
and by the approximate memory its records take (:func:`approximate_bytes`,
``RECORDKEEPER_VERSION_CACHE_BYTES``); least recently used entries go first, and a record larger
than a quarter of the byte budget is not kept at all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import orjson

from recordkeeper_service.domain import VersionRecord

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_CACHE_VERSIONS",
    "DEFAULT_PAGES_BYTES",
    "RenderedPages",
    "VersionCache",
    "approximate_bytes",
]

DEFAULT_CACHE_VERSIONS = 1024
DEFAULT_CACHE_BYTES = 128 * 1024 * 1024

#: Measured with ``tracemalloc`` (CPython 3.11): a committed version record with its rendered
#: splits takes about 1 KiB besides its metadata (counted twice: the dict and its strings), a
#: shard record with a three-key ``storage_identity`` about 1,600 bytes besides its URI and split.
#: The estimate rounds the version up; 10,000 such shards measured 1,686 bytes each, estimated
#: 1,692.
_VERSION_OVERHEAD = 2048
_SHARD_OVERHEAD = 1600


def approximate_bytes(record: VersionRecord) -> int:
    """About how many bytes of memory ``record`` holds: strings by their length, the fixed parts
    by measured sizes (an estimate; computed once per record, when it is cached)."""
    size = _VERSION_OVERHEAD + len(record.name) + len(record.storage_prefix)
    try:
        size += 2 * len(orjson.dumps(record.metadata, option=orjson.OPT_NON_STR_KEYS))
    except TypeError:  # pragma: no cover - stored metadata is plain JSON
        size += 64 * 1024
    for shard in record.shards or ():
        size += _SHARD_OVERHEAD + len(shard.uri) + len(shard.split)
    return size


class VersionCache:
    """LRU of ``version id → VersionRecord`` for committed versions; safe across threads."""

    def __init__(
        self, max_versions: int = DEFAULT_CACHE_VERSIONS, max_bytes: int = DEFAULT_CACHE_BYTES
    ) -> None:
        self.max_versions = max_versions
        self.max_bytes = max_bytes
        self._entries: OrderedDict[int, tuple[VersionRecord, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        #: Called with True (hit) or False (miss) at each look-up: the service's metrics.
        self.on_lookup: Callable[[bool], None] | None = None

    def get(self, version_id: int) -> VersionRecord | None:
        with self._lock:
            entry = self._entries.get(version_id)
            if entry is not None:
                self._entries.move_to_end(version_id)
        if self.on_lookup is not None:
            self.on_lookup(entry is not None)
        return entry[0] if entry is not None else None

    def put(self, record: VersionRecord) -> None:
        """Remember ``record`` (of a committed version); very large versions are not kept."""
        size = approximate_bytes(record)
        if size > self.max_bytes // 4:
            return
        with self._lock:
            previous = self._entries.pop(record.id, None)
            if previous is not None:
                self._bytes -= previous[1]
            self._entries[record.id] = (record, size)
            self._bytes += size
            while len(self._entries) > self.max_versions or self._bytes > self.max_bytes:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._bytes -= evicted

    @property
    def bytes(self) -> int:
        """The approximate memory the cached records take."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)


#: The default budget of :class:`RenderedPages` (``RECORDKEEPER_SHARD_PAGES_CACHE_BYTES``).
DEFAULT_PAGES_BYTES = 128 * 2**20


class RenderedPages:
    """Rendered answers that never change under their key, by key: answers about published
    versions (shard pages, version answers) and upstream lineage answers (keyed by checkpoint
    and lineage epoch).

    Least recently used first out, bounded by total bytes; an answer larger than a quarter of
    the budget is not kept (so ``max_bytes=0`` keeps none).  Per worker process, like
    :class:`VersionCache`.
    """

    def __init__(self, max_bytes: int = DEFAULT_PAGES_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        #: Called with True (hit) or False (miss) at each look-up: the service's metrics.
        self.on_lookup: Callable[[bool], None] | None = None

    def get(self, key: Hashable) -> bytes | None:
        with self._lock:
            data = self._entries.get(key)
            if data is not None:
                self._entries.move_to_end(key)
        if self.on_lookup is not None:
            self.on_lookup(data is not None)
        return data

    def put(self, key: Hashable, data: bytes) -> None:
        if len(data) > self.max_bytes // 4:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            self._bytes += len(data) - (len(previous) if previous is not None else 0)
            self._entries[key] = data
            while self._bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= len(evicted)

    @property
    def bytes(self) -> int:
        """The bytes the kept answers take."""
        return self._bytes

"""An in-process cache of committed versions (with their shards), keyed by version id.

Everything about a committed version is immutable except its state and deprecation
(``state``, ``deprecated_at``, ``deprecated_reason``); those are read from the database on every
request and laid over the cached record, as are aliases and ``latest``, which are resolved live.
So the cache needs no invalidation.  It is per worker process and bounded by versions and by the
total number of shards it holds (least recently used entries go first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from recordkeeper_service.domain import VersionRecord

__all__ = ["VersionCache"]


def _weight(record: VersionRecord) -> int:
    return 1 + (len(record.shards) if record.shards is not None else 0)


class VersionCache:
    """LRU of ``version id → VersionRecord`` for committed versions; safe across threads."""

    def __init__(self, max_versions: int = 1024, max_shards: int = 200_000) -> None:
        self.max_versions = max_versions
        self.max_shards = max_shards
        self._entries: OrderedDict[int, VersionRecord] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, version_id: int) -> VersionRecord | None:
        with self._lock:
            record = self._entries.get(version_id)
            if record is not None:
                self._entries.move_to_end(version_id)
            return record

    def put(self, record: VersionRecord) -> None:
        """Remember ``record`` (of a committed version); very large versions are not kept."""
        weight = _weight(record)
        if weight > self.max_shards // 4:
            return
        with self._lock:
            previous = self._entries.pop(record.id, None)
            if previous is not None:
                self._weight -= _weight(previous)
            self._entries[record.id] = record
            self._weight += weight
            while len(self._entries) > self.max_versions or self._weight > self.max_shards:
                _, evicted = self._entries.popitem(last=False)
                self._weight -= _weight(evicted)

    def __len__(self) -> int:
        return len(self._entries)

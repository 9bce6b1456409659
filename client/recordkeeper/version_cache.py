"""What a client keeps of the versions it resolved: answers by ``ETag``, shard lists by content.

A committed version never changes its shards, so a client that fetched them once keeps them,
keyed by what identifies that content for good — the version's name *and* content digest —
never by a reference such as ``coco@latest`` or an alias, which move.  Each resolve still asks
the service what the reference designates now; the service answers ``304 Not Modified`` when
that is a version answer the client holds (its ``ETag``), and the shard list comes from here.

Both parts are bounded: answers by count, shard lists by total shards (least recently used
first out).  Staged versions (no content digest, shards still changing) are never kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from recordkeeper.values import Split

__all__ = ["DEFAULT_MAX_ANSWERS", "DEFAULT_MAX_SHARDS", "VersionCache"]

DEFAULT_MAX_ANSWERS = 256
DEFAULT_MAX_SHARDS = 1_000_000
#: At most this many held answers are offered to the service per request.
MAX_OFFERED_TAGS = 8


class VersionCache:
    """Version answers by ``ETag`` and shard lists by ``(name, content_digest)``."""

    def __init__(
        self, max_answers: int = DEFAULT_MAX_ANSWERS, max_shards: int = DEFAULT_MAX_SHARDS
    ) -> None:
        self.max_answers = max_answers
        self.max_shards = max_shards
        self._answers: OrderedDict[str, tuple[str, dict[str, Any]]] = OrderedDict()
        self._splits: OrderedDict[tuple[str, str], tuple[Mapping[str, Split], int]] = OrderedDict()
        self._shards = 0
        self._lock = threading.Lock()

    # -- answers (the version without shards), by entity tag --------------------------------

    def offered_tags(self, dataset: str) -> list[str]:
        """The entity tags of held answers about ``dataset``, most recent first."""
        with self._lock:
            tags = [tag for tag, (ds, _) in reversed(self._answers.items()) if ds == dataset]
        return tags[:MAX_OFFERED_TAGS]

    def answer(self, etag: str) -> dict[str, Any] | None:
        """A copy of the held answer with this entity tag."""
        with self._lock:
            entry = self._answers.get(etag)
            if entry is None:
                return None
            self._answers.move_to_end(etag)
            return dict(entry[1])

    def keep_answer(self, etag: str, body: Mapping[str, Any]) -> None:
        with self._lock:
            self._answers[etag] = (str(body["dataset"]), dict(body))
            self._answers.move_to_end(etag)
            while len(self._answers) > self.max_answers:
                self._answers.popitem(last=False)

    # -- shard lists, by content ------------------------------------------------------------

    def splits(self, name: str, content_digest: str) -> Mapping[str, Split] | None:
        with self._lock:
            entry = self._splits.get((name, content_digest))
            if entry is None:
                return None
            self._splits.move_to_end((name, content_digest))
            return entry[0]

    def keep_splits(self, name: str, content_digest: str, splits: Mapping[str, Split]) -> None:
        """Keep the splits of a published version (unless larger than the whole budget)."""
        weight = sum(s.shard_count for s in splits.values())
        if weight > self.max_shards:
            return
        key = (name, content_digest)
        with self._lock:
            previous = self._splits.pop(key, None)
            if previous is not None:
                self._shards -= previous[1]
            self._splits[key] = (splits, weight)
            self._shards += weight
            while self._shards > self.max_shards:
                _, (_, evicted) = self._splits.popitem(last=False)
                self._shards -= evicted

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._answers.clear()
            self._splits.clear()
            self._shards = 0

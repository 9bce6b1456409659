"""What upstream answers show of each version, kept per process: :class:`VersionFactsCache`.

An upstream answer shows, for each version along the chain, its name, dataset, number, content
digest and state.  Only versions that were committed train checkpoints, and of a committed
version everything but the state is fixed (names are not reused; datasets are not renamed).  So
those four facts are kept by version id with no invalidation, and the state is read with the
upstream walk itself (:func:`~.queries.upstream_rows`).  Looking the facts up costs PostgreSQL
~1,000 index probes per long chain, about half of the walk's time; a running service soon holds
the facts of the versions its checkpoints trained on.

Bounded by a number of versions: when full, it starts again empty (the facts are cheap to
read again, and a plain dict keeps each look-up fast).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from recordkeeper_service.repository.lineage.queries import VersionFacts

__all__ = ["DEFAULT_MAX_VERSIONS", "VersionFactsCache"]

#: ~420 bytes each (measured with tracemalloc: four strings and an int in a tuple, a dict slot):
#: ~21 MB when full
DEFAULT_MAX_VERSIONS = 50_000


class VersionFactsCache:
    """``version id → VersionFacts``, filled on demand; safe across threads."""

    def __init__(self, max_versions: int = DEFAULT_MAX_VERSIONS) -> None:
        self._max = max(0, max_versions)
        self._facts: dict[int, VersionFacts] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._facts)

    def lookup(
        self,
        ids: Iterable[int],
        load: Callable[[set[int]], dict[int, VersionFacts]],
    ) -> dict[int, VersionFacts]:
        """The facts of ``ids``: those kept, and ``load(missing ids)`` for the rest (kept)."""
        kept = self._facts
        found: dict[int, VersionFacts] = {}
        missing: set[int] = set()
        for vid in ids:
            facts = kept.get(vid)
            if facts is None:
                missing.add(vid)
            else:
                found[vid] = facts
        if missing:
            loaded = load(missing)
            found.update(loaded)
            if len(loaded) <= self._max:
                with self._lock:
                    if len(self._facts) + len(loaded) > self._max:
                        self._facts = {}
                    self._facts.update(loaded)
        return found

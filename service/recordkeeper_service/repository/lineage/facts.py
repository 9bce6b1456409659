"""What upstream answers show of each version, kept per process: :class:`VersionsShownCache`.

An upstream answer shows, for each version along the chain, its name, dataset, number, content
digest, state and data state.  Looking them up costs PostgreSQL ~1,000 index probes for a long
chain, as much again as the walk itself; a running service soon holds the versions its checkpoints
trained on.  So they are kept by version id, in two parts:

* the **facts** (name, dataset, number, digest): only committed versions train checkpoints, and
  of a committed version these are fixed (names are not reused, datasets are not renamed) —
  kept with no invalidation;
* the **states** (:class:`~.queries.VersionState`: the version's state and its data state): a
  version's state, and whether retention released or deleted its data, change only with a bump
  of the lineage epoch (:mod:`.epoch`), which a request reads with its checkpoint.  States are
  kept for one epoch: a request at a newer epoch starts them again, one at an older epoch
  neither reads nor keeps them, and what is read for epoch E is kept only while the kept states
  are still those of E.  So an answer tagged E shows states read after E was, as the uncached
  walk would.

Bounded by a number of versions: when full, both start again empty (they are cheap to read
again, and plain dicts keep each look-up fast).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping

from recordkeeper_service.repository.lineage.queries import VersionFacts, VersionState

__all__ = ["DEFAULT_MAX_VERSIONS", "VersionsShownCache"]

#: ~420 bytes each for the facts (measured with tracemalloc: four strings and an int in a
#: tuple, a dict slot), plus ~200 for the state (a VersionState and its dict slot; ~330 for a
#: version whose data was deleted, with its time and reason): ~31 MB when full
DEFAULT_MAX_VERSIONS = 50_000

#: ``load(ids)``: the facts and current state of each of ``ids`` (a query)
Loader = Callable[[set[int]], dict[int, tuple[VersionFacts, VersionState]]]


class VersionsShownCache:
    """``version id → VersionFacts`` and (per lineage epoch) ``→ VersionState``; safe across
    threads."""

    def __init__(self, max_versions: int = DEFAULT_MAX_VERSIONS) -> None:
        self._max = max(0, max_versions)
        self._facts: dict[int, VersionFacts] = {}
        self._states: dict[int, VersionState] = {}
        self._epoch = -1
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._facts)

    def lookup(
        self, ids: Collection[int], epoch: int, load: Loader
    ) -> tuple[Mapping[int, VersionFacts], Mapping[int, VersionState]]:
        """Facts and states of ``ids`` as of lineage epoch ``epoch`` (or newer): those kept,
        and ``load(the others)``, which are kept in turn (the mappings may be the kept ones)."""
        with self._lock:
            if epoch > self._epoch:
                self._states, self._epoch = {}, epoch
            current = epoch == self._epoch
            kept_facts, kept_states = self._facts, self._states if current else {}
        # a state is kept only with its facts: every id with a state has both
        missing = set(ids).difference(kept_states)  # in C
        if not missing:
            return kept_facts, kept_states
        loaded = load(missing)
        if len(loaded) <= self._max:
            with self._lock:
                if len(self._facts) + len(loaded) > self._max:
                    self._facts, self._states = {}, {}
                for vid, (fact, state) in loaded.items():
                    self._facts[vid] = fact
                    if self._epoch == epoch:
                        self._states[vid] = state
                if self._facts is kept_facts and self._states is kept_states:
                    return kept_facts, kept_states  # they now hold every id: no copies
        facts = {vid: kept_facts[vid] for vid in ids if vid not in missing}
        states = {vid: kept_states[vid] for vid in facts}
        for vid, (fact, state) in loaded.items():
            facts[vid], states[vid] = fact, state
        return facts, states

"""Compare two versions (the rules are :mod:`recordkeeper.core.diff`, shared with the client).

Both versions are resolved as ``GET /versions/{ref}`` resolves them (committed ones from the
version cache), and their merged schemas are read only when the schema digests differ.  A
version without a merged schema (staged, or shards registered without one) compares as an empty
schema.

The diff of two *published* versions never changes (their shards and schemas are immutable):
:meth:`DiffRepository.key` names it by both version ids and content digests, the route keeps
its rendered pages under that key (:attr:`DiffRepository.rendered`), and the last few computed
diffs are kept whole so that paging through one does not compute it again.  Computing a diff
costs ~0.1 s of worker CPU per 10,000 shards, so a worker computes one at a time
(:meth:`DiffRepository.compare`): clients asking for many different diffs at once wait for each
other instead of taking the whole process from every other reader (issue 21: four such clients
raised other readers' median latency from 4 ms to 148 ms).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence

from recordkeeper.core import diff as core_diff
from recordkeeper.core.derive import refuse_staged_derived
from recordkeeper.core.schema import Schema
from recordkeeper_service.db import Database
from recordkeeper_service.domain import ShardRecord, VersionRecord
from recordkeeper_service.repository.cache import RenderedPages
from recordkeeper_service.repository.derived_diff import common_prefixes, shards_after, split_totals
from recordkeeper_service.repository.schemas import SchemaRepository
from recordkeeper_service.repository.versions import VersionRepository

__all__ = ["DIFF_CACHE_BYTES", "KEPT_DIFFS", "DiffRepository"]

#: The rendered diff pages kept per worker process.
DIFF_CACHE_BYTES = 32 * 2**20
#: Computed diffs of published versions kept whole per worker (for their other pages).
KEPT_DIFFS = 4


class DiffRepository:
    """``diff(old, new)``: each version is read in its own read-only transaction; committed
    versions are immutable, so the two reads compare what each reference named at the time."""

    def __init__(
        self,
        db: Database,
        versions: VersionRepository,
        schemas: SchemaRepository,
        *,
        cache_bytes: int = DIFF_CACHE_BYTES,
    ) -> None:
        self._db = db
        self._versions = versions
        self._schemas = schemas
        #: Rendered pages of diffs between published versions, by ``(key(...), page...)``.
        self.rendered = RenderedPages(cache_bytes)
        self._kept: OrderedDict[Hashable, core_diff.VersionDiff[ShardRecord]] = OrderedDict()
        self._computing = threading.Lock()

    def _side(
        self,
        version: VersionRecord,
        shards: Sequence[ShardRecord] | None = None,
        totals: Mapping[str, tuple[int, int]] | None = None,
    ) -> core_diff.DiffSide[ShardRecord]:
        """The version as the rule reads it: its shards (or ``shards``, part of them, with the
        whole version's ``totals``)."""
        digest = version.schema_digest

        def schema() -> Schema:
            if digest is None:
                return Schema()
            return Schema.from_dict(self._schemas.get(digest).schema)

        return core_diff.DiffSide(
            name=version.name,
            content_digest=version.content_digest,
            schema_digest=digest,
            shards=(version.shards or ()) if shards is None else shards,
            schema=schema,
            totals=totals,
        )

    @staticmethod
    def key(old: VersionRecord, new: VersionRecord) -> Hashable | None:
        """The name of the diff from ``old`` to ``new`` when it can never change (both
        published), else ``None``."""
        if not (old.published and new.published):
            return None
        return ("diff", old.id, old.content_digest, new.id, new.content_digest)

    def compare(self, old: VersionRecord, new: VersionRecord) -> core_diff.VersionDiff[ShardRecord]:
        """The diff between two resolved versions (with their shards), computed one at a time
        per worker; the last :data:`KEPT_DIFFS` between published versions are kept."""
        return self._kept_or(
            old, new, lambda: core_diff.diff_versions(self._side(old), self._side(new))
        )

    def derived(
        self, old: VersionRecord, new: VersionRecord
    ) -> core_diff.VersionDiff[ShardRecord] | None:
        """The diff of two published versions (resolved without their shards) when one is
        derived from the other: from the rows after the positions both hold alike and the
        stored split totals (:mod:`.derived_diff`), in proportion to the change.  None when
        they are not so related (or the derivation predates ``version_splits``)."""
        if self.key(old, new) is None:
            return None
        with self._db.transaction(write=False) as session:
            prefixes = common_prefixes(session, old.id, new.id)
            if prefixes is None:
                return None
            old_totals = split_totals(session, old.id)
            new_totals = split_totals(session, new.id)
            if old_totals is None or new_totals is None:
                return None
            # positions both hold alike: within both versions' split (a chain's prefix is
            # never longer, but the stored rows are not trusted further than that)
            common = {
                split: min(n, old_totals[split][1], new_totals[split][1])
                for split, n in prefixes.items()
                if split in old_totals and split in new_totals
            }
            old_rows = shards_after(session, old.id, {s: common.get(s, 0) for s in old_totals})
            new_rows = shards_after(session, new.id, {s: common.get(s, 0) for s in new_totals})
        return self._kept_or(
            old,
            new,
            lambda: dataclasses.replace(
                core_diff.diff_versions(
                    self._side(old, old_rows, old_totals),
                    self._side(new, new_rows, new_totals),
                    common=sum(common.values()),
                ),
                basis="derivation",
            ),
        )

    def _kept_or(
        self,
        old: VersionRecord,
        new: VersionRecord,
        compute: Callable[[], core_diff.VersionDiff[ShardRecord]],
    ) -> core_diff.VersionDiff[ShardRecord]:
        """The kept diff of the pair, or ``compute()`` (one at a time per worker), kept when
        both are published."""
        key = self.key(old, new)
        with self._computing:
            if key is not None and key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
            result = compute()
            if key is not None:
                self._kept[key] = result
                while len(self._kept) > KEPT_DIFFS:
                    self._kept.popitem(last=False)
            return result

    def between(self, old: VersionRecord, new: VersionRecord) -> core_diff.VersionDiff[ShardRecord]:
        """The diff of two versions resolved without their shards: from the derivation when
        one is derived from the other (:meth:`derived`), else on both versions' shards.  A
        derived version still staged is refused (:func:`.core.derive.refuse_staged_derived`)."""
        for version in (old, new):
            parents = (version.provenance or {}).get("parents") or ()
            refuse_staged_derived(
                version.name, version.state, any(p.get("role") == "base" for p in parents)
            )
        found = self.derived(old, new)
        if found is not None:
            return found
        return self.compare(
            self._versions.resolve(old.name, shards=True),
            self._versions.resolve(new.name, shards=True),
        )

    def diff(self, old_ref: str, new_ref: str) -> core_diff.VersionDiff[ShardRecord]:
        """What changed from the version ``old_ref`` names to the one ``new_ref`` names
        (:meth:`between`)."""
        return self.between(
            self._versions.resolve(old_ref, shards=False),
            self._versions.resolve(new_ref, shards=False),
        )

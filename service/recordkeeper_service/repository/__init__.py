"""The repository layer: every database read and write of the service.

Routes call these methods and never touch a session.  Each public method runs in exactly one
transaction (:meth:`recordkeeper_service.db.Database.transaction`) and returns domain records
(:mod:`recordkeeper_service.domain`), never ORM rows.

=================  ===========================================================
module             resource
=================  ===========================================================
``datasets``       create, get, list
``versions``       stage, resolve, list, abandon, deprecate
``shards``         bulk registration
``commit``         completeness, digests, schema merge, duplicates
``aliases``        set/move/delete with history; implicit ``latest``
``schemas``        content-addressed schema bodies
``diff``           compare two versions (rules in ``recordkeeper.core.diff``)
``events``         audit log (written by every state change)
``tokens``         API tokens (hashes only)
``resolve``        the reference grammar → a version row (session level)
``cache``          committed versions by id (immutable parts), rendered answers, per process
``fastpath``       the resolve query on asyncio psycopg (PostgreSQL hot path)
``sqlite_hot``     the resolve query on a plain ``sqlite3`` connection (SQLite hot path)
``gc``             garbage-collection candidates, marking storage collected
``retention``      retention policies, pins, plans, claims deleting expired versions' data
``provenance``     a version's parents, sources, producer, params (stored at stage)
``history``        a dataset's log; the children of a version, the versions from a source
``verifications``  failed verifications reported by clients (audit event, metrics)
``record_sets``    record identity of versions (split set digests, records digest look-up)
``record_diffs``   stored record diffs of version pairs (computed by clients from indexes)
``samples``        sample records of versions (decoded by the publishing client)
``leakage``        leakage policies of datasets, check results of versions, the policy at commit
``lineage``        models, runs, checkpoints, upstream/downstream, graph, and the
                   ``version_in_use`` guard (a package: queries, assembly, records)
=================  ===========================================================
"""

from __future__ import annotations

from recordkeeper.core.roots import AllowedRoots
from recordkeeper_service import migrate
from recordkeeper_service.db import Database
from recordkeeper_service.metrics import ServiceMetrics
from recordkeeper_service.repository.aliases import AliasRepository
from recordkeeper_service.repository.cache import (
    DEFAULT_CACHE_BYTES,
    DEFAULT_PAGES_BYTES,
    VersionCache,
)
from recordkeeper_service.repository.commit import CommitRepository
from recordkeeper_service.repository.datasets import DatasetRepository
from recordkeeper_service.repository.diff import DiffRepository
from recordkeeper_service.repository.events import EventRepository
from recordkeeper_service.repository.fastpath import AsyncPostgresReader
from recordkeeper_service.repository.gc import GcRepository
from recordkeeper_service.repository.history import ProvenanceRepository
from recordkeeper_service.repository.leakage import LeakageRepository
from recordkeeper_service.repository.lineage import LineageRepository
from recordkeeper_service.repository.record_diffs import RecordDiffRepository
from recordkeeper_service.repository.record_sets import RecordSetRepository
from recordkeeper_service.repository.retention import RetentionRepository
from recordkeeper_service.repository.samples import SampleRepository
from recordkeeper_service.repository.schemas import SchemaRepository
from recordkeeper_service.repository.shards import ShardRepository
from recordkeeper_service.repository.sqlite_hot import SqliteHotReader
from recordkeeper_service.repository.tokens import TokenRepository
from recordkeeper_service.repository.verifications import VerificationRepository
from recordkeeper_service.repository.versions import VersionRepository
from recordkeeper_service.settings import DEFAULT_LINEAGE_CACHE_BYTES

__all__ = ["Repository"]


class Repository:
    """All resource repositories over one :class:`Database`."""

    def __init__(
        self,
        db: Database,
        *,
        allowed_roots: AllowedRoots,
        storage_root: str,
        version_cache_bytes: int = DEFAULT_CACHE_BYTES,
        shard_pages_cache_bytes: int = DEFAULT_PAGES_BYTES,
        lineage_cache_bytes: int = DEFAULT_LINEAGE_CACHE_BYTES,
        metrics: ServiceMetrics | None = None,
    ) -> None:
        """``metrics``: where commits and shard registrations are counted (none: not counted)."""
        self.db = db
        self.datasets = DatasetRepository(db)
        fast_reader = None if db.is_sqlite else AsyncPostgresReader(db.url, size=db.pool_size)
        self.versions = VersionRepository(
            db,
            allowed_roots,
            storage_root,
            cache=VersionCache(max_bytes=version_cache_bytes),
            fast_reader=fast_reader,
            pages_bytes=shard_pages_cache_bytes,
            sqlite_reader=SqliteHotReader.for_url(db.url),
        )
        self.shards = ShardRepository(db, allowed_roots, metrics=metrics)
        self.commits = CommitRepository(db, metrics=metrics)
        self.aliases = AliasRepository(db)
        self.schemas = SchemaRepository(db)
        self.diffs = DiffRepository(db, self.versions, self.schemas)
        self.provenance = ProvenanceRepository(db, self.versions, self.diffs)
        self.events = EventRepository(db)
        self.tokens = TokenRepository(db)
        self.gc = GcRepository(db)
        self.retention = RetentionRepository(db, allowed_roots)
        self.lineage = LineageRepository(db, cache_bytes=lineage_cache_bytes)
        self.verifications = VerificationRepository(db, metrics=metrics)
        self.record_sets = RecordSetRepository(db)
        self.record_diffs = RecordDiffRepository(db)
        self.samples = SampleRepository(db)
        self.leakage = LeakageRepository(db)

    def migration_status(self) -> migrate.MigrationStatus:
        """Where the database stands against this release's migrations (``/readyz``)."""
        return migrate.status(self.db)

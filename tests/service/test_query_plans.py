"""Query plans of the hot reads on PostgreSQL at scale: indexes used, no sequential scan of a big
table.

A fresh database is filled with bulk ``INSERT … SELECT generate_series`` (10,000 committed
versions with 20 shards each, 1,000 models x chains of 100 checkpoints = 100,000 checkpoints,
1,000,000 checkpoint → version edges) and ``ANALYZE``\\d.  Each hot repository method is then
called for real while SQLAlchemy reports every statement it sends
(``before_cursor_execute``); each captured ``SELECT`` is explained with its own parameters, in
the same order and transaction settings (the lineage walks' ``SET LOCAL``-style
``set_config``), with ``EXPLAIN (FORMAT JSON)``.  The SQL is the repository's own, never a copy.

No timing is asserted: a plan is the property that keeps a query fast as the tables grow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import event, text

from recordkeeper.core.errors import VersionNotFound
from recordkeeper.core.roots import AllowedRoots
from recordkeeper_service import migrate
from recordkeeper_service.db import Database
from recordkeeper_service.repository.lineage import LineageRepository
from recordkeeper_service.repository.versions import VersionRepository

pytestmark = pytest.mark.postgres

#: Tables that grow with use; a sequential scan of one of them in a hot read is a failure.
BIG_TABLES = {"versions", "shards", "checkpoints", "checkpoint_data"}

_FILL = [
    """INSERT INTO datasets (id, name, description, next_number, created_at, created_by)
       SELECT d, 'ds' || d, '', 101, now(), 'test' FROM generate_series(1, 100) AS d""",
    """INSERT INTO versions (id, dataset_id, number, name, date, convention, state,
           storage_prefix, content_digest, record_count, shard_count, size, metadata,
           created_at, created_by, committed_at)
       SELECT v, (v - 1) / 100 + 1, (v - 1) % 100 + 1,
              'ds' || ((v - 1) / 100 + 1) || '_20231015_v' || ((v - 1) % 100 + 1),
              DATE '2023-10-15', 'rk1', 'committed', 'file:///data/' || v || '/',
              'sha256:' || md5(v::text) || md5('c' || v), 200, 20, 2000, '{}', now(), 'test',
              now()
       FROM generate_series(1, 10000) AS v""",
    """INSERT INTO shards (version_id, split, "index", count, uri, compression, size, sha256,
           crc32c, records_sha256, record_count, storage_identity, registered_at)
       SELECT v, 'train', i, 20,
              'file:///data/' || v || '/train-' || lpad(i::text, 5, '0') || '-of-00020.tfrecord',
              'none', 100, md5(v || ':' || i) || md5(i || ':' || v), '00000000',
              md5('r' || v || ':' || i) || md5('q' || i), 10, NULL, now()
       FROM generate_series(1, 10000) AS v, generate_series(0, 19) AS i""",
    """INSERT INTO models (id, name, created_at, created_by)
       SELECT k, 'model' || k, now(), 'test' FROM generate_series(1, 1000) AS k""",
    """INSERT INTO runs (id, model_id, name, created_at, created_by)
       SELECT k, k, 'run' || k, now(), 'test' FROM generate_series(1, 1000) AS k""",
    """INSERT INTO checkpoints (id, model_id, run_id, name, step, uri, parent_id, parent_kind,
           saved_models, metrics, metadata, created_at, created_by)
       SELECT c, (c - 1) / 100 + 1, (c - 1) / 100 + 1, 'ckpt-' || ((c - 1) % 100 + 1),
              ((c - 1) % 100 + 1) * 1000,
              's3://models/' || c,
              CASE WHEN (c - 1) % 100 = 0 THEN NULL ELSE c - 1 END,
              CASE WHEN (c - 1) % 100 = 0 THEN NULL ELSE 'restored_from' END,
              '[]', '{}', '{}', now(), 'test'
       FROM generate_series(1, 100000) AS c""",
    # ten distinct versions per checkpoint (j * 4729 mod 10000 differs for j = 0..9)
    """INSERT INTO checkpoint_data (checkpoint_id, version_id, split, role)
       SELECT c, ((c * 7919 + j * 4729) % 10000) + 1, 'train', 'train'
       FROM generate_series(1, 100000) AS c, generate_series(0, 9) AS j""",
    *(
        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
        for table in ("datasets", "versions", "models", "runs", "checkpoints")
    ),
]


@pytest.fixture(scope="module")
def big_database(postgres_server: Any) -> Iterator[Database]:
    """The filled, analysed database (module scope: filling takes a while)."""
    url = postgres_server.create_database()
    db = Database(url, pool_size=2)
    try:
        migrate.upgrade(db)
        with db.engine.begin() as conn:
            for statement in _FILL:
                conn.execute(text(statement))
        with db.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
        yield db
    finally:
        db.dispose()
        postgres_server.drop_database(url)


class Captured:
    """Statements SQLAlchemy sends while a block runs (executemany batches excluded)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.statements: list[tuple[str, Any]] = []

    def __enter__(self) -> Captured:
        event.listen(self.db.engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self.db.engine, "before_cursor_execute", self._seen)

    def _seen(
        self, conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool
    ) -> None:
        if not many:
            self.statements.append((statement, params))


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def explain(db: Database, statements: list[tuple[str, Any]]) -> list[tuple[str, list[Any]]]:
    """``(sql, plan nodes)`` of each captured query, replayed in order in one transaction."""
    plans = []
    raw = db.engine.raw_connection()
    try:
        cursor = raw.cursor()
        for sql, params in statements:
            head = sql.lstrip().upper()
            if head.startswith("SELECT SET_CONFIG"):
                cursor.execute(sql, params)  # the walk's planner settings, as in the repository
                continue
            if not head.startswith(("SELECT", "WITH")):
                continue
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
            (document,) = cursor.fetchone()
            plans.append((sql, list(_nodes(document[0]["Plan"]))))
        raw.rollback()
    finally:
        raw.close()
    return plans


def scans(nodes: list[dict[str, Any]]) -> list[tuple[str, str | None, str | None]]:
    """``(node type, table, index)`` of every scan in a plan."""
    return [
        (n["Node Type"], n.get("Relation Name"), n.get("Index Name"))
        for n in nodes
        if "Scan" in n["Node Type"]
    ]


def check(db: Database, work: Callable[[], Any], *, must_use: set[str]) -> list[Any]:
    """Run ``work``, explain what it sent; fail on a sequential scan of a big table and
    unless every index in ``must_use`` appears in some plan."""
    with Captured(db) as captured:
        work()
    plans = explain(db, captured.statements)
    assert plans, "the repository sent no query"
    used: set[str] = set()
    for sql, nodes in plans:
        found = scans(nodes)
        bad = [
            (kind, table) for kind, table, _ in found if kind == "Seq Scan" and table in BIG_TABLES
        ]
        assert not bad, f"sequential scan of {bad} in:\n{sql}\nplan scans: {found}"
        used |= {index for _, _, index in found if index}
    assert must_use <= used, f"expected {sorted(must_use)} among the indexes used: {sorted(used)}"
    return plans


def test_the_check_catches_a_sequential_scan(big_database: Database) -> None:
    # no index on shards.crc32c: the check must fail on this query, or it checks nothing
    def work() -> None:
        big_database.read(
            lambda conn: conn.execute(
                text("SELECT uri FROM shards WHERE crc32c = :c"), {"c": "00000001"}
            ).all()
        )

    with pytest.raises(AssertionError, match="sequential scan of \\[\\('Seq Scan', 'shards'"):
        check(big_database, work, must_use=set())


@pytest.fixture
def versions(big_database: Database) -> VersionRepository:
    return VersionRepository(big_database, AllowedRoots(["file:///data/"]), "file:///data/")


@pytest.fixture
def lineage(big_database: Database) -> LineageRepository:
    return LineageRepository(big_database)


def test_resolve_every_reference_form(big_database: Database, versions: VersionRepository) -> None:
    def work() -> None:
        for ref in (
            "ds42@latest",
            "ds42@v7",
            "ds42_20231015_v7",
            "ds42@sha256:" + "0" * 12,
            "ds42@records:sha256:" + "0" * 12,
        ):
            # the digest prefixes match nothing: the explanation's queries are checked too
            with pytest.raises(VersionNotFound) if "sha256" in ref else contextlib.nullcontext():
                versions.resolve(ref)

    check(
        big_database,
        work,
        must_use={"uq_versions_dataset_id_number", "uq_shards_version_id_split_index"},
    )


def test_versions_listing(big_database: Database, versions: VersionRepository) -> None:
    check(
        big_database,
        lambda: versions.list("ds42", state=None, since=None, until=None, limit=100, offset=0),
        must_use={"uq_versions_dataset_id_number"},
    )


def test_shard_pages(big_database: Database, versions: VersionRepository) -> None:
    record = versions.resolve("ds42@v7", shards=False)

    def work() -> None:
        versions.shard_page(record, after=None, limit=5)
        versions.shard_page(record, after="train:4", limit=5)
        for packed in (False, True):  # the compact and packed forms, rendered from the rows
            versions.compact_page(record, after=None, limit=5, packed=packed)
            versions.compact_page(record, after="train:4", limit=5, packed=packed)

    check(big_database, work, must_use={"uq_shards_version_id_split_index"})


def test_lineage_upstream(big_database: Database, lineage: LineageRepository) -> None:
    answer = lineage.lineage("model7/ckpt-100")
    assert len(answer.chain) == 100  # the complete chain: the query does what it claims
    check(
        big_database,
        lambda: lineage.lineage("model7/ckpt-100"),
        must_use={"pk_checkpoints", "pk_checkpoint_data"},
    )
    # a worker that has not seen these versions yet reads what the answer shows of them
    check(
        big_database,
        lambda: LineageRepository(big_database).lineage("model8/ckpt-100"),
        must_use={"pk_checkpoints", "pk_checkpoint_data", "pk_versions"},
    )
    # the route's answer over versions the worker has seen: the head, then the walk with the
    # segments' counts (the split sums of ~700 versions not seen yet scan shards, as they did
    # before the counts joined the walk: a worker's first sight of them)
    lineage.answer_from(lineage.lineage_head("model7/ckpt-100"))
    check(
        big_database,
        lambda: lineage.answer_from(lineage.lineage_head("model7/ckpt-100")),
        must_use={"pk_checkpoints", "pk_checkpoint_data"},
    )


def test_consumers_direct_and_transitive(
    big_database: Database, lineage: LineageRepository
) -> None:
    check(
        big_database,
        lambda: lineage.consumers("ds42@v7", transitive=False),
        must_use={"ix_checkpoint_data_version_id_checkpoint_id"},
    )
    check(
        big_database,
        lambda: lineage.consumers("ds42@v7", transitive=True),
        must_use={"ix_checkpoint_data_version_id_checkpoint_id", "ix_checkpoints_parent_id_id"},
    )


def test_shard_consumers(big_database: Database, lineage: LineageRepository) -> None:
    uri = "file:///data/4207/train-00003-of-00020.tfrecord"
    found = lineage.shard_consumers(uri=uri, transitive=False)
    assert found.shards and found.shards[0]["uri"] == uri
    check(
        big_database,
        lambda: lineage.shard_consumers(uri=uri),
        must_use={"ix_shards_uri", "ix_checkpoint_data_version_id_checkpoint_id"},
    )
    sha = found.shards[0]["sha256"]
    check(
        big_database,
        lambda: lineage.shard_consumers(sha256=sha, transitive=False),
        must_use={"ix_shards_sha256"},
    )

"""per-split totals of committed versions, and a derived version's prefix kept from its base

Revision ID: a7c3e5d9b1f2
Revises: 3b8c6d0e5f14
Create Date: 2026-12-02 12:30:00.000000

``version_splits``: one row per split of a committed (or deprecated) version with its shard
and record counts and bytes, written by every commit from then on; this revision fills them
for the versions committed before it, with one grouped pass over ``shards``.

``base_prefix``: for the splits of a version derived from another (zero-copy, ``base``), how
many leading positions hold the very rows of the base's split of the same name.  Commits write
it from their derivation plan; it is left NULL here for versions derived before (unknown: a
diff of such a pair compares both versions' rows, as before).

Revisions never import the service's ORM classes: they describe tables as they were when the
revision was written.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "a7c3e5d9b1f2"
down_revision: str | Sequence[str] | None = "3b8c6d0e5f14"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "version_splits",
        sa.Column("version_id", _ID, nullable=False),
        sa.Column("split", sa.String(length=64), nullable=False),
        sa.Column("shard_count", sa.Integer(), nullable=False),
        sa.Column("record_count", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("base_prefix", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["versions.id"],
            name=op.f("fk_version_splits_version_id_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("version_id", "split", name=op.f("pk_version_splits")),
    )
    op.execute(
        "INSERT INTO version_splits (version_id, split, shard_count, record_count, size) "
        "SELECT s.version_id, s.split, COUNT(*), COALESCE(SUM(s.record_count), 0), "
        "COALESCE(SUM(s.size), 0) "
        "FROM shards s JOIN versions v ON v.id = s.version_id "
        "WHERE v.state IN ('committed', 'deprecated') "
        "GROUP BY s.version_id, s.split"
    )


def downgrade() -> None:
    op.drop_table("version_splits")

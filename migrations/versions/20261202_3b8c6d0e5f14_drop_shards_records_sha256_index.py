"""drop the unused index on shards.records_sha256

Revision ID: 3b8c6d0e5f14
Revises: 9d4e1f6a2c37
Create Date: 2026-12-02 09:30:00.000000

No query looks shards up by ``records_sha256`` (it is read with a version's rows, which the
``(version_id, split, index)`` unique index finds), yet every inserted shard row paid for an
entry in ``ix_shards_records_sha256``: a key of random order, so a derived version's commit,
which copies its base's kept rows (``INSERT … SELECT``), touched a random page of it per row
(docs/performance.md, "Session 12: derive").  Rows are kept; only the index goes.

Revisions never import the service's ORM classes: they describe tables as they were when the
revision was written.
"""

from collections.abc import Sequence

from alembic import op

# revision identifiers, used by Alembic.
revision: str = "3b8c6d0e5f14"
down_revision: str | Sequence[str] | None = "9d4e1f6a2c37"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("shards", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_shards_records_sha256"))


def downgrade() -> None:
    with op.batch_alter_table("shards", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_shards_records_sha256"), ["records_sha256"], unique=False
        )

"""shard record format

Revision ID: b7e2c94a1d3f
Revises: 4fbb7a9b4c02
Create Date: 2026-12-01 14:35:00.000000

Shards record their file's format (issue 23): ``shards.format`` is ``tfrecord``,
``array_record`` or ``riegeli``.  Every shard registered before this revision is a TFRecord
file (nothing else could be registered): existing rows get ``tfrecord`` through the server
default.

Revisions never import the service's ORM classes: they describe tables as they were when the
revision was written.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "b7e2c94a1d3f"
down_revision: str | Sequence[str] | None = "4fbb7a9b4c02"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("shards", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("format", sa.String(length=16), server_default="tfrecord", nullable=False)
        )
        batch_op.create_check_constraint(
            op.f("ck_shards_format"), "format IN ('tfrecord', 'array_record', 'riegeli')"
        )


def downgrade() -> None:
    with op.batch_alter_table("shards", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_shards_format"), type_="check")
        batch_op.drop_column("format")

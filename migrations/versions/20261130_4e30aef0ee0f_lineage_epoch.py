"""lineage epoch

Revision ID: 4e30aef0ee0f
Revises: 1ccf43ccea4c
Create Date: 2026-11-30 18:57:36.000000

A registered checkpoint's upstream answer changes only when a state it shows changes (a
checkpoint marked deleted, a version deprecated).  ``lineage_epoch`` is one counter row that
every such change bumps in its own transaction (``repository.lineage.epoch``), so the service
can keep rendered lineage answers keyed by (checkpoint, epoch) and give them an ``ETag``
(issue 12).  The row starts at 0.

Revisions never import the service's ORM classes: they describe tables as they were when the
revision was written.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "4e30aef0ee0f"
down_revision: str | Sequence[str] | None = "1ccf43ccea4c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    epoch = op.create_table(
        "lineage_epoch",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("value", sa.BigInteger(), server_default="0", nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_lineage_epoch_one_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lineage_epoch")),
    )
    op.bulk_insert(epoch, [{"id": 1, "value": 0}])


def downgrade() -> None:
    op.drop_table("lineage_epoch")

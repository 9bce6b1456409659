"""checkpoint consumption

Revision ID: c3d91e5a7b20
Revises: b7e2c94a1d3f
Create Date: 2026-12-01 17:40:00.000000

How much of its data a checkpoint saw (issue 25, item 6): ``checkpoint_consumption``, one row
per (checkpoint, version, role) whose registration counted the records its segment read.
Checkpoints registered before (or without a count) have no row: their share is unknown.

Revisions never import the service's ORM classes: they describe tables as they were when the
revision was written.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "c3d91e5a7b20"
down_revision: str | Sequence[str] | None = "b7e2c94a1d3f"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "checkpoint_consumption",
        sa.Column("checkpoint_id", _ID, nullable=False),
        sa.Column("version_id", _ID, nullable=False),
        sa.Column("role", sa.String(length=8), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "records >= 0", name=op.f("ck_checkpoint_consumption_records_not_negative")
        ),
        sa.ForeignKeyConstraint(
            ["checkpoint_id"],
            ["checkpoints.id"],
            name=op.f("fk_checkpoint_consumption_checkpoint_id_checkpoints"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["versions.id"],
            name=op.f("fk_checkpoint_consumption_version_id_versions"),
        ),
        sa.PrimaryKeyConstraint(
            "checkpoint_id", "version_id", "role", name=op.f("pk_checkpoint_consumption")
        ),
    )


def downgrade() -> None:
    op.drop_table("checkpoint_consumption")

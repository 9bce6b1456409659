"""sample records of versions

Revision ID: 5a3e9d7c1b46
Revises: c3d8a5e1f0b2
Create Date: 2026-12-01 21:30:00.000000

Sample records (issue 26): ``version_samples``, one row per version with the first few records
of each split decoded for the version page, as the publishing client recorded them (the service
never reads shards).  Versions without a row have no sample yet.

Revisions never import the service's ORM classes: they describe tables as they were when the
revision was written.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "5a3e9d7c1b46"
down_revision: str | Sequence[str] | None = "c3d8a5e1f0b2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "version_samples",
        sa.Column("version_id", _ID, nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_by", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["versions.id"],
            name=op.f("fk_version_samples_version_id_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("version_id", name=op.f("pk_version_samples")),
    )


def downgrade() -> None:
    op.drop_table("version_samples")

"""stored record diffs

Revision ID: 9d4e2b7c5a81
Revises: 5a3e9d7c1b46
Create Date: 2026-12-02 06:00:00.000000

Stored record diffs (issue 25): ``version_record_diffs``, one row per pair of committed versions
(A → B) and identity (kind, width) with the summary of the record diff a client computed from
their record indexes (``recordkeeper diff A B --records``), who recorded it and when.  Pairs
without a row have no stored diff.

Revisions never import the service's ORM classes: they describe tables as they were when the
revision was written.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "9d4e2b7c5a81"
down_revision: str | Sequence[str] | None = "5a3e9d7c1b46"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "version_record_diffs",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("version_a_id", _ID, nullable=False),
        sa.Column("version_b_id", _ID, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_by", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["version_a_id"],
            ["versions.id"],
            name=op.f("fk_version_record_diffs_version_a_id_versions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["version_b_id"],
            ["versions.id"],
            name=op.f("fk_version_record_diffs_version_b_id_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_version_record_diffs")),
        sa.UniqueConstraint(
            "version_a_id",
            "version_b_id",
            "kind",
            "width",
            name=op.f("uq_version_record_diffs_version_a_id_version_b_id_kind_width"),
        ),
    )
    op.create_index(
        op.f("ix_version_record_diffs_version_b_id"),
        "version_record_diffs",
        ["version_b_id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_version_record_diffs_version_b_id"), table_name="version_record_diffs")
    op.drop_table("version_record_diffs")

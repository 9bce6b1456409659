"""record identity of versions

Revision ID: 4fbb7a9b4c02
Revises: efc6b3c06c3b
Create Date: 2026-12-01 14:20:00.000000

Record-level identity (issue 25): ``version_record_sets``, one row per version and identity
(kind, width) with the version's order-invariant record digest, its split digests and where its
record indexes are.  Versions without a row have no record identity yet.

Revisions never import the service's ORM classes: they describe tables as they were when the
revision was written.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "4fbb7a9b4c02"
down_revision: str | Sequence[str] | None = "efc6b3c06c3b"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "version_record_sets",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("version_id", _ID, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("index_format", sa.Integer(), nullable=False),
        sa.Column("records_digest", sa.String(length=71), nullable=False),
        sa.Column("record_count", sa.BigInteger(), nullable=False),
        sa.Column("splits", sa.JSON(), nullable=False),
        sa.Column("index_location", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["versions.id"],
            name=op.f("fk_version_record_sets_version_id_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_version_record_sets")),
        sa.UniqueConstraint(
            "version_id", "kind", "width", name=op.f("uq_version_record_sets_version_id_kind_width")
        ),
    )
    op.create_index(
        op.f("ix_version_record_sets_records_digest"),
        "version_record_sets",
        ["records_digest"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_version_record_sets_records_digest"), table_name="version_record_sets")
    op.drop_table("version_record_sets")

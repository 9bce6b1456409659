"""leakage policies and results

Revision ID: 9d4e1f6a2c37
Revises: 9d4e2b7c5a81
Create Date: 2026-12-02 06:00:00.000000

Leakage checks (issue 25 item 4): ``leakage_policies`` (one row per dataset name: ``mode``
``warn``/``refuse``/``off`` and the leak rate tolerated per pair, enforced at commit) and
``version_leakage`` (the check results clients sent, one row per split pair, served by ``GET
/versions/{ref}/leakage``).  Datasets without a row have no policy (``off``).

Revisions never import the service's ORM classes: they describe tables as they were when the
revision was written.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "9d4e1f6a2c37"
down_revision: str | Sequence[str] | None = "9d4e2b7c5a81"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "leakage_policies",
        sa.Column("dataset", sa.String(length=64), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("max_rate", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("dataset", name=op.f("pk_leakage_policies")),
    )
    op.create_table(
        "version_leakage",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("version_id", _ID, nullable=False),
        sa.Column("split", sa.String(length=64), nullable=False),
        sa.Column("other_version_id", _ID, nullable=False),
        sa.Column("other_split", sa.String(length=64), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.Column("leaked", sa.BigInteger(), nullable=False),
        sa.Column("distinct_ids", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("computed_by", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["versions.id"],
            name=op.f("fk_version_leakage_version_id_versions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["other_version_id"],
            ["versions.id"],
            name=op.f("fk_version_leakage_other_version_id_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_version_leakage")),
        sa.UniqueConstraint(
            "version_id",
            "split",
            "other_version_id",
            "other_split",
            name=op.f("uq_version_leakage_version_id_split_other_version_id_other_split"),
        ),
    )
    with op.batch_alter_table("version_leakage", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_version_leakage_other_version_id"), ["other_version_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("version_leakage", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_version_leakage_other_version_id"))
    op.drop_table("version_leakage")
    op.drop_table("leakage_policies")

"""derived versions

Revision ID: c3d8a5e1f0b2
Revises: c3d91e5a7b20
Create Date: 2026-12-01 17:45:00.000000

A version may be staged as a change of another (issue 24, "versions built as changes"):
``versions.base_version_id`` names the committed version whose kept shards it references once
committed.  Null for every version staged before this revision (none was derived).

Revisions never import the service's ORM classes: they describe tables as they were when the
revision was written.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "c3d8a5e1f0b2"
down_revision: str | Sequence[str] | None = "c3d91e5a7b20"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("versions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "base_version_id",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                nullable=True,
            )
        )
        batch_op.create_foreign_key(
            op.f("fk_versions_base_version_id_versions"),
            "versions",
            ["base_version_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("versions", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("fk_versions_base_version_id_versions"), type_="foreignkey")
        batch_op.drop_column("base_version_id")

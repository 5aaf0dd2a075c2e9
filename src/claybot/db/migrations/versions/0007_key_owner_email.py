"""API keys: ``owner_email``, whom a key is for.

Seed 002's keys carried it: its dashboard sends it when it creates a key and shows it
under the key's name. A key made before has none.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("owner_email", sa.String(320), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as table:
        table.drop_column("owner_email")

"""The agents' durable state: their index, histories and inbox log.

For cluster mode, where the agents' state lives in the database instead of a
home's files (``claybot.agents.postgres_store``). Nothing writes here while the
engine runs on files.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_index",
        sa.Column("agent_id", sa.String(length=256), nullable=False),
        sa.Column("descriptor", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.Text(), nullable=True),
        sa.Column("state_set_aside", sa.Text(), nullable=True),
        sa.Column(
            "history_written_at", sa.BigInteger(), server_default=sa.text("0"), nullable=False
        ),
        sa.PrimaryKeyConstraint("agent_id", name=op.f("pk_agent_index")),
    )
    op.create_table(
        "agent_history",
        sa.Column("agent_id", sa.String(length=256), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agent_index.agent_id"],
            name=op.f("fk_agent_history_agent_id_agent_index"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "seq", name=op.f("pk_agent_history")),
    )
    op.create_index("ix_agent_history_agent_id_at", "agent_history", ["agent_id", "at"])
    op.create_table(
        "agent_inbox",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("record", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_inbox")),
    )


def downgrade() -> None:
    op.drop_table("agent_inbox")
    op.drop_index("ix_agent_history_agent_id_at", table_name="agent_history")
    op.drop_table("agent_history")
    op.drop_table("agent_index")

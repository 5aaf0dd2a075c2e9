"""Jobs (seed 002): the queue, its transcripts, logs, files, workers and the MCP registry.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("mcp_package", sa.String(length=200), nullable=False),
        sa.Column(
            "version", sa.String(length=32), server_default=sa.text("'1.0.0'"), nullable=False
        ),
        sa.Column(
            "mcp_transport", sa.String(length=8), server_default=sa.text("'stdio'"), nullable=False
        ),
        sa.Column("mcp_command", sa.String(length=500), nullable=True),
        sa.Column("mcp_url", sa.String(length=2000), nullable=True),
        sa.Column("mcp_args", sa.JSON(), nullable=False),
        sa.Column("mcp_env", sa.JSON(), nullable=False),
        sa.Column("mcp_tools", sa.JSON(), nullable=False),
        sa.Column(
            "category", sa.String(length=64), server_default=sa.text("'general'"), nullable=False
        ),
        sa.Column("documentation", sa.Text(), nullable=True),
        sa.Column("author", sa.String(length=200), nullable=True),
        sa.Column("repository_url", sa.String(length=2000), nullable=True),
        sa.Column("is_builtin", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("verified", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("verified_by", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "mcp_transport IN ('stdio', 'sse', 'http')", name=op.f("ck_agents_mcp_transport")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("mcp_package", name=op.f("uq_agents_mcp_package")),
    )
    op.create_table(
        "workers",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=32), nullable=False),
        sa.Column(
            "status", sa.String(length=16), server_default=sa.text("'active'"), nullable=False
        ),
        sa.Column("active_jobs", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("last_heartbeat", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "status IN ('active', 'draining', 'dead')", name=op.f("ck_workers_status")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
    )
    op.create_table(
        "job_queue",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("priority", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("timeout_seconds", sa.Integer(), server_default=sa.text("300"), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column(
            "hitl_mode",
            sa.String(length=32),
            server_default=sa.text("'plan_approval'"),
            nullable=False,
        ),
        sa.Column("allow_network", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column(
            "status", sa.String(length=32), server_default=sa.text("'queued'"), nullable=False
        ),
        sa.Column("tools_discovered", sa.JSON(), nullable=True),
        sa.Column("worker_id", sa.String(length=200), nullable=True),
        sa.Column("attempt", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("execution_state", sa.JSON(), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("agent_question", sa.Text(), nullable=True),
        sa.Column("user_answer", sa.Text(), nullable=True),
        sa.Column("retry_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_retries", sa.Integer(), server_default=sa.text("3"), nullable=False),
        sa.Column("api_key_id", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "hitl_mode IN ('plan_approval', 'auto_execute', 'always_ask')",
            name=op.f("ck_job_queue_hitl_mode"),
        ),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'completed', 'failed', 'waiting_for_user', "
            "'cancelled')",
            name=op.f("ck_job_queue_status"),
        ),
        sa.ForeignKeyConstraint(
            ["api_key_id"], ["api_keys.id"], name=op.f("fk_job_queue_api_key_id_api_keys")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_queue")),
    )
    with op.batch_alter_table("job_queue", schema=None) as batch_op:
        batch_op.create_index("ix_job_queue_api_key_id", ["api_key_id"], unique=False)
        batch_op.create_index(
            "ix_job_queue_claim", ["status", "priority", "created_at"], unique=False
        )
        batch_op.create_index("ix_job_queue_worker_id", ["worker_id"], unique=False)

    op.create_table(
        "job_artifacts",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("mime_type", sa.String(length=200), nullable=True),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["job_queue.id"],
            name=op.f("fk_job_artifacts_job_id_job_queue"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_artifacts")),
        sa.UniqueConstraint("job_id", "filename", name="uq_job_artifacts_job_id_filename"),
    )
    op.create_table(
        "job_attachments",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=True),
        sa.Column("api_key_id", sa.String(length=32), nullable=True),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("mime_type", sa.String(length=200), nullable=True),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("storage_path", sa.String(length=600), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["api_key_id"], ["api_keys.id"], name=op.f("fk_job_attachments_api_key_id_api_keys")
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["job_queue.id"],
            name=op.f("fk_job_attachments_job_id_job_queue"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_attachments")),
    )
    with op.batch_alter_table("job_attachments", schema=None) as batch_op:
        batch_op.create_index("ix_job_attachments_job_id", ["job_id"], unique=False)

    op.create_table(
        "job_logs",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("level", sa.String(length=8), server_default=sa.text("'info'"), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=True),
        sa.Column("timestamp", sa.DateTime(timezone=True), nullable=False),
        sa.Column("step_key", sa.String(length=200), nullable=True),
        sa.CheckConstraint(
            "level IN ('debug', 'info', 'warn', 'error')", name=op.f("ck_job_logs_level")
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["job_queue.id"],
            name=op.f("fk_job_logs_job_id_job_queue"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_logs")),
        sa.UniqueConstraint("job_id", "step_key", name="uq_job_logs_job_id_step_key"),
    )
    with op.batch_alter_table("job_logs", schema=None) as batch_op:
        batch_op.create_index("ix_job_logs_job_id_id", ["job_id", "id"], unique=False)

    op.create_table(
        "job_records",
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("record", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["job_queue.id"],
            name=op.f("fk_job_records_job_id_job_queue"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "seq", name="pk_job_records"),
    )


def downgrade() -> None:
    op.drop_table("job_records")
    with op.batch_alter_table("job_logs", schema=None) as batch_op:
        batch_op.drop_index("ix_job_logs_job_id_id")

    op.drop_table("job_logs")
    with op.batch_alter_table("job_attachments", schema=None) as batch_op:
        batch_op.drop_index("ix_job_attachments_job_id")

    op.drop_table("job_attachments")
    op.drop_table("job_artifacts")
    with op.batch_alter_table("job_queue", schema=None) as batch_op:
        batch_op.drop_index("ix_job_queue_worker_id")
        batch_op.drop_index("ix_job_queue_claim")
        batch_op.drop_index("ix_job_queue_api_key_id")

    op.drop_table("job_queue")
    op.drop_table("workers")
    op.drop_table("agents")

"""The shared tables (SQLAlchemy Core). Later features add theirs here, with a migration.

Every constraint and index gets a predictable name: later migrations on SQLite
(which rebuilds a table to alter it) can only drop or change constraints they
can name. A test checks that these tables and the migrations agree.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)

from claybot.db.keys import MAX_OWNER_EMAIL_CHARS

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("prefix", String(16), nullable=False, index=True),  # the first 12 chars, for display
    Column("key_hash", String(64), nullable=False, unique=True),  # SHA-256 hex; never the key
    Column("name", String(128), nullable=False),
    Column("scopes", JSON, nullable=False),  # a list of scope names
    Column("rate_limit_rpm", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),  # UTC
    Column("last_used_at", DateTime(timezone=True), nullable=True),
    Column("usage_count", Integer, nullable=False, default=0, server_default=text("0")),
    Column("revoked", Boolean, nullable=False, default=False, server_default=false()),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column("owner_email", String(MAX_OWNER_EMAIL_CHARS), nullable=True),  # migration 0007
)


# -- jobs (seed 002) -------------------------------------------------------------------
# Column names are seed 002's. Added to them: ``attempt`` (the fencing token: every
# write after a claim names the worker and the attempt it claimed, so a worker that
# lost its lease writes nothing), ``lease_expires_at``, ``cancel_requested``,
# ``allow_network`` and ``updated_at``.

JOB_STATUSES = ("queued", "running", "completed", "failed", "waiting_for_user", "cancelled")
HITL_MODES = ("plan_approval", "auto_execute", "always_ask")
LOG_LEVELS = ("debug", "info", "warn", "error")
WORKER_STATUSES = ("active", "draining", "stopped", "dead")  # migration 0006: stopped
# SQLite's INTEGER PRIMARY KEY is its rowid (autoincrement); BIGINT would not be.
BigId = BigInteger().with_variant(Integer, "sqlite")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


job_queue = Table(
    "job_queue",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("task", Text, nullable=False),
    Column("priority", Integer, nullable=False, server_default=text("0")),
    Column("timeout_seconds", Integer, nullable=False, server_default=text("300")),
    Column("model", String(200), nullable=True),  # None: the engine's provider chain
    Column("hitl_mode", String(32), nullable=False, server_default=text("'plan_approval'")),
    Column("allow_network", Boolean, nullable=False, server_default=false()),
    Column("status", String(32), nullable=False, server_default=text("'queued'")),
    Column("tools_discovered", JSON, nullable=True),
    Column("worker_id", String(200), nullable=True),
    Column("attempt", Integer, nullable=False, server_default=text("0")),
    Column("lease_expires_at", DateTime(timezone=True), nullable=True),
    Column("cancel_requested", Boolean, nullable=False, server_default=false()),
    Column("execution_state", JSON, nullable=True),
    Column("result", Text, nullable=True),
    Column("error_message", Text, nullable=True),
    Column("agent_question", Text, nullable=True),
    Column("user_answer", Text, nullable=True),
    Column("retry_count", Integer, nullable=False, server_default=text("0")),
    Column("max_retries", Integer, nullable=False, server_default=text("3")),
    Column("api_key_id", String(32), ForeignKey("api_keys.id"), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("paused_at", DateTime(timezone=True), nullable=True),
    Column("completed_at", DateTime(timezone=True), nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    CheckConstraint(_one_of("status", JOB_STATUSES), name="status"),
    CheckConstraint(_one_of("hitl_mode", HITL_MODES), name="hitl_mode"),
    Index("ix_job_queue_newest", "created_at", "id"),  # the lists: newest first
    Index("ix_job_queue_status_newest", "status", "created_at", "id"),
    Index("ix_job_queue_api_key_id", "api_key_id"),
    Index("ix_job_queue_worker_id", "worker_id"),
)
# The claim's order (priority first, highest first; then age), so a claim reads the top
# queued rows instead of sorting every queued one (migration 0005).
Index(
    "ix_job_queue_claim",
    job_queue.c.status,
    job_queue.c.priority.desc(),
    job_queue.c.created_at,
    job_queue.c.id,
)

# The job's transcript: the very records an agent's history.jsonl holds, one row each.
job_records = Table(
    "job_records",
    metadata,
    Column("job_id", String(36), ForeignKey("job_queue.id", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("record", JSON, nullable=False),
    PrimaryKeyConstraint("job_id", "seq", name="pk_job_records"),
)

job_logs = Table(
    "job_logs",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("job_id", String(36), ForeignKey("job_queue.id", ondelete="CASCADE"), nullable=False),
    Column("level", String(8), nullable=False, server_default=text("'info'")),
    Column("message", Text, nullable=False),
    Column("metadata", JSON, nullable=True),
    Column("timestamp", DateTime(timezone=True), nullable=False),
    # Names the step that wrote the line: the step run again after a crash writes nothing new.
    Column("step_key", String(200), nullable=True),
    CheckConstraint(_one_of("level", LOG_LEVELS), name="level"),
    Index("ix_job_logs_job_id_id", "job_id", "id"),
    UniqueConstraint("job_id", "step_key", name="uq_job_logs_job_id_step_key"),
)

job_artifacts = Table(
    "job_artifacts",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("job_id", String(36), ForeignKey("job_queue.id", ondelete="CASCADE"), nullable=False),
    Column("filename", String(255), nullable=False),
    Column("mime_type", String(200), nullable=True),
    Column("content", LargeBinary, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # Written again under one name, an artifact is replaced, never doubled.
    UniqueConstraint("job_id", "filename", name="uq_job_artifacts_job_id_filename"),
)

job_attachments = Table(
    "job_attachments",
    metadata,
    Column("id", String(36), primary_key=True),
    # None until the upload is attached to a job (uploaded before the job was created).
    Column("job_id", String(36), ForeignKey("job_queue.id", ondelete="CASCADE"), nullable=True),
    Column("api_key_id", String(32), ForeignKey("api_keys.id"), nullable=True),
    Column("filename", String(255), nullable=False),
    Column("mime_type", String(200), nullable=True),
    Column("content", LargeBinary, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("storage_path", String(600), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index("ix_job_attachments_job_id", "job_id"),
)

workers = Table(
    "workers",
    metadata,
    Column("id", String(200), primary_key=True),
    Column("hostname", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("version", String(32), nullable=False),
    Column("status", String(16), nullable=False, server_default=text("'active'")),
    Column("active_jobs", Integer, nullable=False, server_default=text("0")),
    Column("last_heartbeat", DateTime(timezone=True), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    CheckConstraint(_one_of("status", WORKER_STATUSES), name="status"),
)

# The MCP server registry (seed 002 calls the table ``agents``).
mcp_agents = Table(
    "agents",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(100), nullable=False),
    Column("description", Text, nullable=False),
    Column("mcp_package", String(200), nullable=False, unique=True),
    Column("version", String(32), nullable=False, server_default=text("'1.0.0'")),
    Column("mcp_transport", String(8), nullable=False, server_default=text("'stdio'")),
    Column("mcp_command", String(500), nullable=True),  # stdio: the program to start
    Column("mcp_url", String(2000), nullable=True),  # http: the server's address
    Column("mcp_args", JSON, nullable=False),
    Column("mcp_env", JSON, nullable=False),
    Column("mcp_tools", JSON, nullable=False),  # [{name, description}]
    Column("category", String(64), nullable=False, server_default=text("'general'")),
    Column("documentation", Text, nullable=True),
    Column("author", String(200), nullable=True),
    Column("repository_url", String(2000), nullable=True),
    Column("is_builtin", Boolean, nullable=False, server_default=false()),
    Column("verified", Boolean, nullable=False, server_default=false()),
    Column("verified_at", DateTime(timezone=True), nullable=True),
    Column("verified_by", String(200), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # The words the registry is searched by; the full-text index over them is
    # migration 0003's (SEARCH_INDEX_OBJECTS).
    Column("search_text", Text, nullable=False, server_default=text("''")),
    CheckConstraint(_one_of("mcp_transport", ("stdio", "sse", "http")), name="mcp_transport"),
)

# -- the agents' durable state (``claybot.agents.postgres_store``; migration 0008) ----------
# The runtime's records are kept as the JSON lines its files hold, so the same bytes
# come back whichever store wrote them.

agent_index = Table(
    "agent_index",
    metadata,
    Column("agent_id", String(256), primary_key=True),
    Column("descriptor", Text, nullable=False),  # JSON
    Column("created_at", BigInteger, nullable=False),  # unix ms
    Column("state", Text, nullable=True),  # JSON; none once set aside
    Column("state_set_aside", Text, nullable=True),  # a state that did not validate
    Column("history_written_at", BigInteger, nullable=False, server_default=text("0")),
)

agent_history = Table(
    "agent_history",
    metadata,
    Column(
        "agent_id",
        String(256),
        ForeignKey("agent_index.agent_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("seq", BigInteger, nullable=False),  # from 0, as the file's line numbers
    Column("at", BigInteger, nullable=False),  # the record's ``at`` (0 if none)
    Column("line", Text, nullable=False),
    PrimaryKeyConstraint("agent_id", "seq"),
    Index("ix_agent_history_agent_id_at", "agent_id", "at"),
)

agent_inbox = Table(
    "agent_inbox",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),  # the log's order
    Column("record", Text, nullable=False),  # an inbox log record (``claybot.agents.inbox``)
)

# What migration 0003 creates that SQLAlchemy cannot describe (an FTS5 table and its
# shadow tables on SQLite, an expression index on PostgreSQL): autogenerate leaves
# them alone.
SEARCH_INDEX_OBJECTS = ("agents_fts", "ix_agents_search")


def described_here(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Alembic's ``include_object``: False for the search index's own objects."""
    return not (name is not None and name.startswith(SEARCH_INDEX_OBJECTS))

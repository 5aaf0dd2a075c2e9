"""Full-text search over the MCP registry: FTS5 on SQLite, a tsvector index on PostgreSQL.

The registry keeps each server's searchable words (name, description, category,
its tools' names and descriptions) in ``agents.search_text``; the index over it is
the database's own, kept in step by triggers (SQLite) or by PostgreSQL itself.
Neither index is in ``claybot.db.tables``: SQLAlchemy cannot describe them, so
``SEARCH_INDEX_OBJECTS`` names them for autogenerate to leave alone.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

SQLITE_UP = [
    # External content: the index stores only the words, the text stays in agents.
    "CREATE VIRTUAL TABLE agents_fts USING fts5("
    "search_text, content='agents', content_rowid='rowid', tokenize='porter unicode61')",
    "CREATE TRIGGER agents_fts_insert AFTER INSERT ON agents BEGIN "
    "INSERT INTO agents_fts(rowid, search_text) VALUES (new.rowid, new.search_text); END",
    "CREATE TRIGGER agents_fts_delete AFTER DELETE ON agents BEGIN "
    "INSERT INTO agents_fts(agents_fts, rowid, search_text) "
    "VALUES ('delete', old.rowid, old.search_text); END",
    "CREATE TRIGGER agents_fts_update AFTER UPDATE OF search_text ON agents BEGIN "
    "INSERT INTO agents_fts(agents_fts, rowid, search_text) "
    "VALUES ('delete', old.rowid, old.search_text); "
    "INSERT INTO agents_fts(rowid, search_text) VALUES (new.rowid, new.search_text); END",
    "INSERT INTO agents_fts(agents_fts) VALUES ('rebuild')",
]
SQLITE_DOWN = [
    "DROP TRIGGER agents_fts_update",
    "DROP TRIGGER agents_fts_delete",
    "DROP TRIGGER agents_fts_insert",
    "DROP TABLE agents_fts",
]
POSTGRES_UP = [
    "CREATE INDEX ix_agents_search ON agents USING gin (to_tsvector('english', search_text))",
]
POSTGRES_DOWN = ["DROP INDEX ix_agents_search"]


def upgrade() -> None:
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("search_text", sa.Text(), server_default=sa.text("''"), nullable=False)
        )
    sqlite = op.get_bind().dialect.name == "sqlite"
    for statement in SQLITE_UP if sqlite else POSTGRES_UP:
        op.execute(statement)


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    for statement in SQLITE_DOWN if sqlite else POSTGRES_DOWN:
        op.execute(statement)
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_column("search_text")

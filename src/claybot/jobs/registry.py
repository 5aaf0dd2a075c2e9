"""The MCP server registry (seed 002's ``agents`` table) and its full-text search.

Seed 002 searched the registry by embeddings it never generated for its own seed
rows; here the database searches its own words (FTS5 on SQLite, a tsvector index
on PostgreSQL) over each server's name, description, category and tools. A
server is registered unverified; only verifying it (connecting and listing its
tools, an admin's act) makes it discoverable, because a job that discovers a
server may then start it and call its tools.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from sqlalchemy import Connection, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from claybot.db.errors import StoreError, wrap_database_errors
from claybot.db.tables import mcp_agents
from claybot.jobs.registry_model import (
    DuplicateServer,
    Match,
    McpToolInfo,
    NewServer,
    RegisteredServer,
    ServerNotFound,
)
from claybot.jobs.sql import JobTables, at, aware
from claybot.jobs.writer import Events

WORD = re.compile(r"[^\W_]+", re.UNICODE)
MAX_QUERY_WORDS = 32
SEARCH_CANDIDATES = 50  # rows the index ranks before similarity and threshold are applied


# PostgreSQL's English configuration drops these words and SQLite's FTS5 does not;
# dropping them from the query first makes a match score the same on both.
_STOP_WORDS_TEXT = (
    "a about above after again against all am an and any are as at be because been before "
    "being below between both but by can could did do does doing down during each few for "
    "from further had has have having he her here hers herself him himself his how i if in "
    "into is it its itself just me more most my myself no nor not now of off on once only or "
    "other our ours ourselves out over own same she should so some such than that the their "
    "theirs them themselves then there these they this those through to too under until up "
    "very was we were what when where which while who whom why will with would you your yours "
    "yourself yourselves "
)
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def query_words(query: str) -> list[str]:
    """The query as plain lower-case words, without stop words: nothing of it reaches the
    index's syntax."""
    seen: dict[str, None] = {}
    for word in WORD.findall(query.lower()):
        if word not in STOP_WORDS:
            seen.setdefault(word, None)
    return list(seen)[:MAX_QUERY_WORDS]


def search_text(
    name: str, description: str, category: str, package: str, tools: list[McpToolInfo]
) -> str:
    parts = [name, description, category, package.replace("/", " ").replace("-", " ")]
    for tool in tools:
        parts.append(tool.name.replace("_", " "))
        parts.append(tool.description)
    return "\n".join(part for part in parts if part)


def _tool_row(tool: McpToolInfo) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}


def _server(row: Any) -> RegisteredServer:
    tools = [
        McpToolInfo(
            str(t.get("name", "")),
            str(t.get("description", "")),
            t.get("inputSchema") if isinstance(t.get("inputSchema"), dict) else None,
        )
        for t in row.mcp_tools or []
        if isinstance(t, dict)
    ]
    return RegisteredServer(
        id=row.id,
        name=row.name,
        description=row.description,
        package_name=row.mcp_package,
        version=row.version,
        transport=row.mcp_transport,
        command=row.mcp_command,
        args=list(row.mcp_args or []),
        env=dict(row.mcp_env or {}),
        url=row.mcp_url,
        tools=tools,
        category=row.category,
        documentation=row.documentation,
        author=row.author,
        repository_url=row.repository_url,
        is_builtin=bool(row.is_builtin),
        verified=bool(row.verified),
        verified_at=aware(row.verified_at),
        verified_by=row.verified_by,
        created_at=at(row.created_at),
    )


class McpRegistry:
    def __init__(self, tables: JobTables) -> None:
        self._db = tables

    async def register(self, new: NewServer) -> RegisteredServer:
        now = self._db.clock()
        server_id = str(uuid.uuid4())
        try:

            def write(connection: Connection, _events: Events) -> None:
                connection.execute(
                    insert(mcp_agents).values(
                        id=server_id,
                        name=new.name,
                        description=new.description,
                        mcp_package=new.package_name,
                        version=new.version,
                        mcp_transport=new.transport,
                        mcp_command=new.command,
                        mcp_url=new.url,
                        mcp_args=list(new.args),
                        mcp_env=dict(new.env or {}),
                        mcp_tools=[],
                        category=new.category,
                        documentation=new.documentation,
                        author=new.author,
                        repository_url=new.repository_url,
                        created_at=now,
                        updated_at=now,
                        search_text=search_text(
                            new.name, new.description, new.category, new.package_name, []
                        ),
                    )
                )

            await self._db.write("registering an MCP server", write)
        except StoreError as exc:
            if isinstance(exc.__cause__, IntegrityError):  # mcp_package is unique
                raise DuplicateServer(new.package_name) from None
            raise
        return await self.get(server_id)

    async def get(self, server_id: str) -> RegisteredServer:
        async with wrap_database_errors("reading the MCP registry"), self._db.engine.connect() as c:
            row = (await c.execute(select(mcp_agents).where(mcp_agents.c.id == server_id))).first()
        if row is None:
            raise ServerNotFound(server_id)
        return _server(row)

    async def by_package(self, package: str) -> RegisteredServer | None:
        async with wrap_database_errors("reading the MCP registry"), self._db.engine.connect() as c:
            row = (
                await c.execute(select(mcp_agents).where(mcp_agents.c.mcp_package == package))
            ).first()
        return None if row is None else _server(row)

    async def listing(
        self, *, verified_only: bool, limit: int, offset: int = 0
    ) -> tuple[list[RegisteredServer], int]:
        where = [mcp_agents.c.verified.is_(True)] if verified_only else []
        query = (
            select(mcp_agents)
            .where(*where)
            .order_by(mcp_agents.c.name, mcp_agents.c.id)
            .limit(limit)
            .offset(offset)
        )
        count = select(func.count()).select_from(mcp_agents).where(*where)
        async with wrap_database_errors("reading the MCP registry"), self._db.engine.connect() as c:
            rows = (await c.execute(query)).all()
            total = (await c.execute(count)).scalar_one()
        return [_server(row) for row in rows], int(total)

    async def mark_verified(
        self, server_id: str, tools: list[McpToolInfo], verified_by: str
    ) -> RegisteredServer:
        """Record the tools a live connection listed, and that an admin vouched for it."""
        server = await self.get(server_id)
        now = self._db.clock()

        def write(connection: Connection, _events: Events) -> None:
            connection.execute(
                update(mcp_agents)
                .where(mcp_agents.c.id == server_id)
                .values(
                    mcp_tools=[
                        {
                            "name": t.name,
                            "description": t.description,
                            "inputSchema": t.input_schema,
                        }
                        for t in tools
                    ],
                    verified=True,
                    verified_at=now,
                    verified_by=verified_by,
                    updated_at=now,
                    search_text=search_text(
                        server.name,
                        server.description,
                        server.category,
                        server.package_name,
                        tools,
                    ),
                )
            )

        await self._db.write("verifying an MCP server", write)
        return await self.get(server_id)

    async def search(
        self, query: str, *, limit: int = 5, threshold: float = 0.0, verified_only: bool = True
    ) -> list[Match]:
        """Servers whose words match the query's, best first; ``similarity`` is the share
        of the query's words each matched, so ``threshold`` means the same on both
        databases. Any word may match, and each matches as a prefix ("weath" finds
        "weather"); on PostgreSQL and SQLite alike words are stemmed (English)."""
        words = query_words(query)
        if not words:
            return []
        async with (
            wrap_database_errors("searching the MCP registry"),
            self._db.engine.connect() as c,
        ):
            ranked = (
                await c.execute(*self._matching(words, verified_only, SEARCH_CANDIDATES))
            ).all()
            hits = dict.fromkeys((row.id for row in ranked), 0)
            for word in words:  # one query per word, over the whole index
                for row in (await c.execute(*self._matching([word], verified_only, None))).all():
                    if row.id in hits:
                        hits[row.id] += 1
        shares = [(row, hits[row.id] / len(words)) for row in ranked]
        matches = [
            Match(_server(row), round(share, 3)) for row, share in shares if share >= threshold
        ]
        matches.sort(key=lambda match: -match.similarity)  # stable: ties keep the index's rank
        return matches[:limit]

    def _matching(
        self, words: list[str], verified_only: bool, limit: int | None
    ) -> tuple[Any, dict[str, Any]]:
        """The statement for servers matching any of ``words``, best ranked first."""
        verified = " AND agents.verified" if verified_only else ""
        limited = "" if limit is None else f" LIMIT {int(limit)}"
        if self._db.postgres:
            # Words are letters and digits only (WORD): no tsquery operator can get in.
            query = " | ".join(f"{word}:*" for word in words)
            statement = text(
                "SELECT agents.* FROM agents, to_tsquery('english', :query) AS q "
                f"WHERE to_tsvector('english', search_text) @@ q{verified} "
                "ORDER BY ts_rank(to_tsvector('english', search_text), q) DESC, agents.name"
                + limited
            )
        else:
            # Each word quoted: FTS5 reads it as a string, never as its query syntax.
            query = " OR ".join(f'"{word}"*' for word in words)
            statement = text(
                "SELECT agents.* FROM agents_fts JOIN agents ON agents.rowid = agents_fts.rowid "
                f"WHERE agents_fts MATCH :query{verified} "
                "ORDER BY bm25(agents_fts), agents.name" + limited
            )
        # Typed as the table's columns, so JSON and times come back as they do elsewhere.
        return statement.columns(*mcp_agents.columns), {"query": query}

    async def counts(self) -> tuple[int, int]:
        """(all servers, verified ones)."""
        query = select(
            func.count(), func.count().filter(mcp_agents.c.verified.is_(True))
        ).select_from(mcp_agents)
        async with wrap_database_errors("counting MCP servers"), self._db.engine.connect() as c:
            total, verified = (await c.execute(query)).one()
        return int(total), int(verified)

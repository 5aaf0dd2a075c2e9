"""The database: SQLite opens, passes SQLite's quick check and has the current schema;
PostgreSQL answers and has the current schema.

SQLite is opened read-only, so the check neither creates the file nor disturbs an
engine using it. ``--fix`` brings a SQLite schema to head with the engine's own
``migrate`` (creating the file if need be); a PostgreSQL database, shared by other
machines, is left to the engine, which migrates it when it starts.
"""

from __future__ import annotations

import asyncio
import shlex
import sqlite3
from pathlib import Path

from sqlalchemy.engine import make_url

from claybot.db.database import (
    HEAD_REVISION,
    alembic_config,
    create_database_engine,
    current_revision,
    database_url,
    migrate,
    redact_url,
)
from claybot.doctor.context import DoctorContext
from claybot.doctor.finding import Finding, Repair, fail, ok, warn

MAX_PROBLEMS = 3


def check_database(context: DoctorContext) -> list[Finding]:
    url = database_url(context.paths, context.env)
    backend = make_url(url).get_backend_name()
    if backend == "sqlite":
        return [_sqlite(url)]
    if backend == "postgresql":
        return [_postgres(url, context.limits.probe_timeout_s)]
    return [
        fail(
            "database",
            f"{redact_url(url)}: only SQLite and PostgreSQL are supported",
            "unset CLAYBOT_DATABASE_URL (SQLite in the home) or point it at PostgreSQL",
        )
    ]


def _sqlite(url: str) -> Finding:
    path = Path(make_url(url).database or "")
    fix, repair = "claybot doctor --fix", _migrator(url, path)
    if not path.is_file():
        return warn(
            "database", f"{path} does not exist yet (the engine creates it at start)", fix, repair
        )
    try:
        problems, revision = _read_sqlite(path)
    except sqlite3.Error as exc:
        return fail("database", f"{path} is not a usable SQLite database: {exc}", _recover(path))
    if problems != ["ok"]:
        shown = "; ".join(problems[:MAX_PROBLEMS])
        return fail("database", f"{path} fails SQLite's quick check: {shown}", _recover(path))
    return _revision(f"{path}: quick check ok", revision, fix, repair)


def _read_sqlite(path: Path) -> tuple[list[str], str | None]:
    connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5)
    try:
        problems = [str(row[0]) for row in connection.execute("PRAGMA quick_check")]
        try:
            row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError:  # no such table: never migrated
            row = None
        return problems, str(row[0]) if row else None
    finally:
        connection.close()


def _recover(path: Path) -> str:
    quoted, recovered = shlex.quote(str(path)), shlex.quote(f"{path}.recovered")
    return (
        f"sqlite3 {quoted} .recover | sqlite3 {recovered}  (then, with the engine stopped, "
        "put the recovered file in its place)"
    )


def _migrator(url: str, path: Path) -> Repair:
    def repair() -> str:
        path.parent.mkdir(parents=True, exist_ok=True)  # a home not created yet
        asyncio.run(_migrate(url))
        return f"migrated the database to revision {HEAD_REVISION}"

    return repair


async def _migrate(url: str) -> None:
    engine = create_database_engine(url)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()


def _postgres(url: str, timeout_s: float) -> Finding:
    shown = redact_url(url)
    try:
        revision = asyncio.run(_postgres_revision(url, timeout_s))
    except Exception as exc:  # the driver's errors, wrapped or not: all mean "not usable"
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return fail(
            "database",
            f"PostgreSQL at {shown} does not answer: {_without_password(url, reason)}",
            "start PostgreSQL, or fix CLAYBOT_DATABASE_URL",
        )
    return _revision(f"PostgreSQL at {shown} answers", revision, "claybot start", None)


async def _postgres_revision(url: str, timeout_s: float) -> str | None:
    engine = create_database_engine(url, connect_args={"timeout": timeout_s})
    try:
        async with asyncio.timeout(timeout_s * 2):
            return await current_revision(engine)
    finally:
        await engine.dispose()


def _revision(where: str, revision: str | None, fix: str, repair: Repair | None) -> Finding:
    if revision == HEAD_REVISION:
        return ok("database", f"{where}; schema at revision {HEAD_REVISION} (current)")
    if revision is None:
        return warn(
            "database", f"{where}; no schema yet (the engine migrates at start)", fix, repair
        )
    if revision not in _known_revisions():
        return fail(
            "database",
            f"{where}; schema at revision {revision!r}, which this ClayBot does not know (its "
            f"newest is {HEAD_REVISION!r}): a newer ClayBot migrated it",
            "upgrade ClayBot (pip install --upgrade claybot)",
        )
    return warn(
        "database",
        f"{where}; schema at revision {revision}, behind {HEAD_REVISION} (the engine migrates "
        "at start)",
        fix,
        repair,
    )


def _known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(alembic_config())
    return {script.revision for script in scripts.walk_revisions()}


def _without_password(url: str, text: str) -> str:
    password = make_url(url).password
    return text.replace(str(password), "***") if password else text

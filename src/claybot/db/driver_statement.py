"""Prebuilt statements run on the driver's own cursor: the job writer's hot writes.

Through ``Connection.execute`` a statement costs about 40 us of SQLAlchemy's Python
(its cache key, the parameters, an execution context, a result) whatever SQL it
runs. The job writer runs its writes one after another on one thread that every
job waits for, and measured with ``py-spy --gil`` that Python was 70 % of the
thread's time. A ``DriverStatement`` is compiled once per dialect by SQLAlchemy
(the same SQL, with its own processing of the parameters: datetimes on SQLite, JSON
everywhere), then runs on the DBAPI cursor of the connection's transaction. Driver
errors come back as SQLAlchemy's (``IntegrityError`` and the rest), as they would
from ``Connection.execute``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement


@dataclass(frozen=True)
class _Compiled:
    sql: str
    positions: Sequence[str] | None  # parameter names in order (qmark), or None (named)
    processors: Mapping[str, Callable[[Any], Any]]
    defaults: Mapping[str, Any]  # values the statement holds itself (``status = 'running'``)

    def values(self, parameters: Mapping[str, Any]) -> Any:
        merged = {**self.defaults, **parameters}
        for name, process in self.processors.items():
            if name in merged:
                merged[name] = process(merged[name])
        if self.positions is None:
            return merged
        return [merged[name] for name in self.positions]


@dataclass(frozen=True)
class Ran:
    """What a statement did: the rows it changed, and the first row it returned."""

    rowcount: int
    first: Any = None  # a row (by position) of RETURNING or SELECT; None without one
    columns: tuple[str, ...] = ()  # the names of its columns, in order


@dataclass
class Sent:
    """A statement sent (see ``DriverStatement.send``), its answer not read yet."""

    cursor: Any
    statement: DriverStatement

    def ran(self) -> Ran:
        try:
            if not _returned_rows(self.cursor):
                return Ran(self.cursor.rowcount)
            columns = self.statement.column_names(self.cursor)
            return Ran(self.cursor.rowcount, self.cursor.fetchone(), columns)
        finally:
            self.cursor.close()


class DriverStatement:
    """``statement`` (its parameters named ``columns`` for an INSERT's values)."""

    def __init__(self, statement: ClauseElement, columns: Sequence[str] | None = None) -> None:
        self._statement = statement
        self._columns = list(columns) if columns is not None else None
        self._compiled: dict[str, _Compiled] = {}  # by dialect name
        self._column_names: tuple[str, ...] | None = None

    def execute(self, connection: Connection, parameters: Mapping[str, Any]) -> Ran:
        compiled = self._compile(connection)
        values = compiled.values(parameters)
        cursor = connection.connection.cursor()
        try:
            cursor.execute(compiled.sql, values)
            first = cursor.fetchone() if _returned_rows(cursor) else None
            return Ran(cursor.rowcount, first)
        except connection.dialect.loaded_dbapi.Error as exc:
            raise _as_sqlalchemy(connection, compiled.sql, values, exc) from exc
        finally:
            cursor.close()

    def send(self, connection: Connection, parameters: Mapping[str, Any]) -> Sent:
        """Run the statement without reading what it answered yet: in psycopg's pipeline
        mode the statement is only queued, and a batch of them costs one round trip
        (``claybot.jobs.writer``); ``Sent.ran`` reads the answer once it is there."""
        compiled = self._compile(connection)
        values = compiled.values(parameters)
        cursor = connection.connection.cursor()
        try:
            cursor.execute(compiled.sql, values)
        except connection.dialect.loaded_dbapi.Error as exc:
            cursor.close()
            raise _as_sqlalchemy(connection, compiled.sql, values, exc) from exc
        except BaseException:
            cursor.close()
            raise
        return Sent(cursor, self)

    def column_names(self, cursor: Any) -> tuple[str, ...]:
        """The names of the statement's columns, read from the first cursor that ran it:
        psycopg builds a ``Column`` for each at every read of ``description`` (a job's
        row has 26), which was 6 % of the job writer's thread (``py-spy``)."""
        if self._column_names is None:
            self._column_names = tuple(column.name for column in cursor.description)
        return self._column_names

    def executemany(self, connection: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        compiled = self._compile(connection)
        values = [compiled.values(row) for row in rows]
        cursor = connection.connection.cursor()
        try:
            cursor.executemany(compiled.sql, values)
        except connection.dialect.loaded_dbapi.Error as exc:
            raise _as_sqlalchemy(connection, compiled.sql, values, exc) from exc
        finally:
            cursor.close()

    def _compile(self, connection: Connection) -> _Compiled:
        dialect = connection.dialect
        compiled = self._compiled.get(dialect.name)
        if compiled is None:
            done = self._statement.compile(dialect=dialect, column_keys=self._columns)
            assert isinstance(done, SQLCompiler)
            positions = done.positiontup if dialect.positional else None
            defaults = {
                name: bind.value
                for name, bind in done.binds.items()
                if not bind.required
                and bind.callable is None
                and (name in positions if positions is not None else f"%({name})s" in done.string)
            }
            # SQLAlchemy's own processing of each parameter (it has no public name).
            processors: dict[str, Callable[[Any], Any]] = {}
            for name, process in done._bind_processors.items():
                if not callable(process):  # a tuple's: none of the hot statements has one
                    raise TypeError(f"{name}: tuple parameters are not supported here")
                processors[name] = process
            compiled = _Compiled(done.string, positions, processors, defaults)
            self._compiled[dialect.name] = compiled
        return compiled


def _returned_rows(cursor: Any) -> bool:
    # psycopg builds its ``description`` anew at every read; its result says it cheaply.
    result = getattr(cursor, "pgresult", None)
    if result is not None:
        return bool(result.nfields)
    return cursor.description is not None


def execute_script(connection: Connection, script: Any) -> None:
    """``script``, statements with their values written in (no parameters: psycopg's
    ``sql.Composed``), sent as one simple query: one round trip for all of them, as
    ``DriverStatement`` cannot (the extended protocol takes one statement at a time)."""
    driver = connection.connection.dbapi_connection
    assert driver is not None
    try:
        driver.execute(script)
    except connection.dialect.loaded_dbapi.Error as exc:
        raise _as_sqlalchemy(connection, str(script), None, exc) from exc


def _as_sqlalchemy(connection: Connection, sql: str, values: Any, exc: Exception) -> Exception:
    return DBAPIError.instance(
        sql, values, exc, connection.dialect.loaded_dbapi.Error, dialect=connection.dialect
    )

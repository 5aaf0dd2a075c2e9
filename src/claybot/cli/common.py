"""What every command shares: home resolution, the engine client, errors, output."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from claybot.config.home import HomePaths, resolve_home

if TYPE_CHECKING:
    from pydantic import BaseModel

    from claybot.client.engine_client import EngineClient
    from claybot.config.store import ConfigStore
    from claybot.wire.schedules import TaskProblem

# The engine client (httpx) and the config models are imported when a command
# needs them: `claybot start` needs neither before the engine runs, and boot time
# counts.

T = TypeVar("T")

console = Console()
err_console = Console(stderr=True)

HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help="Engine home directory (default: $CLAYBOT_HOME, else ~/.claybot).",
        show_default=False,
    ),
]
RemoteOption = Annotated[
    str | None,
    typer.Option(
        "--remote", help="Remote engine URL (reserved for a future version).", show_default=False
    ),
]
# --json was given to the running command, so its errors are JSON too (see ``fail``).
_json_mode: ContextVar[bool] = ContextVar("claybot_json_mode", default=False)


def _json_chosen(ctx: typer.Context, value: bool) -> bool:
    token = _json_mode.set(value)
    ctx.call_on_close(lambda: _json_mode.reset(token))  # the next command starts afresh
    return value


JsonOption = Annotated[
    bool,
    typer.Option(
        "--json",
        help='Print one JSON object, the engine API\'s answer ({"ok": true, ...}); an error '
        'is {"ok": false, "error": {"code", "message"}}, with exit code 1.',
        callback=_json_chosen,
    ),
]


def paths_for(home: Path | None) -> HomePaths:
    return HomePaths(resolve_home(home))


YesOption = Annotated[
    bool,
    typer.Option("--yes", "-y", help="Do not ask before deleting (needed without a terminal)."),
]


def confirm_deletion(what: str, yes: bool) -> None:
    """Ask before ``what`` is deleted; ``--yes`` answers for the user. With no terminal to
    ask on (a script, a pipe), nothing is deleted without ``--yes``."""
    if yes:
        return
    if not sys.stdin.isatty():
        fail(f"this would {what}: pass --yes to confirm (there is no terminal to ask on)")
    if not typer.confirm(f"{what[0].upper()}{what[1:]}?", default=False):
        fail("nothing was changed")


def print_table(table: Table, *, whole: tuple[str, ...] = ("id",)) -> None:
    """Print a table whose ``whole`` columns (ids) are never cut or wrapped: a narrow
    terminal shrinks the other columns instead, so an id can always be copied."""
    for column in table.columns:
        if str(column.header) in whole:
            column.no_wrap = True
            column.min_width = max((len(str(cell)) for cell in column.cells), default=0)
    # Not cropped to the terminal: if even that does not fit, the terminal wraps the line
    # rather than rich cutting the id.
    console.print(table, crop=False)


def json_mode() -> bool:
    """Whether the running command was given --json."""
    return _json_mode.get()


def fail(
    message: str, code: int = 1, *, error: str = "bad_request", field: str | None = None
) -> NoReturn:
    """End the command: a red line on stderr, or with --json the API's error object on
    stdout (``error`` is its code for programs: ``not_found``, ``engine_not_running``…)."""
    if json_mode():
        detail: dict[str, Any] = {"code": error, "message": message}
        if field:
            detail["field"] = field
        print_json({"ok": False, "error": detail})
    else:
        # Escaped: a message quotes what the user typed or the engine said ("[PLAN
        # APPROVED]"), which rich would otherwise take for markup and swallow.
        err_console.print(f"[red]error:[/red] {escape(message)}")
    raise typer.Exit(code)


def print_problems(problems: Sequence[TaskProblem]) -> None:
    """Task files the engine could not use: the path and why."""
    for problem in problems:
        console.print(
            f"[yellow]invalid:[/yellow] {escape(problem.path)}: {escape(problem.reason)}",
            highlight=False,
        )


def answer_json(answer: Mapping[str, Any] | BaseModel) -> Mapping[str, Any]:
    """An answer as the engine sent it: a model gives back the fields it was sent, in
    their order (the engine writes them in the model's order, ``claybot.wire.base``)."""
    if isinstance(answer, Mapping):
        return answer
    return answer.model_dump(mode="json", exclude_unset=True)


def print_json(answer: Mapping[str, Any] | BaseModel) -> None:
    """What every command prints for --json: one object, the engine API's answer for the
    request (README, "The command line"). ``ok`` comes first and is true unless the
    answer says otherwise: the seed-002 routes under /api/v1 leave it out, and a script
    reads one key whatever the command."""
    typer.echo(json.dumps({"ok": True, **answer_json(answer)}, indent=2, default=str))


def print_json_line(record: Mapping[str, Any] | BaseModel) -> None:
    """A stream's --json (``events``, ``logs``): one compact object a line, as it comes."""
    typer.echo(json.dumps(answer_json(record), default=str))


@contextmanager
def engine_errors() -> Iterator[None]:
    """Turn engine and config errors into one clear line and a non-zero exit."""
    from claybot.client.errors import EngineApiError, EngineNotRunning
    from claybot.config.store import ConfigError

    try:
        yield
    except EngineNotRunning as exc:
        fail(f"{exc}. Start it with `claybot start`.", error="engine_not_running")
    except EngineApiError as exc:
        # A program gets the engine's words as they were (its field names the input).
        message = str(exc) if json_mode() else for_people(str(exc))
        fail(message, error=exc.code, field=exc.field)
    except ConfigError as exc:
        fail(str(exc), error=exc.code, field=exc.field)


def for_people(message: str) -> str:
    """An engine error as a person reads it: the fields it names without the part of
    the request they came in (``schedule``, not ``body.schedule``); the message names
    the field already, so it is not repeated after it."""
    return re.sub(r"(^|; )(?:body|query|path|header)\.", r"\1", message)


def engine_client(paths: HomePaths, timeout_s: float = 30.0) -> EngineClient:
    """A client for the engine's socket (httpx is imported on first use)."""
    from claybot.client.engine_client import EngineClient

    return EngineClient(paths.socket, timeout_s=timeout_s)


@contextmanager
def running_engine(home: Path | None) -> Iterator[EngineClient]:
    """A client for an engine that must be running."""
    from claybot.client.engine_client import EngineClient

    paths = paths_for(home)
    with engine_errors(), EngineClient(paths.socket) as client:
        yield client


def reject_remote(remote: str | None) -> None:
    if remote:
        fail(
            "--remote is reserved for a future version: remote engines are not supported yet. "
            "Run the command on the engine's machine, without --remote.",
            error="not_supported",
        )


def mutate(
    home: Path | None,
    remote: str | None,
    *,
    online: Callable[[EngineClient], T],
    offline: Callable[[ConfigStore], T],
) -> tuple[T, bool]:
    """Seed 000's update strategy: through the running engine, else the files.

    Returns the result and whether the engine applied it.
    """
    from claybot.client.engine_client import EngineClient
    from claybot.config.store import ConfigStore

    reject_remote(remote)
    paths = paths_for(home)
    with engine_errors(), EngineClient(paths.socket, timeout_s=60) as client:
        if client.is_running():
            return online(client), True
        paths.ensure()
        return offline(ConfigStore(paths)), False
    raise AssertionError("unreachable")

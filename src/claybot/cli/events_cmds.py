"""``claybot events``: follow the engine's event stream."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    console,
    engine_client,
    err_console,
    fail,
    paths_for,
    print_json_line,
)
from claybot.client.errors import EngineApiError, EngineNotRunning
from claybot.config.home import HomePaths

if TYPE_CHECKING:
    from claybot.wire.events import EventFrame

PAYLOAD_WIDTH = 200  # characters of compact payload on one line
RECONNECT_DELAY_S = 1.0


def _line(event: EventFrame) -> str:
    if event.is_init:
        payload = event.payload
        text = f"(connected; {payload.get('replayed', 0)} events replayed)"
        if payload.get("gap"):
            text += " (some older events were no longer buffered)"
    else:
        text = json.dumps(event.payload, separators=(",", ":"), ensure_ascii=False)
        if len(text) > PAYLOAD_WIDTH:
            text = text[: PAYLOAD_WIDTH - 3] + "..."
    # The init frame has no timestamp of its own: it is now.
    stamp = (event.timestamp or datetime.now(UTC).isoformat())[11:19]
    return f"{stamp} [bold]{escape(event.type)}[/bold] {escape(text)}"


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _answers(paths: HomePaths) -> bool:
    import httpx

    try:
        with engine_client(paths, timeout_s=5) as client:
            return client.is_running()
    except (httpx.HTTPError, OSError, EngineApiError):
        return False  # starting or stopping: not yet


def events(
    home: HomeOption = None,
    as_json: JsonOption = False,
    since: Annotated[
        int | None,
        typer.Option("--since", help="Replay the buffered events after this event id first."),
    ] = None,
) -> None:
    """Print engine events as they happen, one per line (Ctrl-C stops).

    Each line shows the time (UTC), the event type and its payload. If the
    engine restarts, the stream resumes where it stopped.
    """
    import httpx

    paths = paths_for(home)
    last_id = since
    connected_once = False
    try:
        while True:
            try:
                with engine_client(paths) as client:
                    for event in client.events(last_id):
                        connected_once = True
                        # The first init names the newest event: a reconnect resumes
                        # after it (ids keep increasing across engine restarts).
                        if not event.is_init or last_id is None:
                            last_id = event.id
                        if as_json:
                            print_json_line(event)
                        else:
                            console.print(_line(event), highlight=False, soft_wrap=True)
            except EngineApiError as exc:
                fail(str(exc), error=exc.code, field=exc.field)
            except BrokenPipeError:
                # Whoever read the output stopped (`| head -1`): so does this command.
                _quiet_stdout()
                return
            except (EngineNotRunning, httpx.HTTPError, OSError):
                if not connected_once:
                    fail(
                        f"no engine answers on {paths.socket}. Start it with `claybot start`.",
                        error="engine_not_running",
                    )
            # The stream ended: the engine stopped or restarted. Wait for it.
            err_console.print("[yellow]event stream closed; reconnecting…[/yellow]")
            while not _answers(paths):
                time.sleep(RECONNECT_DELAY_S)
    except KeyboardInterrupt:
        pass

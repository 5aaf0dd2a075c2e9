"""``claybot events``: follow the engine's event stream."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from claybot.cli.common import HomeOption, JsonOption, console, running_engine


def events(
    home: HomeOption = None,
    as_json: JsonOption = False,
    since: Annotated[
        int | None, typer.Option("--since", help="Replay buffered events after this id first.")
    ] = None,
) -> None:
    """Print engine events as they happen (Ctrl-C stops)."""
    try:
        with running_engine(home) as client:
            for event in client.events(since):
                if as_json:
                    typer.echo(json.dumps(event))
                    continue
                payload = json.dumps(event.get("payload"), separators=(",", ":"))
                if event["type"] == "init":
                    payload = f"(engine status; {event['payload'].get('replayed', 0)} replayed)"
                elif len(payload) > 200:
                    payload = payload[:197] + "..."
                stamp = (event.get("timestamp") or "")[11:19]
                console.print(f"{stamp} [bold]{event['type']}[/bold] {payload}", highlight=False)
    except KeyboardInterrupt:
        pass

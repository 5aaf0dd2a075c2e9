"""``claybot agents list | history | reset``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    RemoteOption,
    console,
    print_json,
    print_table,
    reject_remote,
    running_engine,
)
from claybot.cli.ids import through_prefix

if TYPE_CHECKING:
    from claybot.client.engine_client import EngineClient
    from claybot.wire.history import AgentHistory

TOOL_OUTPUT_WIDTH = 200  # characters of a tool result shown in a transcript

app = typer.Typer(help="Inspect and reset agents.", no_args_is_help=True)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TOOL_OUTPUT_WIDTH else text[: TOOL_OUTPUT_WIDTH - 3] + "..."


def _when(ms: Any) -> str:
    if not isinstance(ms, int) or ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _agent_ids(client: EngineClient) -> list[str]:
    return [agent.agentId for agent in client.agents().agents]


@app.command("list")
def list_agents(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Every agent, most recently active first."""
    with running_engine(home) as client:
        listing = client.agents()
    if as_json:
        print_json(listing)
        return
    table = Table("id", "type", "label", "lifecycle", "updated (UTC)")
    for agent in listing.agents:
        table.add_row(
            agent.agentId,
            agent.type,
            escape(agent.label),
            agent.lifecycle,
            _when(agent.updatedAt),
        )
    print_table(table)


@app.command("history")
def history(
    agent_id: Annotated[
        str, typer.Argument(help="The agent id, or its first characters (see `agents list`).")
    ],
    home: HomeOption = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=1000, help="How many of the newest records.")
    ] = 50,
    as_json: JsonOption = False,
) -> None:
    """An agent's recent history as a transcript."""
    with running_engine(home) as client:
        _, page = through_prefix(
            agent_id,
            lambda whole: client.history(whole, limit=limit),
            lambda: _agent_ids(client),
            "agent",
        )
    if as_json:
        print_json(page)
        return
    for record in _by_name(page):
        kind = record["type"]
        if kind == "user_message":
            console.print(
                f"[bold green]user>[/bold green] {escape(record['text'])}", highlight=False
            )
        elif kind == "assistant_message":
            if record.get("text"):
                console.print(
                    f"[bold cyan]agent>[/bold cyan] {escape(record['text'])}", highlight=False
                )
            for call in record.get("toolCalls") or []:
                arguments = json.dumps(call.get("arguments") or {}, ensure_ascii=False)
                console.print(
                    f"  [dim]tool call {escape(str(call.get('name')))}({escape(arguments)})[/dim]",
                    highlight=False,
                )
        elif kind == "tool_result":
            output = record.get("output") or {}
            marker = "error" if output.get("isError") else "result"
            text = _clip(str(output.get("text", "")))
            console.print(
                f"  [dim]tool {marker} ({escape(str(record.get('toolName')))}): "
                f"{escape(text)}[/dim]",
                highlight=False,
            )
        elif kind in ("start", "reset"):
            console.print(f"[dim]— {kind} {_when(record.get('at'))} —[/dim]")
        elif kind == "note":
            console.print(f"[dim]note: {escape(str(record.get('text')))}[/dim]")
    console.print(f"[dim]{len(page.records)} of {page.total} records[/dim]")


def _by_name(page: AgentHistory) -> list[dict[str, Any]]:
    """The page's records as the engine sent them, read by field name: a history can
    hold records of a type this CLI does not know (``OtherRecord``), and the transcript
    shows what it can of every kind."""
    return [record.model_dump(mode="json", exclude_unset=True) for record in page.records]


@app.command("reset")
def reset(
    agent_id: Annotated[str, typer.Argument(help="The agent id, or its first characters.")],
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Clear an agent's context; it keeps its id and its history."""
    reject_remote(remote)
    with running_engine(home) as client:
        agent_id, result = through_prefix(
            agent_id,
            client.reset_agent,
            lambda: _agent_ids(client),
            "agent",
        )
    state = "reset" if result.status == "done" else "reset queued behind the running turn"
    console.print(f"agent {agent_id}: {state}")

"""``claybot permissions list | allow | deny``: answer the agents' permission requests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    console,
    print_json,
    print_table,
    running_engine,
)
from claybot.cli.ids import through_prefix

app = typer.Typer(
    help="Permission requests from agents: list them, allow or deny (the engine must run).",
    no_args_is_help=True,
)

RequestIdArgument = Annotated[
    str, typer.Argument(help="The request id, or its first characters (see `list`).")
]


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


@app.command("list")
def list_requests(
    all_requests: Annotated[
        bool, typer.Option("--all", help="Also past decisions, not only pending requests.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pending requests (with --all, past decisions too), newest first."""
    with running_engine(home) as client:
        listing = client.permissions(status=None if all_requests else "pending")
    if as_json:
        print_json(listing)
        return
    requests = listing.requests
    if not requests:
        console.print("no pending permission requests" if not all_requests else "no requests")
        return
    table = Table("id", "status", "permission", "asked by", "reason", "asked at (UTC)")
    for request in requests:
        status: str = request.status
        if request.decidedBy:
            status += f" ({request.decidedBy})"
        table.add_row(
            request.requestId,
            status,
            escape(request.permission),
            escape(request.agentLabel),
            escape(request.reason),
            _when(request.createdAt),
        )
    print_table(table)


def _decide(request_id: str, decision: str, home: HomeOption) -> None:
    with running_engine(home) as client:
        # Only a pending request can be answered: a prefix is looked for among those.
        _, answer = through_prefix(
            request_id,
            lambda whole: client.decide_permission(whole, decision, "cli"),
            lambda: (
                request.requestId for request in client.permissions(status="pending").requests
            ),
            "pending permission request",
        )
    result = answer.request
    verdict = "allowed" if result.status == "granted" else "denied"
    console.print(
        f"{verdict} {escape(result.permission)} for {escape(result.agentLabel)}",
        highlight=False,
    )


@app.command("allow")
def allow(request_id: RequestIdArgument, home: HomeOption = None) -> None:
    """Grant a pending request; the asking agent continues with it."""
    _decide(request_id, "allow", home)


@app.command("deny")
def deny(request_id: RequestIdArgument, home: HomeOption = None) -> None:
    """Refuse a pending request; the asking agent continues without it."""
    _decide(request_id, "deny", home)

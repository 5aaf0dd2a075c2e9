"""``claybot proactive``: scheduled agents that run an objective (seed 004).

Everything goes through the running engine's ``/api/agents`` routes on its socket.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    YesOption,
    answer_json,
    confirm_deletion,
    console,
    err_console,
    fail,
    print_json,
    print_table,
    running_engine,
)
from claybot.cli.ids import resolve_prefix, through_prefix

if TYPE_CHECKING:
    from collections.abc import Callable

    from claybot.client.engine_client import EngineClient
    from claybot.wire.proactive import Execution, ProactiveAgentSummary

app = typer.Typer(
    help="Proactive agents: objectives run on a cron schedule (the engine must be running).",
    no_args_is_help=True,
)

AgentIdArgument = Annotated[
    str, typer.Argument(help="The agent id, or its first characters (see `list`).")
]
NameOption = Annotated[str | None, typer.Option("--name", help="Up to 50 characters.")]
ObjectiveOption = Annotated[
    str | None, typer.Option("--objective", help="What the agent does on each run.")
]
ScheduleOption = Annotated[
    str | None, typer.Option("--schedule", help="5-field cron expression, e.g. '0 * * * *'.")
]
CwdOption = Annotated[
    str | None,
    typer.Option("--cwd", help="Working directory inside the engine's workspace."),
]
ModelOption = Annotated[
    str | None, typer.Option("--model", help="Claude model (opus, sonnet, haiku); '' = default.")
]
TimeoutOption = Annotated[
    int | None, typer.Option("--timeout-ms", help="Kill a run after this many milliseconds.")
]
RetriesOption = Annotated[
    int | None,
    typer.Option("--max-retries", help="Consecutive failures before the agent is paused."),
]
TimezoneOption = Annotated[
    str | None, typer.Option("--timezone", help="IANA zone of the schedule, e.g. Europe/Paris.")
]
RunnerOption = Annotated[
    str | None,
    typer.Option("--runner", help="'claude' (the Claude CLI) or 'engine' (an engine agent)."),
]
POLL_S = 0.25
NOUN = "proactive agent"
T = TypeVar("T")


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _fields(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _agent_ids(client: EngineClient) -> list[str]:
    return [agent.id for agent in client.proactive_agents().agents]


def _on_agent(client: EngineClient, agent_id: str, act: Callable[[str], T]) -> tuple[str, T]:
    """``act`` on the agent ``agent_id`` names (its whole id, or a unique prefix)."""
    return through_prefix(agent_id, act, lambda: _agent_ids(client), NOUN)


def _show(agent: ProactiveAgentSummary, verb: str) -> None:
    console.print(
        f"{verb} [bold]{escape(agent.name)}[/bold] ({agent.id}): {agent.status}, "
        f"next run {_when(agent.nextRunAt)} UTC",
        highlight=False,
    )


@app.command("list")
def list_agents(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Every proactive agent with its status, schedule and last result."""
    with running_engine(home) as client:
        listing = client.proactive_agents()
    if as_json:
        print_json(listing)
        return
    agents = listing.agents
    if not agents:
        console.print("no proactive agents; add one with `claybot proactive create`")
        return
    table = Table("id", "name", "status", "schedule", "runner", "last run (UTC)", "result",
                  "next run (UTC)", "runs")  # fmt: skip
    for agent in agents:
        status = "running" if agent.running else agent.status
        table.add_row(
            agent.id,
            escape(agent.name),
            status,
            escape(f"{agent.schedule} ({agent.timezone})"),
            agent.runner,
            _when(agent.lastExecutionAt),
            agent.lastResult or "-",
            _when(agent.nextRunAt),
            str(agent.totalExecutions),
        )
    print_table(table)


@app.command("create")
def create(
    name: Annotated[str, typer.Option("--name", help="Up to 50 characters.")],
    objective: Annotated[str, typer.Option("--objective", help="What the agent does each run.")],
    schedule: Annotated[
        str, typer.Option("--schedule", help="5-field cron expression, e.g. '0 * * * *'.")
    ],
    cwd: CwdOption = None,
    model: ModelOption = None,
    timeout_ms: TimeoutOption = None,
    max_retries: RetriesOption = None,
    timezone: TimezoneOption = None,
    runner: RunnerOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an agent; it is active at once and runs on its schedule."""
    body = _fields(
        name=name, objective=objective, schedule=schedule, cwd=cwd, model=model,
        timeoutMs=timeout_ms, maxRetries=max_retries, timezone=timezone, runner=runner,
    )  # fmt: skip
    with running_engine(home) as client:
        answer = client.create_proactive_agent(body)
    if as_json:
        print_json(answer)
        return
    _show(answer.agent, "created")


@app.command("edit")
def edit(
    agent_id: AgentIdArgument,
    name: NameOption = None,
    objective: ObjectiveOption = None,
    schedule: ScheduleOption = None,
    cwd: CwdOption = None,
    model: ModelOption = None,
    timeout_ms: TimeoutOption = None,
    max_retries: RetriesOption = None,
    timezone: TimezoneOption = None,
    runner: RunnerOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change the options given; the others keep their values."""
    body = _fields(
        name=name, objective=objective, schedule=schedule, cwd=cwd, model=model,
        timeoutMs=timeout_ms, maxRetries=max_retries, timezone=timezone, runner=runner,
    )  # fmt: skip
    if not body:
        fail("nothing to change: give at least one option, e.g. --schedule")
    with running_engine(home) as client:
        _, answer = _on_agent(
            client, agent_id, lambda whole: client.update_proactive_agent(whole, body)
        )
    if as_json:
        print_json(answer)
        return
    _show(answer.agent, "updated")


@app.command("pause")
def pause(agent_id: AgentIdArgument, home: HomeOption = None) -> None:
    """Stop the schedule (`run` still works; the agent stays paused)."""
    with running_engine(home) as client:
        _, answer = _on_agent(client, agent_id, client.pause_proactive_agent)
    _show(answer.agent, "paused")


@app.command("resume")
def resume(agent_id: AgentIdArgument, home: HomeOption = None) -> None:
    """Restart the schedule and reset the failure count."""
    with running_engine(home) as client:
        _, answer = _on_agent(client, agent_id, client.resume_proactive_agent)
    _show(answer.agent, "resumed")


@app.command("run")
def run(
    agent_id: AgentIdArgument,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait for the run, print its log, exit 1 if it failed.")
    ] = False,
    wait_timeout: Annotated[
        float, typer.Option("--wait-timeout", help="Give up waiting after this many seconds.")
    ] = 3600.0,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run the agent now: queued behind running executions, never dropped.

    With --wait --json, the answer is {"ok", "agentId", "execution"}; a run that failed
    makes it {"ok": false, "error": {...}, ...} with exit code 1.
    """
    with running_engine(home) as client:
        agent_id, queued = _on_agent(client, agent_id, client.execute_proactive_agent)
        if not wait:
            if as_json:
                print_json(queued)
            else:
                where = "started" if queued.status == "started" else (
                    f"queued (position {queued.position})"
                )  # fmt: skip
                console.print(f"execution {queued.executionId} {where}", highlight=False)
            return
        execution = _wait_for(client, agent_id, queued.executionId, wait_timeout)
        log = "" if as_json else client.get_text(
            f"/api/agents/{agent_id}/logs", executionId=execution.executionId
        )  # fmt: skip
    succeeded = execution.result == "success"
    outcome = f"{execution.result} in {execution.durationMs / 1000:.1f} s" + (
        f": {execution.error}" if execution.error else ""
    )
    if as_json:
        # No single route answers this: it is shaped as the API's answers are.
        answer: dict[str, Any] = {"agentId": agent_id, "execution": answer_json(execution)}
        if not succeeded:
            answer = {"ok": False, "error": {"code": "run_failed", "message": outcome}, **answer}
        print_json(answer)
    else:
        typer.echo(log, nl=False)
        err_console.print(escape(outcome), highlight=False)
    if not succeeded:
        raise typer.Exit(1)


def _wait_for(
    client: EngineClient, agent_id: str, execution_id: str, timeout_s: float
) -> Execution:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for execution in client.executions(agent_id, limit=50).executions:
            if execution.executionId == execution_id:
                return execution
        time.sleep(POLL_S)
    fail(
        f"execution {execution_id} did not finish within {timeout_s:g} s; it may still run",
        error="timeout",
    )


@app.command("logs")
def logs(
    agent_id: AgentIdArgument,
    execution: Annotated[
        str | None,
        typer.Option(
            "--execution", help="An execution id, or its first characters (default: the newest)."
        ),
    ] = None,
    history: Annotated[
        bool, typer.Option("--list", help="List the executions instead of printing a log.")
    ] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 20,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print an execution's clean output, or (--list) the execution history."""
    if not history:
        if as_json:
            fail("--json goes with --list: an execution's log is plain text")
        with running_engine(home) as client:
            _, text = _on_agent(client, agent_id, lambda whole: _log_text(client, whole, execution))
        typer.echo(text, nl=False)
        return
    with running_engine(home) as client:
        _, listing = _on_agent(
            client,
            agent_id,
            lambda whole: client.executions(whole, limit=limit),
        )
    if as_json:
        print_json(listing)
        return
    table = Table("execution", "trigger", "started (UTC)", "seconds", "result", "exit", "error")
    for item in listing.executions:
        table.add_row(
            item.executionId,
            item.trigger,
            _when(item.startedAt),
            f"{item.durationMs / 1000:.1f}",
            item.result,
            "-" if item.exitCode is None else str(item.exitCode),
            escape(item.error or ""),
        )
    print_table(table, whole=("execution",))


def _log_text(client: EngineClient, agent_id: str, execution: str | None) -> str:
    """The log of ``execution`` (its id, or a unique prefix among the newest thousand),
    else of the newest one."""
    path = f"/api/agents/{agent_id}/logs"
    if execution is None:
        return client.get_text(path)

    def execution_ids() -> list[str]:
        listing = client.executions(agent_id, limit=1000)
        return [item.executionId for item in listing.executions]

    _, text = through_prefix(
        execution, lambda whole: client.get_text(path, executionId=whole), execution_ids,
        "execution",
    )  # fmt: skip
    return text


@app.command("delete")
def delete(agent_id: AgentIdArgument, yes: YesOption = False, home: HomeOption = None) -> None:
    """Delete the agent: its schedule stops, a running execution ends, its files go."""
    with running_engine(home) as client:
        # The whole id first, so the question names the agent that would go.
        agent_id = resolve_prefix(agent_id, _agent_ids(client), NOUN)
        confirm_deletion(f"delete proactive agent {agent_id!r} and its files", yes)
        client.delete_proactive_agent(agent_id)
    console.print(f"deleted {agent_id}", highlight=False)

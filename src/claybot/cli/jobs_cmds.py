"""``claybot jobs create | list | show | respond | cancel | logs``: seed 002's jobs.

They talk to the running engine over its Unix socket, through the same
``/api/v1`` routes an HTTP client uses (the socket is the owner's: it sees every
job). A job in plan approval waits with its plan: `claybot jobs show` prints it,
`claybot jobs respond --approve` (or `--edit FILE`, `--reject TEXT`) answers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    console,
    fail,
    print_json,
    print_table,
    running_engine,
)
from claybot.cli.ids import through_prefix

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from claybot.client.engine_client import EngineClient
    from claybot.wire.jobs import LogPage

app = typer.Typer(
    help="Jobs (seed 002): tasks the engine's workers run, with plan approval.",
    no_args_is_help=True,
)
T = TypeVar("T")
TERMINAL = {"completed", "failed", "cancelled"}
FOLLOW_POLL_S = 0.5
PAGE = 100  # the most jobs the API lists at once

JobIdArgument = Annotated[
    str, typer.Argument(help="The job's id, or its first characters (see `jobs list`).")
]


def _job_ids(client: EngineClient) -> Iterator[str]:
    """Every job's id, page after page (only when a prefix is to be resolved)."""
    offset = 0
    while True:
        page = client.jobs(limit=PAGE, offset=offset)
        yield from (job.id for job in page.jobs)
        offset += len(page.jobs)
        if not page.jobs or offset >= page.count:
            return


def _on_job(client: EngineClient, job_id: str, act: Callable[[str], T]) -> tuple[str, T]:
    """``act`` on the job ``job_id`` names (its whole id, or a unique prefix)."""
    return through_prefix(job_id, act, lambda: _job_ids(client), "job")


@app.command("create")
def create(
    task: Annotated[str, typer.Argument(help="What the job should do.")],
    mode: Annotated[
        str,
        typer.Option(
            "--mode", help="plan_approval (ask before acting), auto_execute or always_ask."
        ),
    ] = "plan_approval",
    priority: Annotated[int, typer.Option(min=0, max=100, help="Higher runs first.")] = 0,
    timeout: Annotated[
        int, typer.Option("--timeout", min=30, max=3600, help="Seconds the job may run.")
    ] = 300,
    model: Annotated[str | None, typer.Option(help="A provider id or model to try first.")] = None,
    network: Annotated[
        bool, typer.Option("--network", help="Let run_python reach the network.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Queue a job; prints its id."""
    body: dict[str, Any] = {
        "task": task,
        "hitl_mode": mode,
        "priority": priority,
        "timeout_seconds": timeout,
        "allow_network": network,
    }
    if model:
        body["model"] = model
    with running_engine(home) as client:
        created = client.create_job(body)
    if as_json:
        print_json(created)
        return
    typer.echo(created.id)


@app.command("list")
def list_jobs(
    status: Annotated[str | None, typer.Option(help="Only jobs in this status.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=100)] = 50,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """The newest jobs first."""
    with running_engine(home) as client:
        page = client.jobs(status=status, limit=limit)
    if as_json:
        print_json(page)
        return
    table = Table("id", "status", "priority", "created", "task")
    for job in page.jobs:
        table.add_row(
            job.id,
            job.status,
            str(job.priority),
            job.created_at[:19],
            escape(job.task.splitlines()[0][:60] if job.task else ""),
        )
    print_table(table)
    console.print(f"{len(page.jobs)} of {page.count}")


@app.command("show")
def show(job_id: JobIdArgument, home: HomeOption = None, as_json: JsonOption = False) -> None:
    """A job: its status, its question or plan, its result and its artifacts."""
    with running_engine(home) as client:
        _, job = _on_job(client, job_id, client.job)
    if as_json:
        print_json(job)
        return
    # Here, not with the module: every `claybot` command (`start` too) imports the
    # command modules, and rich's Markdown brings markdown-it and pygments (30 ms).
    from rich.markdown import Markdown

    console.print(f"[bold]{escape(job.id)}[/bold]  {job.status}  ({job.hitl_mode})")
    console.print(escape(job.task))
    question = job.agent_question
    if question:
        plan = _plan(question)
        if plan is not None:
            console.rule("plan")
            console.print(Markdown(plan["plan"]))
            console.print(f"[yellow]{escape(plan['question'])}[/yellow]")
            console.print("answer: claybot jobs respond ID --approve | --edit FILE | --reject TEXT")
        else:
            console.print(f"[yellow]question:[/yellow] {escape(question)}")
            console.print("answer: claybot jobs respond ID TEXT")
    if job.result:
        console.rule("result")
        console.print(Markdown(job.result))
    if job.error_message:
        console.print(f"[red]error:[/red] {escape(job.error_message)}")
    for artifact in job.artifacts:
        console.print(f"artifact {escape(artifact.filename)} ({artifact.size_bytes} bytes)")


def _plan(question: str) -> dict[str, str] | None:
    try:
        value = json.loads(question)
    except ValueError:
        return None
    if isinstance(value, dict) and value.get("type") == "plan":
        return {"plan": str(value.get("plan", "")), "question": str(value.get("question", ""))}
    return None


@app.command("respond")
def respond(
    job_id: JobIdArgument,
    answer: Annotated[str, typer.Argument(help="Your answer or feedback.")] = "",
    approve: Annotated[bool, typer.Option("--approve", help="Approve the plan.")] = False,
    reject: Annotated[bool, typer.Option("--reject", help="Reject the plan.")] = False,
    edit: Annotated[
        Path | None, typer.Option("--edit", help="A file with the plan as you want it.")
    ] = None,
    home: HomeOption = None,
) -> None:
    """Answer a job that waits for you (its question, or its plan)."""
    chosen = [name for name, on in (("approve", approve), ("reject", reject), ("edit", edit))
              if on]  # fmt: skip
    if len(chosen) > 1:
        fail("choose one of --approve, --reject and --edit")
    action = chosen[0] if chosen else "respond"
    body: dict[str, Any] = {"action": action, "answer": answer}
    if edit is not None:
        body["editedPlan"] = edit.read_text()
    with running_engine(home) as client:
        _, result = _on_job(client, job_id, lambda whole: client.respond_to_job(whole, body))
    console.print(f"{result.id}: {result.status}")


@app.command("cancel")
def cancel(job_id: JobIdArgument, home: HomeOption = None) -> None:
    """Cancel a job (a running one stops within seconds)."""
    with running_engine(home) as client:
        _, job = _on_job(client, job_id, client.cancel_job)
    console.print(f"{job.id}: {job.status}")


@app.command("logs")
def logs(
    job_id: JobIdArgument,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")
    ] = False,
    home: HomeOption = None,
) -> None:
    """A job's log lines, oldest first."""
    after = 0
    with running_engine(home) as client:

        def page_after(whole: str) -> LogPage:
            return client.job_logs(whole, after=after, limit=1000)

        job_id, page = _on_job(client, job_id, page_after)
        while True:
            for line in page.logs:
                after = max(after, line.id)
                colour = {"error": "red", "warn": "yellow"}.get(line.level, "dim")
                stamp = line.timestamp[11:19]
                console.print(f"[{colour}]{stamp}[/{colour}] {escape(line.message)}")
            if not follow or (not page.logs and client.job(job_id).status in TERMINAL):
                return
            if not page.logs:
                time.sleep(FOLLOW_POLL_S)
            page = page_after(job_id)

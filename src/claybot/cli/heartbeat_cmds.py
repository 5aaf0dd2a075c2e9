"""``claybot heartbeat list | add | remove | run`` (through the running engine)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    console,
    print_json,
    print_problems,
    running_engine,
)

app = typer.Typer(
    help="Heartbeat tasks: checked together in one batch every interval.", no_args_is_help=True
)


@app.command("list")
def list_tasks(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Tasks, the last beat and the next one."""
    with running_engine(home) as client:
        listing = client.get("/v1/engine/heartbeat/tasks")
    if as_json:
        print_json(listing)
        return
    if listing["tasks"]:
        table = Table("id", "title", "gate")
        for task in listing["tasks"]:
            gate = task["gate"]["command"] if task.get("gate") else "-"
            table.add_row(task["id"], escape(task["title"]), escape(gate))
        console.print(table)
        console.print(f"last run: {listing['tasks'][0]['lastRunAt'] or 'never'}")
    else:
        console.print("no heartbeat tasks")
    console.print(f"next run: {listing['nextRunAt']} (every {listing['intervalS']:.0f}s)")
    print_problems(listing["problems"])


@app.command("add")
def add(
    title: Annotated[str, typer.Option("--title", help="What the check is called.")],
    prompt: Annotated[str, typer.Option("--prompt", help="What the agent should check.")],
    task_id: Annotated[
        str | None, typer.Option("--id", help="Default: made from the title.")
    ] = None,
    gate: Annotated[
        str | None, typer.Option("--gate", help="Shell command; exit 0 includes the task.")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace a task with this id.")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Add a heartbeat task (<home>/heartbeat/<id>.md)."""
    body: dict[str, Any] = {"title": title, "prompt": prompt, "overwrite": overwrite}
    if task_id:
        body["id"] = task_id
    if gate:
        body["gate"] = {"command": gate}
    with running_engine(home) as client:
        task = client.post("/v1/engine/heartbeat/tasks", body)["task"]
    console.print(f"added {task['id']} in {escape(task['path'])}", highlight=False)


@app.command("remove")
def remove(
    task_id: Annotated[str, typer.Argument(help="The task id.")], home: HomeOption = None
) -> None:
    """Remove a heartbeat task."""
    with running_engine(home) as client:
        client.delete(f"/v1/engine/heartbeat/tasks/{task_id}")
    console.print(f"removed {task_id}")


@app.command("run")
def run(
    task_id: Annotated[
        list[str] | None, typer.Argument(help="Only these tasks (default: all).")
    ] = None,
    home: HomeOption = None,
) -> None:
    """Run the heartbeat now."""
    with running_engine(home) as client:
        client.post("/v1/engine/heartbeat/run", {"ids": task_id} if task_id else {})
    console.print("the heartbeat is running; its tasks report on `claybot events`")

"""``claybot heartbeat list | add | remove | run``.

Through the running engine; without one, list, add and remove work on the task
files (``<home>/heartbeat/<id>.md``), as cron's commands do. ``run`` needs the engine.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    YesOption,
    confirm_deletion,
    console,
    fail,
    mutate,
    print_json,
    print_problems,
    print_table,
    running_engine,
)
from claybot.cli.ids import resolve_prefix

if TYPE_CHECKING:
    from collections.abc import Iterator

    from claybot.client.engine_client import EngineClient
    from claybot.config.store import ConfigStore
    from claybot.heartbeat.store import HeartbeatStore
    from claybot.wire.heartbeat import HeartbeatTask, HeartbeatTaskFiles, HeartbeatTaskList

app = typer.Typer(
    help="Heartbeat tasks: checked together in one batch every interval.", no_args_is_help=True
)


def _store(config: ConfigStore) -> HeartbeatStore:
    from claybot.heartbeat.store import HeartbeatStore

    return HeartbeatStore(config.paths.home / "heartbeat")


@contextmanager
def _said_plainly() -> Iterator[None]:
    """A refusal of the task files (a taken id, an unknown one) as one error line."""
    from claybot.kernel.errors import ClayError

    try:
        yield
    except ClayError as exc:
        fail(exc.message, error=exc.code, field=exc.field)


NOUN = "heartbeat task"


def _task_ids(client: EngineClient) -> list[str]:
    return [task.id for task in client.heartbeat_tasks().tasks]


def _offline_ids(config: ConfigStore) -> list[str]:
    tasks, _ = _store(config).scan()
    return [task.id for task in tasks]


@app.command("list")
def list_tasks(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Tasks, the last beat and the next one."""

    def online(client: EngineClient) -> HeartbeatTaskList | HeartbeatTaskFiles:
        return client.heartbeat_tasks()

    def offline(config: ConfigStore) -> HeartbeatTaskList | HeartbeatTaskFiles:
        from claybot.wire.heartbeat import HeartbeatTaskFiles

        store = _store(config)
        tasks, problems = store.scan()
        last = store.read_state().get("lastRunAt")
        return HeartbeatTaskFiles.model_validate(
            {
                "ok": True,
                "tasks": [task.to_dict(last if isinstance(last, str) else None) for task in tasks],
                "problems": [{"path": p.path, "reason": p.reason} for p in problems],
                "nextRunAt": None,
                "intervalS": config.read_settings().heartbeat.interval_s,
            }
        )

    listing, _ = mutate(home, None, online=online, offline=offline)
    if as_json:
        print_json(listing)
        return
    if listing.tasks:
        table = Table("id", "title", "gate")
        for task in listing.tasks:
            gate = task.gate.command if task.gate else "-"
            table.add_row(task.id, escape(task.title), escape(gate))
        print_table(table)
        console.print(f"last run: {listing.tasks[0].lastRunAt or 'never'}")
    else:
        console.print("no heartbeat tasks")
    next_run = listing.nextRunAt or "when the engine runs"
    console.print(f"next run: {next_run} (every {listing.intervalS:.0f}s)")
    print_problems(listing.problems)


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

    def online(client: EngineClient) -> HeartbeatTask:
        return client.add_heartbeat_task(body).task

    def offline(config: ConfigStore) -> HeartbeatTask:
        from claybot.cron.task import Gate
        from claybot.wire.heartbeat import HeartbeatTask

        with _said_plainly():
            added = _store(config).add(
                title,
                prompt,
                task_id=task_id,
                gate=Gate(command=gate) if gate else None,
                overwrite=overwrite,
            )
        return HeartbeatTask.model_validate(added.to_dict())

    task, _ = mutate(home, None, online=online, offline=offline)
    console.print(f"added {task.id} in {escape(task.path)}", highlight=False)


@app.command("remove")
def remove(
    task_id: Annotated[str, typer.Argument(help="The task id, or its first characters.")],
    yes: YesOption = False,
    home: HomeOption = None,
) -> None:
    """Remove a heartbeat task."""
    # The whole id first, so the question names the task that would go.
    known, _ = mutate(home, None, online=_task_ids, offline=_offline_ids)
    task_id = resolve_prefix(task_id, known, NOUN)
    confirm_deletion(f"remove heartbeat task {task_id!r}", yes)

    def online(client: EngineClient) -> None:
        client.remove_heartbeat_task(task_id)

    def offline(config: ConfigStore) -> None:
        with _said_plainly():
            _store(config).remove(task_id)

    mutate(home, None, online=online, offline=offline)
    console.print(f"removed {task_id}")


@app.command("run")
def run(
    task_id: Annotated[
        list[str] | None,
        typer.Argument(help="Only these tasks, by id or its first characters (default: all)."),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Run the heartbeat now."""
    from claybot.client.errors import EngineApiError

    with running_engine(home) as client:
        try:
            client.run_heartbeat(task_id)
        except EngineApiError as exc:
            # Some id is not whole: resolve them all against one listing, and try again.
            if exc.status != 404 or not task_id:
                raise
            known = _task_ids(client)
            whole = [resolve_prefix(given, known, NOUN) for given in task_id]
            if whole == task_id:
                raise
            client.run_heartbeat(whole)
    console.print("the heartbeat is running; its tasks report on `claybot events`")

"""``claybot cron list | add | remove | run | enable | disable``.

Through the running engine when there is one; otherwise ``add``, ``remove``,
``enable`` and ``disable`` edit ``<home>/cron/`` directly (the engine reads the
folder at boot), and ``list`` reads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    RemoteOption,
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
from claybot.cli.ids import resolve_prefix, through_prefix

if TYPE_CHECKING:
    from collections.abc import Callable

    from claybot.client.engine_client import EngineClient
    from claybot.config.store import ConfigStore
    from claybot.cron.store import CronStore, CronTask
    from claybot.wire.cron import CronTask as TaskAnswer
    from claybot.wire.cron import CronTaskList

T = TypeVar("T")

app = typer.Typer(help="Scheduled tasks (cron expressions in a time zone).", no_args_is_help=True)

TaskIdArgument = Annotated[
    str, typer.Argument(help="The task id, or its first characters (see `claybot cron list`).")
]
NOUN = "cron task"


def _store(config: ConfigStore) -> CronStore:
    from claybot.cron.store import CronStore

    return CronStore(config.paths.home / "cron", config.read_settings().engine.timezone)


def _offline_task(store: CronStore, task_id: str) -> CronTask:
    """The task ``task_id`` names (its id, or a unique prefix), from the files."""
    tasks, _ = store.scan()
    return tasks[resolve_prefix(task_id, tasks, NOUN)]


def _task_ids(client: EngineClient) -> list[str]:
    return [task.taskId for task in client.cron_tasks().tasks]


def _online(client: EngineClient, task_id: str, act: Callable[[str], T]) -> tuple[str, T]:
    """``act`` through the engine on the task ``task_id`` names (its id, or a unique prefix)."""
    return through_prefix(task_id, act, lambda: _task_ids(client), NOUN)


@app.command("list")
def list_tasks(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Tasks with their schedule, zone and next run, and any invalid TASK.md."""

    def online(client: EngineClient) -> CronTaskList:
        return client.cron_tasks()

    def offline(config: ConfigStore) -> CronTaskList:
        # The engine's listing as it would answer: no next run is known, none runs.
        from claybot.cron.ledger import LEDGER_FILE, RunLedger
        from claybot.wire.cron import CronTaskList

        tasks, problems = _store(config).scan()
        ledger = RunLedger(config.paths.home / "cron" / LEDGER_FILE)
        ledger.read()
        listed = [
            task.listing(ledger.runs(task.id).last_finished, None, False)
            for task in sorted(tasks.values(), key=lambda t: t.spec.name)
        ]
        problem_list = [problem.to_dict() for problem in problems]
        return CronTaskList.model_validate({"ok": True, "tasks": listed, "problems": problem_list})

    listing, running = mutate(home, None, online=online, offline=offline)
    if as_json:
        print_json(listing)
        return
    if not listing.tasks:
        console.print("no cron tasks")
    else:
        table = Table("id", "name", "schedule", "zone", "enabled", "next run")
        for task in listing.tasks:
            upcoming = task.nextRunAt or ("-" if running else "(engine not running)")
            table.add_row(
                task.taskId,
                escape(task.name),
                task.schedule,
                task.timezone,
                "yes" if task.enabled else "no",
                upcoming,
            )
        print_table(table)
    print_problems(listing.problems)


@app.command("add")
def add(
    name: Annotated[str, typer.Option("--name", help="What the task is called.")],
    schedule: Annotated[str, typer.Option("--schedule", help='5 fields, e.g. "0 9 * * 1-5".')],
    prompt: Annotated[str, typer.Option("--prompt", help="What the agent is asked each run.")],
    timezone: Annotated[
        str | None, typer.Option("--timezone", help="IANA zone (default: the engine's).")
    ] = None,
    description: Annotated[str, typer.Option("--description")] = "",
    agent_id: Annotated[
        str | None, typer.Option("--agent", help="Run in this agent, not the task's own.")
    ] = None,
    gate: Annotated[
        str | None, typer.Option("--gate", help="Shell command; exit 0 lets a run happen.")
    ] = None,
    misfire: Annotated[
        str, typer.Option("--misfire", help="Runs missed while down: skip or run-once.")
    ] = "run-once",
    overlap: Annotated[
        str, typer.Option("--overlap", help="While the last run is busy: skip or queue.")
    ] = "skip",
    delete_after_run: Annotated[bool, typer.Option("--once", help="Delete after one run.")] = False,
    disabled: Annotated[bool, typer.Option("--disabled", help="Create it disabled.")] = False,
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Create a task (a new folder under <home>/cron)."""
    body: dict[str, Any] = {
        "name": name,
        "schedule": schedule,
        "prompt": prompt,
        "description": description,
        "enabled": not disabled,
        "deleteAfterRun": delete_after_run,
        "misfire": misfire,
        "overlap": overlap,
    }
    if timezone:
        body["timezone"] = timezone
    if agent_id:
        body["agentId"] = agent_id
    if gate:
        body["gate"] = {"command": gate}

    def online(client: EngineClient) -> TaskAnswer:
        return client.add_cron_task(body).task

    def offline(config: ConfigStore) -> TaskAnswer:
        from pydantic import ValidationError

        from claybot.config.store import describe_validation_error
        from claybot.cron.task import CronTaskSpec
        from claybot.kernel.ids import new_id
        from claybot.scheduling.schedule import CronSchedule, ScheduleError
        from claybot.wire.cron import CronTask as TaskAnswer

        store = _store(config)
        fields = {k: v for k, v in body.items() if k != "prompt"}
        try:
            spec = CronTaskSpec.model_validate({"taskId": new_id(), **fields})
            CronSchedule.parse(spec.schedule, spec.timezone or store.default_timezone)
        except ValidationError as exc:
            fail(describe_validation_error(exc))
        except ScheduleError as exc:
            fail(str(exc))
        return TaskAnswer.model_validate(store.create(spec, prompt).to_dict())

    task, running = mutate(home, remote, online=online, offline=offline)
    where = "" if running else " (the engine schedules it when it starts)"
    console.print(f"added {task.taskId} in {escape(task.path)}{where}", highlight=False)


@app.command("remove")
def remove(
    task_id: TaskIdArgument,
    yes: YesOption = False,
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Delete a task and its folder (memory and files included)."""
    # The whole id first, so the question names the task that would go.
    known, _ = mutate(
        home, remote, online=_task_ids, offline=lambda config: list(_store(config).scan()[0])
    )
    task_id = resolve_prefix(task_id, known, NOUN)
    confirm_deletion(f"delete cron task {task_id!r} with its folder", yes)

    def online(client: EngineClient) -> None:
        client.remove_cron_task(task_id)

    def offline(config: ConfigStore) -> None:
        store = _store(config)
        store.delete(_offline_task(store, task_id))

    mutate(home, remote, online=online, offline=offline)
    console.print(f"removed {task_id}")


def _set_enabled(task_id: str, enabled: bool, home: HomeOption, remote: RemoteOption) -> None:
    verb = "enable" if enabled else "disable"

    def online(client: EngineClient) -> str:
        whole, _ = _online(
            client, task_id, lambda whole: client.set_cron_task_enabled(whole, enabled)
        )
        return whole

    def offline(config: ConfigStore) -> str:
        store = _store(config)
        task = _offline_task(store, task_id)
        spec = task.spec.model_copy(update={"enabled": enabled})
        store.write_spec(task.directory, spec, task.prompt)
        return task.id

    whole, _ = mutate(home, remote, online=online, offline=offline)
    console.print(f"{verb}d {whole}")


@app.command("enable")
def enable(task_id: TaskIdArgument, home: HomeOption = None, remote: RemoteOption = None) -> None:
    """Enable a task; runs missed while it was disabled are not owed."""
    _set_enabled(task_id, True, home, remote)


@app.command("disable")
def disable(task_id: TaskIdArgument, home: HomeOption = None, remote: RemoteOption = None) -> None:
    """Disable a task; it stays on disk."""
    _set_enabled(task_id, False, home, remote)


@app.command("run")
def run(task_id: TaskIdArgument, home: HomeOption = None) -> None:
    """Run a task now (the engine must be running)."""
    with running_engine(home) as client:
        task_id, result = _online(client, task_id, client.run_cron_task)
    console.print(f"started {task_id} ({result.messageId})")

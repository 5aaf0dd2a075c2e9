"""``claybot worker``: run jobs from the engine's database on this machine.

A worker needs no engine here: it reaches the database (PostgreSQL, for workers
on several machines; SQLite works for more workers on the engine's own machine),
claims queued jobs and runs them with this home's providers and sandbox. It
prints a line as each job starts and ends. Ctrl-C or SIGTERM drains: the jobs it
holds go back to the queue and continue from their last step on another worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Annotated

import typer

from claybot.cli.common import HomeOption, console, err_console, fail, paths_for
from claybot.config.home import HomePaths
from claybot.config.store import ConfigStore
from claybot.db.errors import StoreError
from claybot.db.location import database_url, redact_url
from claybot.kernel.collector import pace_collector
from claybot.kernel.event_loop import event_loop_runner

if TYPE_CHECKING:
    from claybot.jobs.worker import Worker


def worker(
    database: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            envvar="CLAYBOT_DATABASE_URL",
            help="The engine's database (postgresql://user@host/db). Default: the home's SQLite.",
            show_default=False,
        ),
    ] = None,
    slots: Annotated[
        int | None,
        typer.Option("--slots", min=1, max=256, help="Jobs run at once (default: jobs.workers)."),
    ] = None,
    worker_id: Annotated[
        str | None,
        typer.Option("--id", help="This worker's name in `workers` (default: <host>-<pid>)."),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="Say only when starting and stopping, not per job.")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Run queued jobs from the database until stopped (Ctrl-C drains: jobs are released)."""
    paths = paths_for(home)
    env = dict(os.environ)
    if database:
        env["CLAYBOT_DATABASE_URL"] = database
    url = database_url(paths, env)
    try:
        with event_loop_runner() as runner:
            runner.run(_serve(paths, url, slots, worker_id, env, quiet))
    except StoreError as exc:
        fail(f"cannot use the database {redact_url(url)}: {exc}")


async def _serve(
    paths: HomePaths,
    url: str,
    slots: int | None,
    worker_id: str | None,
    env: dict[str, str],
    quiet: bool,
) -> None:
    # Imported here: `claybot --help` should not load SQLAlchemy and the providers.
    from claybot.db.database import create_database_engine, migrate
    from claybot.jobs.database import JobDatabase
    from claybot.jobs.runner import job_runner
    from claybot.jobs.signals import JobSignals
    from claybot.jobs.worker import Worker
    from claybot.providers.configured import ConfiguredProviders
    from claybot.providers.registry import ProviderRegistry, builtin_provider_types
    from claybot.providers.router import router_for
    from claybot.sandbox import Sandbox

    pace_collector()  # a worker allocates per step as the engine does (kernel/collector.py)
    # Before the worker is first recorded: a SIGTERM from then on drains it (and says
    # "stopped"), even one that comes while it starts; the default action would kill it
    # silently, to be listed dead.
    stopped = _stop_on_signals()
    paths.ensure()
    config = ConfigStore(paths)
    settings = config.read_settings()
    providers = ConfiguredProviders(ProviderRegistry(builtin_provider_types()), env)
    await providers.rebuild(settings, config.read_auth())
    engine = create_database_engine(url)
    sandbox = Sandbox(paths.home, environ=env)
    signals: JobSignals | None = None
    db: JobDatabase | None = None
    try:
        await migrate(engine)
        db = JobDatabase(
            engine,
            lease=timedelta(seconds=settings.jobs.lease_s),
            max_file_bytes=settings.jobs.max_file_bytes,
        )
        signals = JobSignals(db.tables)
        signals.start()
        runner = job_runner(
            db, partial(router_for, providers.router), sandbox, paths.home / "jobs", settings.jobs
        )
        progress = Progress()
        work = Worker(
            db,
            runner,
            signals,
            worker_id=worker_id,
            slots=slots or max(1, settings.jobs.workers),
            on_change=None if quiet else progress.show,
        )
        await work.start()
        console.print(f"worker {work.id}: {work.slots} slot(s) on {redact_url(url)}; Ctrl-C drains")
        await stopped.wait()
        err_console.print(f"draining: {len(work.running)} job(s) go back to the queue")
        await work.stop()
    finally:
        if signals is not None:
            await signals.close()
        if db is not None:
            await db.close()
        await providers.close()
        await sandbox.close()
        await engine.dispose()


class Progress:
    """One line per job as it starts and as it ends."""

    def __init__(self) -> None:
        self._started: dict[str, float] = {}

    def show(self, work: Worker) -> None:
        now = time.monotonic()
        for job_id, running in work.running.items():
            if job_id not in self._started:
                self._started[job_id] = now
                task = running.claim.job.task.splitlines()[0][:60] if running.claim.job.task else ""
                console.print(f"▶ {job_id}  attempt {running.claim.attempt}  {task}")
        for job_id in [j for j in self._started if j not in work.running]:
            took = now - self._started.pop(job_id)
            console.print(f"■ {job_id}  {took:.1f} s  (done: {dict(work.stats.finished)})")


def _stop_on_signals() -> asyncio.Event:
    """An event SIGINT or SIGTERM sets."""
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stopped.set)
    return stopped

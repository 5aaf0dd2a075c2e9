"""``claybot start``, ``stop`` and ``status``."""

from __future__ import annotations

import faulthandler
import gc
import os
import signal
import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    console,
    engine_errors,
    fail,
    paths_for,
    print_json,
)
from claybot.config.home import PRIVATE_UMASK, HomePaths
from claybot.engine.instance import InstanceLock, read_pid
from claybot.kernel.processes import process_alive

if TYPE_CHECKING:
    from claybot.kernel.service_notify import ServiceNotifier

STOP_WAIT_S = 20.0


def _stop_running(paths: HomePaths) -> bool:
    """Ask the engine to stop, then wait for its lock; escalate to SIGTERM. True if one ran."""
    from claybot.client.engine_client import EngineClient, EngineNotRunning

    lock = InstanceLock(paths)
    if not lock.held_by_someone():
        return False
    console.print("stopping…")
    with EngineClient(paths.socket, timeout_s=5) as client:
        try:
            client.shutdown()
        except EngineNotRunning:
            pid = read_pid(paths)
            if pid and process_alive(pid):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        if not lock.held_by_someone():
            return True
        time.sleep(0.1)
    fail(
        f"the engine for {paths.home} did not stop within {STOP_WAIT_S:.0f}s "
        f"(pid {read_pid(paths)})"
    )


def start(
    home: HomeOption = None,
    port: Annotated[
        int | None,
        typer.Option("--port", help="TCP port for the dashboard and API (default 7331)."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Stop an engine already running for this home first.")
    ] = False,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach",
            "-d",
            help="Run in the background: return once the engine answers on its socket "
            "(its output goes to <home>/logs/engine.out). Already running: says so, exits 0.",
        ),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", min=1, help="With --detach: seconds to wait for the engine to be ready."
        ),
    ] = 60.0,
) -> None:
    """Start the engine: in the foreground (Ctrl-C stops it), or with --detach in the background."""
    from claybot.kernel.service_notify import ServiceNotifier

    # Taken out of the environment before anything copies it: what the engine starts
    # must not be able to speak for it to systemd.
    notifier = ServiceNotifier.take_from(os.environ)
    paths = paths_for(home)
    os.umask(PRIVATE_UMASK)  # every file the engine makes from here on is 0600
    paths.ensure()
    if force and _stop_running(paths):
        console.print("stopped the running engine")
    if detach:
        _start_detached(paths, port, timeout)
        return
    # Boot imports the API and loads the home: a lot allocated, little of it garbage,
    # so the collector's passes over it meanwhile are wasted (5-8 % of a boot with
    # 10,000 agents). The engine turns it back on once boot is done
    # (``freeze_boot_heap``); this, whichever way the engine ends.
    gc.disable()
    try:
        _run_in_foreground(paths, port, notifier)
    finally:
        gc.enable()


def _run_in_foreground(
    paths: HomePaths, port: int | None, notifier: ServiceNotifier | None
) -> None:
    from claybot.config.store import ConfigError
    from claybot.engine.engine import EngineOptions
    from claybot.engine.instance import AlreadyRunning
    from claybot.engine.logging_setup import configure_logging
    from claybot.server.serve import run

    configure_logging(paths)
    # A crash in C code (a signal such as SIGSEGV or SIGABRT) prints every thread's
    # Python stack to stderr: the journal, engine.out or the terminal keeps it.
    faulthandler.enable()
    try:
        run(paths, EngineOptions(port=port), notifier)
    except AlreadyRunning as exc:
        fail(f"{exc}. Use `claybot stop`, or `claybot start --force` to replace it.")
    except ConfigError as exc:
        fail(f"{exc}\nFix the file (or move it away) and start again.")
    except OSError as exc:
        fail(f"could not start: {exc}")


def _start_detached(paths: HomePaths, port: int | None, timeout_s: float) -> None:
    from claybot.cli.detach import DetachFailed, start_detached
    from claybot.server.banner import ReadyEngine, home_flag, ready_banner

    flag = home_flag(paths.home, os.environ)
    if InstanceLock(paths).held_by_someone():
        typer.echo(
            f"an engine is already running for {paths.home} (pid {read_pid(paths)}): "
            f"`claybot status{flag}` shows it, `claybot stop{flag}` stops it"
        )
        return
    try:
        started = start_detached(paths, port, timeout_s)
    except DetachFailed as exc:
        fail(str(exc))
    status = started.status
    ready = ReadyEngine(
        pid=status.pid,
        socket=status.socketPath,
        http=f"http://{status.tcp.host}:{status.tcp.port}",
        home=status.home,
        exec_summary=status.sandbox.summary,
    )
    banner = ready_banner(ready, detached=True, home_flag=flag)
    typer.echo(banner)


def stop(home: HomeOption = None) -> None:
    """Stop the running engine (running turns finish or stay durably queued)."""
    paths = paths_for(home)
    if _stop_running(paths):
        console.print("engine stopped")  # after "stopping…": the wait is visible
    else:
        console.print(f"no engine is running for {paths.home}")


def status(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Show whether the engine runs, and what it has loaded."""
    from claybot.client.engine_client import EngineClient, EngineNotRunning

    paths = paths_for(home)
    with EngineClient(paths.socket, timeout_s=5) as client:
        try:
            with engine_errors():
                data = client.status()
        except typer.Exit:
            if not as_json:  # with --json, the error object said it
                console.print(f"Engine not running (home {paths.home})")
            raise typer.Exit(1) from None
        except EngineNotRunning:
            raise typer.Exit(1) from None
    if as_json:
        print_json(data)
        return
    agents = data.agents
    tcp = data.tcp
    console.print(f"[green]Engine running[/green] (pid {data.pid}, version {data.version})")
    console.print(f"  home:      {data.home}")
    console.print(f"  socket:    {data.socketPath}")
    console.print(f"  http:      http://{tcp.host}:{tcp.port}")
    console.print(f"  started:   {data.startedAt}")
    console.print(
        f"  agents:    {agents.total} ({agents.loaded} loaded, {agents.pendingItems} items queued)"
    )
    for stuck in agents.stuck:
        console.print(
            f"  [red]agent {stuck.agentId} stuck:[/red] {escape(stuck.error)} "
            f"({stuck.failures} failed writes in a row; it keeps trying)"
        )
    providers = ", ".join(f"{p.id} ({p.label})" for p in data.inferenceProviders) or "none"
    console.print(f"  providers: {providers}")
    for provider_id, problem in data.providerFailures.items():
        console.print(f"  [yellow]provider {provider_id} unavailable:[/yellow] {problem}")
    plugins = ", ".join(f"{p.id} ({p.name})" for p in data.plugins) or "none"
    console.print(f"  plugins:   {plugins}")
    connectors = ", ".join(c.id for c in data.connectors) or "none"
    console.print(f"  connectors: {connectors}")
    sandbox = data.sandbox
    safe = sandbox.confined and not sandbox.unconfined
    colour = "green" if safe else "red"
    console.print(f"  exec:      [{colour}]{escape(sandbox.summary)}[/{colour}]")

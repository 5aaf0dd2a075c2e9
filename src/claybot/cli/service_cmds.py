"""``claybot service install | uninstall | status``: the engine as the user's service.

On Linux a systemd user unit (``~/.config/systemd/user/claybot.service``), on macOS
a launchd agent (``~/Library/LaunchAgents/dev.claybot.engine.plist``); the text is
``service_unit``'s, the managers ``service_managers``'.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    YesOption,
    confirm_deletion,
    console,
    err_console,
    fail,
    paths_for,
    print_json,
)
from claybot.cli.service_managers import (
    ManagerKind,
    ServiceCommandFailed,
    ServiceManager,
    default_kind,
    service_manager,
)
from claybot.cli.service_unit import engine_spec, shell_command
from claybot.config.home import HomePaths

if TYPE_CHECKING:
    from claybot.wire.status import EngineStatus

app = typer.Typer(
    help="Run the engine as your user's service: started at login, restarted after a crash "
    "(systemd on Linux, launchd on macOS).",
    no_args_is_help=True,
)

ManagerOption = Annotated[
    ManagerKind | None,
    typer.Option(
        "--manager",
        help="The service manager (default: launchd on macOS, systemd elsewhere).",
        show_default=False,
    ),
]


def service_output(paths: HomePaths) -> Path:
    """Where launchd writes the engine's output (systemd keeps it in its journal)."""
    return paths.logs / "service.out"


def _say(text: str, style: str | None = None, *, stderr: bool = False) -> None:
    """One message, never wrapped (a path stays whole) nor read as markup."""
    (err_console if stderr else console).print(
        text, style=style, markup=False, highlight=False, soft_wrap=True
    )


def _manager(kind: ManagerKind | None) -> ServiceManager:
    return service_manager(kind or default_kind(), os.environ)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        fail(f"cannot read {path}: {exc}")


def install_service(
    paths: HomePaths, kind: ManagerKind | None = None, *, start: bool = True, force: bool = False
) -> bool:
    """Write the service file for ``paths`` and, with ``start``, start it where the
    manager can be reached. True when it was started; otherwise what to run was said.
    """
    from claybot.durable.atomic import atomic_write_bytes

    manager = _manager(kind)
    paths.ensure()
    try:
        spec = engine_spec(sys.executable, paths.home, os.environ, Path.cwd())
    except ValueError as exc:
        fail(str(exc))
    text = manager.render(spec, service_output(paths))
    existing = _read(manager.path)
    if existing is not None and existing != text and not force:
        serves = manager.home_of(existing)
        if serves is None:
            fail(f"{manager.path} exists and was not written by claybot: --force replaces it")
        if serves != paths.home:
            fail(
                f"the service already runs the home {serves}: `claybot service uninstall` "
                f"first, or --force to make it run {paths.home} instead"
            )
    try:
        atomic_write_bytes(manager.path, text, mode=0o644)
    except OSError as exc:
        fail(f"cannot write {manager.path}: {exc}")
    _say(f"wrote {manager.path}")
    _say(f"  it runs: {shell_command(list(spec.argv))}")
    if not start:
        _say_how_to_start(manager, "not started (--no-start)")
        return False
    problem = manager.unreachable()
    if problem is not None:
        _say_how_to_start(
            manager, f"not started: {problem}", where=f" where {manager.kind.value} runs for you"
        )
        _say(
            "Without a service manager (a container), `claybot start --detach` runs the "
            "engine in the background.",
            stderr=True,
        )
        return False
    if _engine_running_outside(paths, manager):
        _say_how_to_start(
            manager,
            f"not started: an engine already runs for {paths.home} outside the service",
            where=" once `claybot stop` has stopped it",
        )
        return False
    try:
        manager.activate(restart=existing is not None and existing != text)
    except ServiceCommandFailed as exc:
        fail(f"{exc}\nThe file is written; `claybot service status` shows the state.")
    _say(f"started: the {manager.what} is enabled and running", "green")
    for note in manager.notes():
        _say(f"note: {note}")
    return True


def _engine_running_outside(paths: HomePaths, manager: ServiceManager) -> bool:
    from claybot.engine.instance import InstanceLock

    if not InstanceLock(paths).held_by_someone():
        return False
    return manager.state(reachable=True).active != "active"


def _say_how_to_start(manager: ServiceManager, reason: str, where: str = "") -> None:
    _say(f"{reason}.", "yellow", stderr=True)
    _say(f"To start it{where}:", stderr=True)
    _say("\n".join(f"  {shell_command(argv)}" for argv in manager.start_commands()), stderr=True)


@app.command("install")
def install(
    home: HomeOption = None,
    no_start: Annotated[
        bool, typer.Option("--no-start", help="Only write the file; do not start the service.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Replace a service file that runs another home (or is not ours)."
        ),
    ] = False,
    manager: ManagerOption = None,
) -> None:
    """Install the engine as a user service and start it.

    Linux: a systemd user unit, $XDG_CONFIG_HOME/systemd/user/claybot.service.

    macOS: a launchd agent, ~/Library/LaunchAgents/dev.claybot.engine.plist.

    It runs `claybot start --home HOME` with this Python, restarted after a failure.

    With no manager to reach (a container), the file is written and the commands to run shown.
    """
    install_service(paths_for(home), manager, start=not no_start, force=force)


@app.command("uninstall")
def uninstall(
    yes: YesOption = False,
    manager: ManagerOption = None,
) -> None:
    """Stop and disable the service, and delete its file (nothing else: the home stays)."""
    chosen = _manager(manager)
    path = chosen.path
    if _read(path) is None:
        _say(f"no claybot service is installed ({path} does not exist)")
        return
    confirm_deletion(f"stop the claybot service and delete {path}", yes)
    reachable = chosen.unreachable() is None
    try:
        chosen.deactivate(reachable)
    except ServiceCommandFailed as exc:
        fail(f"{exc}\nNothing was deleted.")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    if reachable:
        with contextlib.suppress(ServiceCommandFailed):  # the file is gone either way
            chosen.forget()
    _say(f"removed {path}")


@app.command("status")
def status(
    home: HomeOption = None,
    as_json: JsonOption = False,
    manager: ManagerOption = None,
) -> None:
    """Whether the service is installed, enabled and active, and whether the engine answers.

    The engine checked is --home's, else the one of the home the service runs.
    """
    from claybot.client.engine_client import EngineClient, EngineNotRunning
    from claybot.client.errors import EngineApiError

    chosen = _manager(manager)
    data = _read(chosen.path)
    serves = chosen.home_of(data) if data is not None else None
    paths = paths_for(home) if serves is None or home is not None else HomePaths(serves)
    problem = chosen.unreachable()
    state = chosen.state(reachable=problem is None) if data is not None else None
    with EngineClient(paths.socket, timeout_s=5) as client:
        engine: EngineStatus | None = None
        with contextlib.suppress(EngineNotRunning, EngineApiError):
            engine = client.status()
    report = {
        "ok": True,
        "manager": chosen.kind.value,
        "file": str(chosen.path),
        "installed": data is not None,
        "home": str(serves) if serves is not None else None,
        "enabled": state.enabled if state else None,
        "active": state.active if state else None,
        "managerProblem": problem,
        "engine": {
            "home": str(paths.home),
            "running": engine is not None,
            "pid": engine.pid if engine else None,
        },
    }
    if as_json:
        print_json(report)
        return
    if data is None:
        _say(f"service:  not installed ({chosen.path} does not exist)")
        _say("          `claybot service install` installs it")
    else:
        assert state is not None
        _say(f"service:  installed ({chosen.what} {chosen.path})")
        _say(f"  home:    {serves or 'unknown (not written by claybot)'}")
        _say(f"  enabled: {state.enabled}")
        _say(f"  active:  {state.active}")
        if problem is not None:
            _say(f"  {problem}", "yellow")
        if serves is not None and serves != paths.home:
            _say(f"  it runs {serves}, not {paths.home}", "yellow")
    if engine is not None:
        _say(f"engine:   answers on {paths.socket} (pid {engine.pid})")
    else:
        _say(f"engine:   not running (no answer on {paths.socket})")

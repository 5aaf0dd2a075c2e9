"""Entry point of the ``claybot`` command."""

from __future__ import annotations

from typing import Annotated

import typer

from claybot import __version__
from claybot.cli import (
    agents_cmds,
    auth_cmds,
    chat,
    cron_cmds,
    dashboard_cmd,
    doctor_cmd,
    engine_cmds,
    events_cmds,
    heartbeat_cmds,
    init_cmd,
    jobs_cmds,
    keys_cmds,
    logs_cmd,
    permissions_cmds,
    plugins_cmds,
    proactive_cmds,
    providers_cmds,
    service_cmds,
    worker_cmd,
)

app = typer.Typer(
    name="claybot",
    help=(
        "ClayBot: a self-hosted agent engine.\n\n"
        "Start the engine with `claybot start`, then talk to it with `claybot chat`. "
        "Commands that change settings go through the running engine, or write "
        "settings.json / auth.json directly when it is not running."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"claybot {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """ClayBot: a self-hosted agent engine."""


app.command()(init_cmd.init)
app.command()(engine_cmds.start)
app.command()(engine_cmds.stop)
app.command()(engine_cmds.status)
app.command()(chat.chat)
app.command()(events_cmds.events)
app.command()(logs_cmd.logs)
app.command()(worker_cmd.worker)
app.command()(doctor_cmd.doctor)
app.command()(dashboard_cmd.dashboard)
app.add_typer(agents_cmds.app, name="agents")
app.add_typer(plugins_cmds.app, name="plugins")
app.add_typer(auth_cmds.app, name="auth")
app.add_typer(providers_cmds.app, name="providers")
app.add_typer(keys_cmds.app, name="keys")
app.add_typer(permissions_cmds.app, name="permissions")
app.add_typer(proactive_cmds.app, name="proactive")
app.add_typer(cron_cmds.app, name="cron")
app.add_typer(heartbeat_cmds.app, name="heartbeat")
app.add_typer(jobs_cmds.app, name="jobs")
app.add_typer(service_cmds.app, name="service")


def main() -> None:
    app()

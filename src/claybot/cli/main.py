"""Entry point of the ``claybot`` command."""

from __future__ import annotations

import typer

from claybot.cli import engine_cmds

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
app.command()(engine_cmds.start)
app.command()(engine_cmds.stop)
app.command()(engine_cmds.status)


def main() -> None:
    app()

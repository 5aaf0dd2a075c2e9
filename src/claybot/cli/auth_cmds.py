"""``claybot auth set``: store one credential field (never printed back)."""

from __future__ import annotations

import getpass
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError

from claybot.api.schemas import SetAuth
from claybot.cli.common import HomeOption, RemoteOption, console, fail, mutate, reject_remote
from claybot.config.store import describe_validation_error

if TYPE_CHECKING:
    from claybot.client.engine_client import EngineClient
    from claybot.config.store import ConfigStore

app = typer.Typer(help="Credentials in auth.json (0600).", no_args_is_help=True)


def _read_secret(name: str) -> str:
    if sys.stdin.isatty():
        value = getpass.getpass(f"{name}: ")
    else:
        value = sys.stdin.readline().rstrip("\r\n")
    if not value:
        fail(f"no value given for {name}")
    return value


@app.command("set")
def set_field(
    entry_id: Annotated[
        str, typer.Argument(help="Provider id or plugin instance id, e.g. openai.")
    ],
    key: Annotated[str, typer.Argument(help="Field name, e.g. apiKey or token.")],
    value: Annotated[
        str | None,
        typer.Argument(
            help="The secret value. Leave it out to type it hidden (or pipe it on stdin), "
            "which keeps it out of your shell history.",
            show_default=False,
        ),
    ] = None,
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Set auth.json's ENTRY_ID.KEY to VALUE (the value is never printed)."""
    reject_remote(remote)
    if value is None:
        value = _read_secret(f"{entry_id}.{key}")
    try:
        SetAuth(id=entry_id, key=key, value=value)  # the same checks as the engine's
    except ValidationError as exc:
        fail(describe_validation_error(exc))

    def online(client: EngineClient) -> None:
        client.post("/v1/engine/auth", {"id": entry_id, "key": key, "value": value})

    def offline(store: ConfigStore) -> None:
        store.write_auth(store.read_auth().with_field(entry_id, key, value))

    _, applied = mutate(home, remote, online=online, offline=offline)
    where = "the running engine" if applied else "auth.json (the engine is not running)"
    console.print(f"set {entry_id}.{key} through {where}")

"""``claybot auth set | list | remove``: credentials in auth.json (never printed back)."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    RemoteOption,
    YesOption,
    answer_json,
    confirm_deletion,
    console,
    fail,
    mutate,
    print_json,
    print_table,
    reject_remote,
)
from claybot.cli.ids import resolve_prefix
from claybot.config.store import describe_validation_error
from claybot.wire.bodies import SetAuth

if TYPE_CHECKING:
    from claybot.client.engine_client import EngineClient
    from claybot.config.store import ConfigStore
    from claybot.wire.providers import AuthEntrySummary

app = typer.Typer(help="Credentials in auth.json (0600).", no_args_is_help=True)


def read_secret(name: str) -> str:
    """A secret typed hidden on a terminal, else the next line of stdin (a pipe)."""
    if sys.stdin.isatty():
        value = getpass.getpass(f"{name}: ")
    else:
        value = sys.stdin.readline().rstrip("\r\n")
    if not value:
        fail(f"no value given for {name}")
    return value


def set_secret(
    home: Path | None, entry_id: str, key: str, value: str, remote: str | None = None
) -> bool:
    """auth.json's ``entry_id.key`` = ``value``, through the engine if it runs (then True)."""
    try:
        SetAuth(id=entry_id, key=key, value=value)  # the same checks as the engine's
    except ValidationError as exc:
        fail(describe_validation_error(exc))

    def online(client: EngineClient) -> None:
        client.set_auth(entry_id, key, value)

    def offline(store: ConfigStore) -> None:
        store.write_auth(store.read_auth().with_field(entry_id, key, value))

    _, applied = mutate(home, remote, online=online, offline=offline)
    return applied


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
        value = read_secret(f"{entry_id}.{key}")
    applied = set_secret(home, entry_id, key, value, remote)
    where = "the running engine" if applied else "auth.json (the engine is not running)"
    console.print(f"set {entry_id}.{key} through {where}")


@app.command("list")
def list_entries(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Show auth.json's entries and their fields' names (never a value)."""

    def online(client: EngineClient) -> dict[str, AuthEntrySummary]:
        return client.auth().entries

    def offline(store: ConfigStore) -> dict[str, AuthEntrySummary]:
        from claybot.wire.providers import AuthEntrySummary

        return {
            entry_id: AuthEntrySummary.model_validate(entry.redacted())
            for entry_id, entry in store.read_auth().root.items()
        }

    entries, _ = mutate(home, None, online=online, offline=offline)
    if as_json:
        print_json({"entries": {key: answer_json(entry) for key, entry in entries.items()}})
        return
    if not entries:
        console.print("auth.json holds no credentials")
        return
    table = Table("id", "type", "fields")
    for entry_id, entry in sorted(entries.items()):
        table.add_row(escape(entry_id), escape(entry.type), escape(", ".join(entry.fields)))
    print_table(table)


@app.command("remove")
def remove(
    entry_id: Annotated[
        str,
        typer.Argument(help="Provider id or plugin instance id (or its first characters)."),
    ],
    key: Annotated[
        str | None, typer.Argument(help="Only this field (default: the whole entry).")
    ] = None,
    yes: YesOption = False,
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Remove an entry of auth.json, or one of its fields."""
    reject_remote(remote)
    # The whole id first, so the question names the entry that would go.
    known, _ = mutate(
        home,
        remote,
        online=lambda client: list(client.auth().entries),
        offline=lambda store: list(store.read_auth().root),
    )
    entry_id = resolve_prefix(entry_id, known, "auth.json entry")
    what = f"{entry_id}.{key}" if key else f"{entry_id} (every field)"
    confirm_deletion(f"remove {what} from auth.json", yes)

    def online(client: EngineClient) -> None:
        client.remove_auth(entry_id, key)

    def offline(store: ConfigStore) -> None:
        auth = store.read_auth()
        if not auth.has(entry_id, key):
            fail(f"auth.json has no {entry_id + '.' + key if key else entry_id!r}")
        store.write_auth(auth.without(entry_id, key))

    _, applied = mutate(home, remote, online=online, offline=offline)
    where = "the running engine" if applied else "auth.json (the engine is not running)"
    console.print(f"removed {what} through {where}")

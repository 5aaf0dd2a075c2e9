"""``claybot keys create | list | revoke``: API keys for the TCP API."""

from __future__ import annotations

from typing import Annotated

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
    err_console,
    print_json,
    print_table,
    reject_remote,
    running_engine,
)
from claybot.cli.ids import resolve_prefix

app = typer.Typer(
    help="API keys for the TCP API (the engine must be running).", no_args_is_help=True
)


@app.command("create")
def create(
    name: Annotated[str, typer.Option("--name", help="What the key is for.")],
    scope: Annotated[
        list[str],
        typer.Option(
            "--scope",
            help="jobs:read|write|delete, agents:read|write, metrics (GET /metrics), chat (the "
            "OpenAI-compatible door) or admin; repeatable.",
        ),
    ],
    rate_limit: Annotated[
        int, typer.Option("--rate-limit", min=1, help="Requests per minute for this key.")
    ] = 60,
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Create a key. It is printed once and cannot be shown again."""
    reject_remote(remote)
    with running_engine(home) as client:
        result = client.create_key({"name": name, "scopes": scope, "rateLimitRpm": rate_limit})
    typer.echo(result.key)
    prefix = result.record.prefix
    err_console.print(f"[yellow]Key {prefix}… is shown only this once: store it now.[/yellow]")


@app.command("list")
def list_keys(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Keys by prefix (never the keys themselves)."""
    with running_engine(home) as client:
        listing = client.keys()
    if as_json:
        print_json(listing)
        return
    table = Table("id", "prefix", "name", "scopes", "rpm", "uses", "last used", "revoked")
    for key in listing.keys:
        table.add_row(
            key.id,
            key.prefix,
            escape(key.name),
            " ".join(key.scopes),
            str(key.rateLimitRpm),
            str(key.usageCount),
            key.lastUsedAt or "-",
            "yes" if key.revoked else "",
        )
    print_table(table, whole=("id", "prefix"))


@app.command("revoke")
def revoke(
    key_id: Annotated[
        str,
        typer.Argument(help="The key's id or its shown prefix (cb_…), or their first characters."),
    ],
    yes: YesOption = False,
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Revoke a key: requests with it get 401 from now on."""
    reject_remote(remote)
    with running_engine(home) as client:
        # Resolved before asking, so the question names the whole key; listing the keys
        # is cheap, and a deletion is worth the extra request.
        keys = client.keys().keys
        names = {key.prefix: key for key in keys} | {key.id: key for key in keys}
        key = names[resolve_prefix(key_id, names, "API key")]
        confirm_deletion(
            f"revoke API key {key.id} ({key.prefix}…, {key.name!r}); requests with it get 401",
            yes,
        )
        record = client.revoke_key(key.id).record
    console.print(f"revoked {record.prefix}… ({escape(record.name)})", highlight=False)

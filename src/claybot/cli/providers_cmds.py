"""``claybot providers list | add | remove | default | enable | disable | test``.

It is longer than most command modules because each of the seven commands works two
ways, through a running engine (its API) or on settings.json and auth.json when none
runs, and ``add`` checks what it can before it says "added" (a key present, the base
URL reachable, the type known); each command is short, and they share those two paths.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
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
    fail,
    mutate,
    print_json,
    print_table,
    reject_remote,
)
from claybot.cli.ids import resolve_prefix, through_prefix
from claybot.cli.options import parse_assignments
from claybot.config.settings import ProviderSettings, Settings
from claybot.config.store import describe_validation_error

if TYPE_CHECKING:
    from claybot.client.engine_client import EngineClient
    from claybot.client.engine_client import ProviderChange as ProviderAction
    from claybot.config.store import ConfigStore
    from claybot.wire.providers import ProviderList, ProviderListing, ProviderTested, PublicProvider

REACH_TIMEOUT_S = 3.0  # providers add: how long a base URL may take to accept a connection

app = typer.Typer(help="Inference providers, in priority order.", no_args_is_help=True)
NOUN = "provider"
ProviderIdArgument = Annotated[
    str, typer.Argument(help="The provider id, or its first characters (see `providers list`).")
]


def _known_types() -> set[str]:
    from claybot.providers.registry import builtin_provider_types

    return {provider_type.type for provider_type in builtin_provider_types()}


def _provider_ids(client: EngineClient) -> list[str]:
    return [provider.id for provider in client.providers().providers]


def _show(providers: list[PublicProvider]) -> None:
    if not providers:
        console.print("no providers configured: the engine uses `local` (SmolLM2 on llama.cpp)")
        return
    table = Table("priority", "id", "type", "model", "enabled")
    for position, provider in enumerate(providers):
        table.add_row(
            str(position),
            escape(provider.id),
            escape(provider.type or provider.id),
            escape(provider.model or "-"),
            "yes" if provider.enabled else "no",
        )
    print_table(table)


@app.command("list")
def list_providers(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Configured providers; the first enabled one answers, failures fall through."""

    def online(client: EngineClient) -> ProviderListing:
        return client.providers()

    def offline(store: ConfigStore) -> ProviderListing:
        # What the engine would answer if it started on these files (the types that
        # plugins add are known only to a running engine).
        from claybot.providers.registry import builtin_provider_types
        from claybot.wire.providers import ProviderListing

        providers = store.read_settings().providers
        failures = {}
        if as_json:  # building each provider to see which fails is for programs only
            for provider in providers:
                problem = _build_problem(provider, store) if provider.enabled else None
                if problem is not None:
                    failures[provider.id] = problem
        return ProviderListing.model_validate(
            {
                "ok": True,
                "providers": [p.to_public_dict() for p in providers],
                "failures": failures,
                "types": [
                    {"type": t.type, "label": t.label, "description": t.description}
                    for t in builtin_provider_types()
                ],
            }
        )

    listing, _ = mutate(home, None, online=online, offline=offline)
    if as_json:
        print_json(listing)
        return
    _show(listing.providers)


def _offline_edit(store: ConfigStore, edit: Any) -> list[PublicProvider]:
    from claybot.wire.providers import PublicProvider

    current = store.read_settings()
    providers: list[ProviderSettings] = edit(list(current.providers))
    updated: Settings = current.model_copy(update={"providers": providers})
    store.write_settings(updated)
    return [PublicProvider.model_validate(p.to_public_dict()) for p in providers]


@app.command("add")
def add(
    provider_id: Annotated[
        str, typer.Argument(help="Provider id, e.g. openai, anthropic, ollama.")
    ],
    provider_type: Annotated[
        str | None, typer.Option("--type", help="Implementation (default: the id).")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model name.")] = None,
    option: Annotated[
        list[str] | None, typer.Option("--option", help="An option as key=value; repeatable.")
    ] = None,
    position: Annotated[
        int | None, typer.Option("--position", help="Priority slot (0 = first).")
    ] = None,
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Add (or replace) a provider.

    It goes before the local model, which stays the last fallback unless you remove
    it. What can be checked without a paid call is checked (a key present, the base
    URL reachable), with a warning; `claybot providers test ID` makes a real call.
    """
    try:
        provider = ProviderSettings(
            id=provider_id,
            type=provider_type,
            model=model,
            options=parse_assignments(option, "--option"),
        )
    except ValidationError as exc:
        fail(describe_validation_error(exc))

    providers, applied, problem = add_provider(provider, position, home, remote)
    console.print(
        f"added {provider_id}" + ("" if applied else " in settings.json (engine not running)")
    )
    _show(providers)
    if problem is not None:
        # Added all the same: the key may come next (`claybot auth set`).
        err_console.print(f"[yellow]warning:[/yellow] {escape(f'{provider_id}: {problem}')}")
    base_url = provider.options.get("baseUrl")
    if isinstance(base_url, str) and (unreachable := _unreachable(base_url)) is not None:
        err_console.print(f"[yellow]warning:[/yellow] {escape(unreachable)}")
    if problem is None:
        console.print(f"[dim]try it: claybot providers test {escape(provider_id)}[/dim]")


def add_provider(
    provider: ProviderSettings, position: int | None, home: Path | None, remote: str | None = None
) -> tuple[list[PublicProvider], bool, str | None]:
    """Add (or replace) ``provider`` at ``position``: through the engine if it runs, else
    in settings.json. Returns the providers, whether the engine applied it, and why the
    provider cannot be built yet (no key...), or None."""
    # Online, the engine checks the type against its registry (which includes the
    # types that loaded plugins registered).
    failures: dict[str, str] = {}

    def online(client: EngineClient) -> list[PublicProvider]:
        answer = client.upsert_provider({**provider.to_json_dict(), "position": position})
        failures.update(answer.failures)
        return answer.providers

    def offline(store: ConfigStore) -> list[PublicProvider]:
        known = _known_types()
        if provider.provider_type not in known:
            fail(
                f"unknown provider type {provider.provider_type!r} "
                f"(built-in: {', '.join(sorted(known))}; types that plugins add can be used "
                "while the engine runs)"
            )

        def edit(providers: list[ProviderSettings]) -> list[ProviderSettings]:
            from claybot.providers.registry import with_provider

            return with_provider(providers, provider, position)

        problem = _build_problem(provider, store)
        if problem is not None:
            failures[provider.id] = problem
        return _offline_edit(store, edit)

    providers, applied = mutate(home, remote, online=online, offline=offline)
    return providers, applied, failures.get(provider.id)


def _unreachable(url: str) -> str | None:
    """Why nothing answers at ``url``'s host and port (a connect, not a request), or None."""
    import socket
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        return f"options.baseUrl {url!r} is not a URL: {exc}"
    if not host or parts.scheme not in ("http", "https"):
        return f"options.baseUrl {url!r} is not an http(s) URL"
    try:
        with socket.create_connection((host, port), timeout=REACH_TIMEOUT_S):
            return None
    except OSError as exc:
        return f"cannot reach {host}:{port} ({exc.strerror or exc}); is the server running?"


def _build_problem(provider: ProviderSettings, store: ConfigStore) -> str | None:
    """Why the engine could not build this provider from these files, or None (the
    local model is not loaded for this: building it is slow, and it needs no key)."""
    from claybot.providers.registry import ProviderRegistry, builtin_provider_types

    if provider.provider_type == "local":
        return None

    from claybot.providers.base import failure_reason

    registry = ProviderRegistry(builtin_provider_types())
    try:
        registry.create(provider, store.read_auth().get(provider.id), os.environ)
    except Exception as exc:
        return failure_reason(exc)
    return None


@app.command("remove")
def remove(
    provider_id: ProviderIdArgument,
    yes: YesOption = False,
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Remove a provider."""
    reject_remote(remote)  # before asking anything
    # The whole id first, so the question names the provider that would go.
    known, _ = mutate(
        home,
        remote,
        online=_provider_ids,
        offline=lambda store: [p.id for p in store.read_settings().providers],
    )
    provider_id = resolve_prefix(provider_id, known, NOUN)
    confirm_deletion(f"remove provider {provider_id!r} from settings.json", yes)
    _change_provider(
        provider_id,
        home,
        remote,
        send=lambda client, whole: client.remove_provider(whole),
        change=lambda providers, chosen: [p for p in providers if p is not chosen],
        done="removed {}",
    )


@app.command("default")
def default(
    provider_id: ProviderIdArgument,
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Make a provider the first choice."""
    _change_provider(
        provider_id,
        home,
        remote,
        send=lambda client, whole: client.change_provider(whole, "default"),
        change=lambda providers, chosen: [chosen, *(p for p in providers if p is not chosen)],
        done="{} is now the default",
    )


def _set_enabled(provider_id: str, enabled: bool, home: Path | None, remote: str | None) -> None:
    action: ProviderAction = "enable" if enabled else "disable"

    def change(
        providers: list[ProviderSettings], chosen: ProviderSettings
    ) -> list[ProviderSettings]:
        chosen.enabled = enabled
        return providers

    _change_provider(
        provider_id,
        home,
        remote,
        send=lambda client, whole: client.change_provider(whole, action),
        change=change,
        done=f"{{}} is {action}d",
    )


ProviderChange = Callable[[list[ProviderSettings], ProviderSettings], list[ProviderSettings]]


def _change_provider(
    provider_id: str,
    home: Path | None,
    remote: str | None,
    *,
    send: Callable[[EngineClient, str], ProviderList],
    change: ProviderChange,
    done: str,
) -> None:
    """Change one provider: through the engine (``send`` a request for its id), else in
    settings.json (``change`` the list, given the one named); then say ``done`` (with the
    whole id for ``{}``) and show the list. ``provider_id`` may be a unique prefix."""
    chosen_id = provider_id

    def online(client: EngineClient) -> list[PublicProvider]:
        nonlocal chosen_id
        chosen_id, answer = through_prefix(
            provider_id, lambda whole: send(client, whole), lambda: _provider_ids(client), NOUN
        )
        return answer.providers

    def offline(store: ConfigStore) -> list[PublicProvider]:
        def edit(providers: list[ProviderSettings]) -> list[ProviderSettings]:
            nonlocal chosen_id
            chosen_id = resolve_prefix(provider_id, [p.id for p in providers], NOUN)
            chosen = next(p for p in providers if p.id == chosen_id)
            return change(providers, chosen)

        return _offline_edit(store, edit)

    providers, _ = mutate(home, remote, online=online, offline=offline)
    console.print(done.format(chosen_id))
    _show(providers)


@app.command("enable")
def enable(
    provider_id: ProviderIdArgument,
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Use a provider again, in its place in the order."""
    _set_enabled(provider_id, True, home, remote)


@app.command("disable")
def disable(
    provider_id: ProviderIdArgument,
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Keep a provider in settings.json but stop using it."""
    _set_enabled(provider_id, False, home, remote)


@app.command("test")
def test(
    provider_id: ProviderIdArgument,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make one small real call to a provider and show its answer, or why it failed.

    Through the running engine when there is one (its own instance of the provider),
    else built from settings.json and auth.json for this call. Exit code 1 when the
    provider did not answer.
    """

    def online(client: EngineClient) -> ProviderTested:
        _, answer = through_prefix(
            provider_id, client.test_provider, lambda: _provider_ids(client), NOUN
        )
        return answer

    def offline(store: ConfigStore) -> ProviderTested:
        return asyncio.run(_probe_offline(provider_id, store))

    with console.status(f"calling {escape(provider_id)}…") if not as_json else nullcontext():
        outcome, _ = mutate(home, None, online=online, offline=offline)
    whole_id = outcome.providerId
    if not outcome.answered:
        fail(f"{whole_id} did not answer: {outcome.reason}", error="provider_failed")
    if as_json:
        print_json(outcome)
        return
    console.print(
        f"[green]{escape(whole_id)} answered[/green] in {outcome.latencyMs:.0f} ms "
        f"({escape(outcome.model)}): {escape(outcome.answer)}",
        highlight=False,
    )


async def _probe_offline(provider_id: str, store: ConfigStore) -> ProviderTested:
    from claybot.providers.probe import probe
    from claybot.providers.registry import (
        DEFAULT_PROVIDER,
        ProviderRegistry,
        builtin_provider_types,
    )

    providers = store.read_settings().providers
    if not providers and DEFAULT_PROVIDER.id.startswith(provider_id):
        chosen = DEFAULT_PROVIDER  # the one the engine uses when none is configured
    else:
        whole = resolve_prefix(provider_id, [p.id for p in providers], NOUN)
        chosen = next(p for p in providers if p.id == whole)
    registry = ProviderRegistry(builtin_provider_types())
    outcome = await probe(chosen, store.read_auth().get(chosen.id), dict(os.environ), registry)
    from claybot.wire.providers import ProviderTested

    return ProviderTested(
        ok=True,
        providerId=outcome.provider_id,
        answered=outcome.answered,
        answer=outcome.answer,
        reason=outcome.reason,
        model=outcome.model,
        latencyMs=outcome.latency_ms,
    )

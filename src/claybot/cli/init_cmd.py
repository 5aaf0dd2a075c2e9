"""``claybot init``: the first setup, asked on a terminal or answered by flags.

Providers and keys, the Telegram bot, a look at the command sandbox, the service.
Each step is the command that does it alone (``providers add``, ``auth set``,
``plugins load``, ``service install``), reached through its function, so ``init``
changes the files (or the running engine) exactly as those commands do.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.markup import escape

from claybot.cli.common import HomeOption, console, engine_errors, err_console, fail, paths_for
from claybot.cli.init_questions import (
    PROVIDER_CHOICES,
    TELEGRAM,
    CurrentSetup,
    ProviderAnswer,
    SecretSource,
    TelegramAnswer,
    ask_providers,
    ask_service,
    ask_telegram,
)
from claybot.cli.questions import Questions
from claybot.config.home import HomePaths
from claybot.config.settings import ProviderSettings


def init(
    home: HomeOption = None,
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            help=f"The provider that answers first: {', '.join(PROVIDER_CHOICES)} "
            "(local: SmolLM2 on this machine, no key). More: `claybot providers add`.",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Its model (default: the provider's).", show_default=False),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            metavar="VAR",
            help="Read the provider's API key from this environment variable.",
            show_default=False,
        ),
    ] = None,
    api_key_stdin: Annotated[
        bool,
        typer.Option("--api-key-stdin", help="Read the API key from the first line of stdin."),
    ] = False,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            help="The API key itself. Your shell history and `ps` keep it: prefer "
            "--api-key-env or --api-key-stdin.",
            show_default=False,
        ),
    ] = None,
    telegram: Annotated[
        bool | None,
        typer.Option(
            "--telegram/--no-telegram",
            help="Connect a Telegram bot (implied by the --telegram-* options below).",
            show_default=False,
        ),
    ] = None,
    telegram_token_env: Annotated[
        str | None,
        typer.Option(
            "--telegram-token-env",
            metavar="VAR",
            help="Read the bot token (from @BotFather) from this environment variable.",
            show_default=False,
        ),
    ] = None,
    telegram_token_stdin: Annotated[
        bool,
        typer.Option(
            "--telegram-token-stdin",
            help="Read the bot token from stdin (the line after the API key's, if both).",
        ),
    ] = False,
    telegram_allow: Annotated[
        list[int] | None,
        typer.Option(
            "--telegram-allow",
            metavar="USER_ID",
            help="A Telegram user id allowed to talk to the bot; repeatable.",
            show_default=False,
        ),
    ] = None,
    service: Annotated[
        bool | None,
        typer.Option(
            "--service/--no-service",
            help="Install the engine as a user service (`claybot service install`).",
            show_default=False,
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Ask nothing: take the default for each question no option answers.",
        ),
    ] = False,
) -> None:
    """Set up ClayBot: providers and keys, a Telegram bot, the sandbox check, the service.

    On a terminal it asks; every question also has an option, for scripts. Without a
    terminal, a question no option answers stops the command with the option to pass
    (--yes takes the defaults instead). Keys are read hidden, from an environment variable
    or from stdin, and go to auth.json (mode 0600).
    """
    paths = paths_for(home)
    questions = Questions.here(yes)
    key_source = SecretSource(
        "the API key",
        api_key_env,
        api_key_stdin,
        api_key,
        "--api-key-env VAR, --api-key-stdin or --api-key",
    )
    token_source = SecretSource(
        "the Telegram bot token",
        telegram_token_env,
        telegram_token_stdin,
        None,
        "--telegram-token-env VAR or --telegram-token-stdin",
    )
    key_source.check()
    token_source.check()
    if provider is not None and provider not in PROVIDER_CHOICES:
        fail(f"--provider must be one of {', '.join(PROVIDER_CHOICES)}, not {provider!r}")
    if provider == "local" and key_source.given():
        fail("the local provider needs no API key: leave out the --api-key options")
    wants_telegram = token_source.given() or bool(telegram_allow)
    if telegram is False and wants_telegram:
        fail("--no-telegram, yet a --telegram-token-* or --telegram-allow option was given")
    if any(user <= 0 for user in telegram_allow or []):
        fail("--telegram-allow takes Telegram user ids, which are positive numbers")

    with engine_errors():  # an invalid settings.json or auth.json: the file and the field
        current = CurrentSetup.read(paths)
        console.print(f"[bold]Setting up ClayBot[/bold] in {paths.home}", highlight=False)
        # Every question first: nothing is written until all are answered, so a script
        # missing an option, or Ctrl-C at a prompt, leaves the home as it was.
        providers = ask_providers(current, questions, provider, model, key_source)
        bot = ask_telegram(
            current, questions, True if wants_telegram else telegram, token_source, telegram_allow
        )
        _check_sandbox(paths)
        install = ask_service(questions, service)
        console.print("\n[bold]Saving[/bold]")
        _save_providers(paths, current, providers)
        _save_telegram(paths, current, bot)
    started = False
    if install:
        from claybot.cli.service_cmds import install_service

        started = install_service(paths)
    _next_steps(paths, started)


def _check_sandbox(paths: HomePaths) -> None:
    """How agents' shell commands would run here (the engine probes the same way)."""
    import asyncio

    from claybot.sandbox import Sandbox

    console.print("\n[bold]3. Command sandbox[/bold]")

    async def probe() -> tuple[bool, str]:
        sandbox = Sandbox(paths.home)
        try:
            support = await sandbox.support()
            return support.bwrap is not None, sandbox.announcement()
        finally:
            await sandbox.close()

    confined, summary = asyncio.run(probe())
    if confined:
        console.print(f"[green]ok[/green]: {escape(summary)}", highlight=False)
    else:
        console.print(f"[yellow]{escape(summary)}[/yellow]", highlight=False, soft_wrap=True)
        console.print("Everything else works; agents cannot run shell commands until then.")


def _save_providers(
    paths: HomePaths, current: CurrentSetup, providers: list[ProviderAnswer]
) -> None:
    from claybot.cli.auth_cmds import set_secret
    from claybot.cli.providers_cmds import add_provider

    for position, answer in enumerate(providers):
        if answer.key is not None:
            applied = set_secret(paths.home, answer.id, "apiKey", answer.key)
            console.print(f"saved the {answer.id} API key in {_where(applied, 'auth.json')}")
        elif answer.id in current.keys:
            console.print(f"kept the {answer.id} API key already in auth.json")
        existing = current.provider(answer.id)
        # A configured provider keeps what init does not ask (options, type).
        settings = (
            existing.model_copy(update={"model": answer.model or existing.model, "enabled": True})
            if existing is not None
            else ProviderSettings(id=answer.id, model=answer.model)
        )
        _, applied, problem = add_provider(settings, position, paths.home)
        rank = "first" if position == 0 else f"number {position + 1}"
        console.print(
            f"{answer.id} answers {rank} ({_where(applied, 'settings.json')})", highlight=False
        )
        if problem is not None:
            warning = f"{answer.id}: {problem}"
            err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)


def _save_telegram(paths: HomePaths, current: CurrentSetup, bot: TelegramAnswer | None) -> None:
    from claybot.cli.auth_cmds import set_secret
    from claybot.cli.plugins_cmds import load_instance

    if bot is None:
        console.print("no Telegram bot" + (" change" if current.telegram else ""))
        return
    if bot.token is not None:
        applied = set_secret(paths.home, TELEGRAM, "token", bot.token)
        console.print(f"saved the Telegram bot token in {_where(applied, 'auth.json')}")
    else:
        console.print("kept the Telegram bot token already in auth.json")
    settings = dict(current.telegram.settings) if current.telegram else {}
    settings["allowedUserIds"] = bot.allowed
    console.print(escape(load_instance(paths.home, TELEGRAM, TELEGRAM, settings)))
    console.print(f"Telegram users allowed: {', '.join(map(str, bot.allowed))}", highlight=False)


def _where(applied: bool, file: str) -> str:
    return "the running engine" if applied else file


def _next_steps(paths: HomePaths, service_started: bool) -> None:
    from claybot.api.banner import home_flag

    flag = home_flag(paths.home, os.environ)
    console.print("\n[bold]Done.[/bold] Next:")
    steps = [] if service_started else [(f"claybot start --detach{flag}", "start the engine")]
    steps += [
        (f"claybot chat{flag}", "talk to an agent"),
        (f"claybot doctor{flag}", "check what this machine and home are missing"),
    ]
    width = max(len(command) for command, _ in steps) + 3
    for command, what in steps:
        typer.echo(f"  {command:<{width}}{what}")

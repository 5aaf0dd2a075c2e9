"""``claybot init``: the first setup, asked on a terminal or answered by flags.

Providers and keys, the Telegram bot, a look at the command sandbox, the service.
Every answer is collected and checked first (``init_sections``), then the setup is
worked out as a whole (``init_plan``) and applied at once, through the running engine
or to the home's files, or not at all (``init_apply``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, NoReturn

import typer
from rich.markup import escape

from claybot.cli.common import HomeOption, console, engine_errors, err_console, fail, paths_for
from claybot.cli.init_apply import Applied, SetupNotApplied, apply_setup
from claybot.cli.init_plan import SetupPlan, plan_setup
from claybot.cli.init_questions import (
    PROVIDER_CHOICES,
    TELEGRAM,
    CurrentSetup,
    ProviderAnswer,
    SecretSource,
    TelegramAnswer,
    ask_service,
)
from claybot.cli.init_sections import providers_section, telegram_section
from claybot.cli.questions import Questions
from claybot.config.home import HomePaths
from claybot.config.settings import PluginInstanceSettings


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
    telegram_base_url: Annotated[
        str | None,
        typer.Option(
            "--telegram-base-url",
            metavar="URL",
            help="The Bot API to use instead of Telegram's (a local Bot API server), "
            "ending in /bot.",
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
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Check each key (one short call to its provider) and the bot token "
            "(getMe) before saving; --no-check saves them unchecked (no network now).",
        ),
    ] = True,
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

    Every answer is checked before anything is saved (a failed check offers retry, skip
    or quit; a script stops, naming it), then the whole setup is saved at once: if that
    fails, nothing of it stays.
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
    wants_telegram = token_source.given() or bool(telegram_allow) or telegram_base_url is not None
    if telegram is False and wants_telegram:
        fail(
            "--no-telegram, yet a --telegram-token-*, --telegram-allow or --telegram-base-url "
            "option was given"
        )
    if any(user <= 0 for user in telegram_allow or []):
        fail("--telegram-allow takes Telegram user ids, which are positive numbers")
    if telegram_base_url is not None and not telegram_base_url.startswith(("http://", "https://")):
        fail(f"--telegram-base-url must be an http(s) URL, not {telegram_base_url!r}")

    with engine_errors():  # an invalid settings.json or auth.json: the file and the field
        current = CurrentSetup.read(paths)
        console.print(f"[bold]Setting up ClayBot[/bold] in {paths.home}", highlight=False)
        # Every question and every check first: nothing is written until all are done,
        # so a script missing an option, a failed check, or Ctrl-C at a prompt leaves
        # the home as it was.
        left_out: list[str] = []
        with _cancellable():
            providers = providers_section(
                current, questions, provider, model, key_source, check, os.environ, left_out
            )
            bot = telegram_section(
                current,
                questions,
                True if wants_telegram else telegram,
                token_source,
                telegram_allow,
                telegram_base_url,
                check,
                left_out,
            )
            plan = plan_setup(current, providers, bot, _checked_bot(current, bot))
            _check_sandbox(paths)
            install = ask_service(questions, service)
        console.print("\n[bold]Saving[/bold]")
        try:
            applied = apply_setup(paths, plan)
        except SetupNotApplied as exc:
            _not_applied(exc)
        _report(plan, providers, bot, applied)
        if left_out:
            console.print(f"left out of this setup: {', '.join(left_out)}", highlight=False)
    started = False
    if install:
        from claybot.cli.service_cmds import install_service

        started = install_service(paths)
    _next_steps(paths, started)


@contextmanager
def _cancellable() -> Iterator[None]:
    """Ctrl-C or Ctrl-D at a prompt ends the command, before anything is saved."""
    try:
        yield
    except (KeyboardInterrupt, EOFError, typer.Abort):
        console.print()  # the prompt's line was left open
        fail("cancelled: nothing was changed", code=130)


def _checked_bot(
    current: CurrentSetup, bot: TelegramAnswer | None
) -> PluginInstanceSettings | None:
    """The Telegram instance as it would be saved, checked as `plugins load` checks it."""
    if bot is None:
        return None
    from claybot.cli.plugins_cmds import checked_instance
    from claybot.plugins import PluginCatalog, PluginError

    try:
        return checked_instance(
            PluginCatalog.discover(),
            current.settings.plugins,
            TELEGRAM,
            TELEGRAM,
            bot.settings(current),
        )
    except PluginError as exc:
        fail(f"{exc.message}. Nothing was changed.", error=exc.code, field=exc.field)


def _not_applied(exc: SetupNotApplied) -> NoReturn:
    code = 130 if exc.interrupted else 1
    if not exc.leftovers:
        fail(f"the setup was not applied: {exc.reason}. Nothing was changed.", code)
    fail(
        f"the setup was not applied: {exc.reason}. Undoing what was applied failed in part: "
        f"{'; '.join(exc.leftovers)}. `claybot doctor` shows what is left to fix.",
        code,
    )


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


def _report(
    plan: SetupPlan,
    providers: list[ProviderAnswer],
    bot: TelegramAnswer | None,
    applied: Applied,
) -> None:
    """What the setup changed, and what it kept."""
    engine = "the running engine"
    saved = {(secret.entry_id, secret.key) for secret in plan.secrets}
    if not providers:
        console.print("no provider change: the order stays as it was")
    for position, answer in enumerate(providers):
        if (answer.id, "apiKey") in saved:
            where = engine if applied.through_engine else "auth.json"
            console.print(f"saved the {answer.id} API key in {where}", highlight=False)
        elif answer.id != "local":
            console.print(f"kept the {answer.id} API key already in auth.json", highlight=False)
        rank = "first" if position == 0 else f"number {position + 1}"
        where = engine if applied.through_engine else "settings.json"
        console.print(f"{answer.id} answers {rank} ({where})", highlight=False)
        if answer.id in applied.failures:
            warning = f"{answer.id}: {applied.failures[answer.id]}"
            err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)
    if bot is None:
        console.print("no Telegram bot" + (" change" if plan.current.telegram else ""))
        return
    if (TELEGRAM, "token") in saved:
        where = engine if applied.through_engine else "auth.json"
        console.print(f"saved the Telegram bot token in {where}")
    else:
        console.print("kept the Telegram bot token already in auth.json")
    if applied.plugin is not None:
        console.print(escape(applied.plugin))
    console.print(f"Telegram users allowed: {', '.join(map(str, bot.allowed))}", highlight=False)


def _next_steps(paths: HomePaths, service_started: bool) -> None:
    from claybot.server.banner import home_flag

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

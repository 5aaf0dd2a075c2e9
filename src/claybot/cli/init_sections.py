"""The parts of ``claybot init`` that are checked: the providers and the Telegram bot.

Each is asked, then checked. A failed check offers three ways on: retry (the part is
asked again, Enter keeping each answer, then checked again: after fixing the network,
or to type a key again), skip (the part is left out of this setup, and the command says
so) or quit (the command stops and nothing is saved). Without a terminal there is no one
to ask: the command stops, naming what failed and what to do, and nothing is saved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from rich.markup import escape

from claybot.cli.common import console, err_console, fail
from claybot.cli.init_checks import CheckResult, bot_api_url, check_bot, check_provider
from claybot.cli.init_questions import (
    CurrentSetup,
    ProviderAnswer,
    SecretSource,
    TelegramAnswer,
    ask_provider,
    ask_telegram,
    ask_telegram_wanted,
    choose_provider,
    wants_another_provider,
)
from claybot.cli.questions import Questions
from claybot.providers.options import endpoint_of

NextStep = Literal["retry", "skip", "quit"]
NEXT_STEPS: tuple[NextStep, ...] = ("retry", "skip", "quit")
QUIT_MESSAGE = "stopped after a failed check: nothing was changed"


def after_failed_check(
    questions: Questions, part: str, result: CheckResult, skip_means: str, in_a_script: str
) -> bool:
    """What the user wants after ``part`` failed its check: True to ask it again and
    retry, False to leave it out. Quit (or no terminal) ends the command here."""
    detail = result.detail.rstrip(".")
    if not questions.interactive:
        fail(f"{part} failed its check: {detail}. Nothing was changed: {in_a_script}")
    err_console.print(
        f"[red]✗ {escape(part)}[/red]: {escape(detail)}", highlight=False, soft_wrap=True
    )
    console.print("  retry: answer again (Enter keeps each answer), then check again")
    console.print(f"  skip:  {skip_means}", highlight=False, soft_wrap=True)
    console.print("  quit:  stop here; nothing is saved")
    step = questions.choose("What now?", flag="", choices=NEXT_STEPS, default="retry")
    if step == "quit":
        fail(QUIT_MESSAGE)
    return step == "retry"


def providers_section(
    current: CurrentSetup,
    questions: Questions,
    chosen: str | None,
    model: str | None,
    key_source: SecretSource,
    check: bool,
    env: Mapping[str, str],
    left_out: list[str],
) -> list[ProviderAnswer]:
    """The providers in the order they answer; those left out are added to ``left_out``."""
    console.print("\n[bold]1. Inference[/bold]")
    answers: list[ProviderAnswer] = []
    provider = choose_provider(current, questions, chosen, first=True)
    while True:
        if provider in {answer.id for answer in answers}:
            console.print(f"{provider} is in this setup already")
        elif answer := _settled_provider(
            current, questions, provider, model, key_source, check, env
        ):
            answers.append(answer)
        else:
            left_out.append(provider)
        if not wants_another_provider(questions):
            return answers
        provider = choose_provider(current, questions, None, first=False)
        # The options answer the first provider only; the others are asked.
        model, key_source = None, SecretSource("the API key", None, False, None, "")


def _settled_provider(
    current: CurrentSetup,
    questions: Questions,
    provider: str,
    model: str | None,
    key_source: SecretSource,
    check: bool,
    env: Mapping[str, str],
) -> ProviderAnswer | None:
    answer = ask_provider(current, questions, provider, model, key_source)
    while answer is not None and check and answer.id != "local":
        console.print(f"checking {answer.id} (one short call)…", highlight=False)
        result = check_provider(current, answer, env)
        if result.passed:
            console.print(f"[green]ok[/green]: {escape(result.detail)}", highlight=False)
            return answer
        retry = after_failed_check(
            questions,
            answer.id,
            result,
            f"leave {answer.id} out of this setup (its key is not saved, the provider "
            "order stays as it is)",
            f"check the key, the model and the network, then run it again (--no-check "
            f"saves {answer.id} unchecked)",
        )
        if not retry:
            console.print(f"{answer.id} is left out of this setup", highlight=False)
            return None
        answer = ask_provider(current, questions, provider, model, key_source, again=answer)
    return answer


def telegram_section(
    current: CurrentSetup,
    questions: Questions,
    enable: bool | None,
    token_source: SecretSource,
    allowed: list[int] | None,
    base_url: str | None,
    check: bool,
    left_out: list[str],
) -> TelegramAnswer | None:
    """The bot to set up; None when Telegram stays as it is (not wanted, or left out:
    then it is added to ``left_out``)."""
    console.print("\n[bold]2. Telegram[/bold]")
    if not ask_telegram_wanted(current, questions, enable):
        return None
    answer = _settled_bot(current, questions, token_source, allowed, base_url, check)
    if answer is None:
        left_out.append("Telegram")
    return answer


def _settled_bot(
    current: CurrentSetup,
    questions: Questions,
    token_source: SecretSource,
    allowed: list[int] | None,
    base_url: str | None,
    check: bool,
) -> TelegramAnswer | None:
    answer = ask_telegram(current, questions, token_source, allowed, base_url)
    while answer is not None and check:
        where = endpoint_of(bot_api_url(current, answer))
        console.print(f"checking the bot token (getMe at {where})…", highlight=False)
        result = check_bot(current, answer)
        if result.passed:
            console.print(f"[green]ok[/green]: {escape(result.detail)}", highlight=False)
            return answer
        retry = after_failed_check(
            questions,
            "Telegram",
            result,
            "leave Telegram out of this setup (its token is not saved; a bot already set "
            "up stays as it is)",
            "check the token and the network (--telegram-base-url for another Bot API "
            "server), then run it again; --no-telegram leaves the bot out, --no-check "
            "saves it unchecked",
        )
        if not retry:
            console.print("Telegram is left out of this setup")
            return None
        answer = ask_telegram(current, questions, token_source, allowed, base_url, again=answer)
    return answer

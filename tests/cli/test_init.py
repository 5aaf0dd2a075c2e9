"""`claybot init`: answered by options in a script, and asked on a real terminal.

The keys and the bot token are checked against fakes on loopback (an OpenAI-compatible
or Anthropic server, the Bot API); what happens when a check fails is in
test_init_checks.py."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claybot.config.home import HomePaths
from tests.cli.init_run import (
    API_KEY,
    BOT_TOKEN,
    BotApiThread,
    init,
    init_env,
    settings,
    terminal,
)
from tests.cli.init_run import auth as read_auth
from tests.conftest import EngineProcess
from tests.providers.fake_anthropic import FakeAnthropic
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import LoopbackServer


@pytest.fixture
def env(tmp_path: Path, paths: HomePaths) -> dict[str, str]:
    return init_env(tmp_path, paths)


@pytest.fixture
def openai() -> Iterator[FakeOpenAI]:
    vendor = FakeOpenAI()
    with LoopbackServer(vendor):
        yield vendor


@pytest.fixture
def bot_api() -> Iterator[BotApiThread]:
    server = BotApiThread()
    server.start()
    yield server
    server.stop()


def auth(paths: HomePaths) -> dict[str, Any]:
    assert stat.S_IMODE(paths.auth.stat().st_mode) == 0o600
    return read_auth(paths)


def telegram_instance(paths: HomePaths) -> dict[str, Any]:
    found = [p for p in settings(paths)["plugins"] if p["instanceId"] == "telegram"]
    assert len(found) == 1
    return found[0]


def test_init_with_options_writes_settings_and_auth(
    env: dict[str, str], paths: HomePaths, openai: FakeOpenAI, bot_api: BotApiThread
) -> None:
    openai.reply_text("Yes, I am here.")
    result = init(
        {**env, "CB_TEST_KEY": API_KEY, "OPENAI_BASE_URL": openai.api_base},
        "--provider", "openai",
        "--model", "gpt-test",
        "--api-key-env", "CB_TEST_KEY",
        "--telegram-token-stdin",
        "--telegram-allow", "42",
        "--telegram-allow", "7",
        "--telegram-base-url", bot_api.base_url,
        "--no-service",
        stdin=f"{BOT_TOKEN}\n",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert API_KEY not in result.stdout + result.stderr
    assert BOT_TOKEN not in result.stdout + result.stderr
    # Both were checked before anything was saved: the key and model by one short call,
    # the token by getMe.
    assert openai.last_body["model"] == "gpt-test"
    assert openai.requests[-1].headers["authorization"] == f"Bearer {API_KEY}"
    assert bot_api.api.methods() == ["getMe"]
    assert "ok: the Bot API at" in result.stdout and "@clay_test_bot" in result.stdout
    provider = settings(paths)["providers"][0]
    assert (provider["id"], provider["model"], provider["enabled"]) == ("openai", "gpt-test", True)
    bot = telegram_instance(paths)
    assert (bot["pluginId"], bot["enabled"]) == ("telegram", True)
    assert bot["settings"] == {"allowedUserIds": [42, 7], "baseUrl": bot_api.base_url}
    assert auth(paths) == {
        "openai": {"type": "apiKey", "apiKey": API_KEY},
        "telegram": {"type": "token", "token": BOT_TOKEN},
    }
    assert "claybot start --detach" in result.stdout  # no service: how to start it

    # Run again with only --yes: what is configured stays, keys included (and is checked).
    openai.reply_text("Still here.")
    again = init({**env, "OPENAI_BASE_URL": openai.api_base}, "--yes", "--no-service")
    assert again.returncode == 0, again.stderr
    assert "kept the openai API key already in auth.json" in again.stdout
    assert "kept the Telegram bot token already in auth.json" in again.stdout
    assert settings(paths)["providers"][0]["model"] == "gpt-test"
    assert telegram_instance(paths)["settings"] == {
        "allowedUserIds": [42, 7],
        "baseUrl": bot_api.base_url,
    }
    assert auth(paths)["openai"]["apiKey"] == API_KEY
    assert bot_api.api.methods() == ["getMe", "getMe"]


def test_no_check_saves_without_the_network(env: dict[str, str], paths: HomePaths) -> None:
    # Building an image, say: nothing to check against, and the user says so.
    result = init(
        {**env, "CB_TEST_KEY": API_KEY},
        "--provider", "anthropic", "--api-key-env", "CB_TEST_KEY",
        "--telegram-token-stdin", "--telegram-allow", "42",
        "--no-service", "--no-check",
        stdin=f"{BOT_TOKEN}\n",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "checking" not in result.stdout
    assert [p["id"] for p in settings(paths)["providers"]] == ["anthropic", "local"]
    assert set(auth(paths)) == {"anthropic", "telegram"}


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        ((), "", "no terminal to ask 'Which provider should answer first?': pass --provider"),
        (
            ("--provider", "openai"),
            "",
            "pass --api-key-env VAR, --api-key-stdin or --api-key",
        ),
        (
            ("--provider", "local", "--telegram-allow", "5"),
            "",
            "pass --telegram-token-env VAR or --telegram-token-stdin",
        ),
        (
            ("--provider", "local", "--no-telegram"),
            "",
            "pass --service/--no-service (or --yes to take the defaults)",
        ),
        (("--provider", "openai", "--api-key-env", "CB_UNSET"), "", "CB_UNSET is not set"),
        (("--provider", "local", "--api-key", "sk-x"), "", "the local provider needs no API key"),
        (
            ("--provider", "local", "--telegram-token-stdin", "--telegram-allow", "5"),
            "not-a-token\n",
            "that is not a bot token",
        ),
        (
            ("--no-telegram", "--telegram-allow", "5"),
            "",
            "--no-telegram, yet a --telegram-token-*, --telegram-allow or --telegram-base-url "
            "option was given",
        ),
        (("--api-key-stdin", "--api-key-env", "X"), "", "give the API key one way only"),
        (
            ("--telegram-base-url", "ftp://example.org/bot"),
            "",
            "--telegram-base-url must be an http(s) URL",
        ),
    ],
)
def test_init_without_a_terminal_names_the_option_it_needs(
    env: dict[str, str], paths: HomePaths, args: tuple[str, ...], stdin: str, message: str
) -> None:
    result = init({k: v for k, v in env.items() if k != "CB_UNSET"}, *args, stdin=stdin)
    assert result.returncode == 1
    assert message in result.stderr.replace("\n", " "), result.stderr
    assert "Traceback" not in result.stderr
    # Every question is answered before anything is written.
    assert not paths.settings.exists() and not paths.auth.exists()


def test_init_yes_takes_the_defaults_and_installs_the_service(
    env: dict[str, str], paths: HomePaths
) -> None:
    result = init(env, "--yes", "--service")
    assert result.returncode == 0, result.stderr
    assert [p["id"] for p in settings(paths)["providers"]] == ["local"]
    assert settings(paths)["plugins"] == []
    unit = Path(env["XDG_CONFIG_HOME"]) / "systemd/user/claybot.service"
    assert f"--home {paths.home}" in unit.read_text()
    assert "not started: systemd's user manager is not reachable" in result.stderr


@pytest.mark.slow
def test_init_through_a_running_engine(
    engine_process: EngineProcess, env: dict[str, str], paths: HomePaths
) -> None:
    engine_process.start()
    vendor = FakeAnthropic()
    with LoopbackServer(vendor):
        vendor.reply_text("Here.")
        result = init(
            {**env, "CB_TEST_KEY": API_KEY, "ANTHROPIC_BASE_URL": vendor.base_url},
            "--provider", "anthropic", "--api-key-env", "CB_TEST_KEY", "--no-telegram",
            "--no-service",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "saved the anthropic API key in the running engine" in result.stdout
    assert "anthropic answers first (the running engine)" in result.stdout
    with engine_process.client() as client:
        providers = client.get("/v1/engine/providers").json()["providers"]
    assert [p["id"] for p in providers][:2] == ["anthropic", "scripted"]
    assert auth(paths)["anthropic"]["apiKey"] == API_KEY


def test_init_on_a_terminal_asks_and_hides_the_secrets(
    env: dict[str, str], paths: HomePaths, openai: FakeOpenAI, bot_api: BotApiThread
) -> None:
    openai.reply_text("Yes.")
    with terminal(
        {**env, "OPENAI_BASE_URL": openai.api_base}, "--telegram-base-url", bot_api.base_url
    ) as session:
        session.answer(
            "Which provider should answer first? (openai, anthropic, local) [local]:", "openai"
        )
        session.answer("Model [", "claude-wrong")  # any name; the default shows in [...]
        session.answer(
            "openai API key (typed hidden; Enter leaves openai out of this setup):", API_KEY
        )
        session.expect("ok: gpt-fake answered")
        session.answer("Add another provider, tried when the ones before fail? [y/N]:", "n")
        # --telegram-base-url says Telegram is wanted: that question is not asked.
        session.answer(
            "Telegram bot token (typed hidden; Enter leaves Telegram out of this setup):",
            BOT_TOKEN,
        )
        session.answer("Telegram user ids allowed to talk to it", "me")
        session.expect("'me' is not a Telegram user id")  # explained, then asked again
        session.answer("Telegram user ids allowed to talk to it", "11, 22")
        session.expect("accepts the token: @clay_test_bot")
        session.answer("Run the engine as your user's service", "n")
        status = session.finish()
        output = session.output
    assert status == 0, output
    assert "11, 22" in output  # what is typed shows on the terminal...
    assert API_KEY not in output and BOT_TOKEN not in output  # ...but never the secrets
    assert "saved the openai API key in auth.json" in output
    assert "3. Command sandbox" in output
    assert openai.last_body["model"] == "claude-wrong"
    provider = settings(paths)["providers"][0]
    assert (provider["id"], provider["model"]) == ("openai", "claude-wrong")
    assert telegram_instance(paths)["settings"] == {
        "allowedUserIds": [11, 22],
        "baseUrl": bot_api.base_url,
    }
    assert auth(paths) == {
        "openai": {"type": "apiKey", "apiKey": API_KEY},
        "telegram": {"type": "token", "token": BOT_TOKEN},
    }

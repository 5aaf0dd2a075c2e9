"""`claybot init` applies a setup whole or not at all.

A check that fails on a terminal offers retry, skip or quit; a script stops, naming
what failed; Enter at a hidden prompt keeps the stored secret or leaves the part out;
Ctrl-C and Ctrl-D change nothing; and when applying fails, what was applied is undone,
through the running engine as well as on the files. "Nothing changed" is checked on
the bytes of settings.json and auth.json.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from claybot.config.home import HomePaths
from claybot.config.settings import Settings
from claybot.config.store import ConfigStore
from tests.cli.init_run import (
    API_KEY,
    BOT_TOKEN,
    BotApiThread,
    auth,
    file_bytes,
    init,
    init_env,
    refusing_socket,
    settings,
    terminal,
    wait_for,
)
from tests.conftest import EngineProcess
from tests.providers.fake_anthropic import FakeAnthropic
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import LoopbackServer

NEW_KEY = "sk-test-new-Yy7hidden"
NEW_TOKEN = "987654321:AAnewTOKENhidden_y"
WHAT_NOW = "What now? (retry, skip, quit) [retry]:"


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
    yield server
    server.stop()


def write_home(
    paths: HomePaths, bot_api_url: str, *, key: str | None = API_KEY, token: str | None = BOT_TOKEN
) -> None:
    """A home set up before, its files as ClayBot writes them: openai (with ``key``) then
    local, and a Telegram bot at ``bot_api_url`` allowing user 42 (with ``token``)."""
    store = ConfigStore(paths)
    paths.ensure()
    bot = {"allowedUserIds": [42], "baseUrl": bot_api_url}
    store.write_settings(
        Settings.model_validate(
            {
                "providers": [{"id": "openai"}, {"id": "local"}],
                "plugins": [{"instanceId": "telegram", "pluginId": "telegram", "settings": bot}],
            }
        )
    )
    stored = store.read_auth()
    if key is not None:
        stored = stored.with_field("openai", "apiKey", key)
    if token is not None:
        stored = stored.with_field("telegram", "token", token)
    store.write_auth(stored)


def unreachable_url() -> tuple[socket.socket, str]:
    """A Bot API URL whose port refuses connections (until a server starts on the socket)."""
    down = refusing_socket()
    return down, f"http://127.0.0.1:{down.getsockname()[1]}/bot"


# -- a failed check on a terminal: retry, skip, quit -------------------------------------


def test_a_failed_bot_check_is_retried_once_the_network_is_back(
    env: dict[str, str], paths: HomePaths, bot_api: BotApiThread
) -> None:
    down, base_url = unreachable_url()  # the Bot API: nothing answers there yet
    write_home(paths, base_url, token=None)
    before = file_bytes(paths)
    with terminal(env, "--provider", "local") as session:
        session.answer("Add another provider", "n")
        session.answer("Talk to your agents from Telegram", "y")
        session.answer("Telegram bot token (typed hidden", BOT_TOKEN)
        session.answer("Telegram user ids allowed to talk to it", "")  # 42, as configured
        session.expect("✗ Telegram")
        session.expect("does not answer (ConnectError)")
        session.expect("skip:  leave Telegram out of this setup")
        session.expect(WHAT_NOW)
        assert file_bytes(paths) == before  # nothing saved yet
        bot_api.start(down)  # the network is back
        session.child.sendline("retry")
        session.answer("Telegram bot token (typed hidden; Enter keeps it):", "")
        session.expect("accepts the token: @clay_test_bot")
        session.answer("Run the engine as your user's service", "n")
        status = session.finish()
        output = session.output
    assert status == 0, output
    assert BOT_TOKEN not in output
    assert bot_api.api.methods() == ["getMe"]  # the first try never reached it
    assert auth(paths)["telegram"] == {"type": "token", "token": BOT_TOKEN}
    [bot] = settings(paths)["plugins"]
    assert bot["enabled"] is True
    assert bot["settings"] == {"allowedUserIds": [42], "baseUrl": base_url}


def test_a_failed_bot_check_skipped_applies_the_rest(
    env: dict[str, str], paths: HomePaths, openai: FakeOpenAI
) -> None:
    down, base_url = unreachable_url()
    write_home(paths, base_url, key=None, token=None)
    openai.reply_text("Here.")
    with terminal({**env, "OPENAI_BASE_URL": openai.api_base}) as session:
        session.answer("Which provider should answer first?", "openai")
        session.answer("Model [", "")
        session.answer("openai API key (typed hidden", API_KEY)
        session.answer("Add another provider", "n")
        session.answer("Talk to your agents from Telegram", "y")
        session.answer("Telegram bot token (typed hidden", BOT_TOKEN)
        session.answer("Telegram user ids allowed to talk to it", "7")
        session.answer(WHAT_NOW, "skip")
        session.expect("Telegram is left out of this setup")
        session.answer("Run the engine as your user's service", "n")
        status = session.finish()
        output = session.output
    down.close()
    assert status == 0, output
    assert "ok: gpt-fake answered" in output
    assert "saved the openai API key in auth.json" in output
    assert "left out of this setup: Telegram" in output
    assert auth(paths) == {"openai": {"type": "apiKey", "apiKey": API_KEY}}  # no token
    saved = settings(paths)
    assert [p["id"] for p in saved["providers"]] == ["openai", "local"]
    [bot] = saved["plugins"]  # the bot as it was configured: not allowing user 7
    assert bot["settings"] == {"allowedUserIds": [42], "baseUrl": base_url}


def test_a_failed_bot_check_quit_changes_nothing(
    env: dict[str, str], paths: HomePaths, openai: FakeOpenAI
) -> None:
    down, base_url = unreachable_url()  # Telegram is unreachable now
    write_home(paths, base_url)
    before = file_bytes(paths)
    openai.reply_text("Here.")
    with terminal({**env, "OPENAI_BASE_URL": openai.api_base}) as session:
        session.answer("Which provider should answer first?", "openai")
        session.answer("Model [", "")
        session.answer("openai API key (typed hidden", NEW_KEY)
        session.answer("Add another provider", "n")
        session.answer("Talk to your agents from Telegram", "y")
        session.answer("Telegram bot token (typed hidden", NEW_TOKEN)
        session.answer("Telegram user ids allowed to talk to it", "7")
        session.answer(WHAT_NOW, "quit")
        status = session.finish()
        output = session.output
    down.close()
    assert status == 1, output
    assert "ok: gpt-fake answered" in output  # the new key works...
    assert "stopped after a failed check: nothing was changed" in output  # ...but no matter
    assert file_bytes(paths) == before
    assert NEW_KEY not in output and NEW_TOKEN not in output


def test_a_failed_provider_check_is_retried_with_the_key_typed_again(
    env: dict[str, str], paths: HomePaths, openai: FakeOpenAI
) -> None:
    openai.reply_error(401, "Incorrect API key provided")
    openai.reply_text("Here.")
    with terminal({**env, "OPENAI_BASE_URL": openai.api_base}, "--no-telegram") as session:
        session.answer("Which provider should answer first?", "openai")
        session.answer("Model [", "")
        session.answer("openai API key (typed hidden", "sk-typo")
        session.expect("✗ openai")
        session.expect("HTTP 401: Incorrect API key provided")
        session.answer(WHAT_NOW, "retry")
        session.answer("Model [", "")  # Enter keeps it
        session.answer("openai API key (typed hidden; Enter keeps it):", API_KEY)
        session.expect("ok: gpt-fake answered")
        session.answer("Add another provider", "n")
        session.answer("Run the engine as your user's service", "n")
        status = session.finish()
        output = session.output
    assert status == 0, output
    assert [r.headers["authorization"] for r in openai.requests] == [
        "Bearer sk-typo",
        f"Bearer {API_KEY}",
    ]
    assert auth(paths) == {"openai": {"type": "apiKey", "apiKey": API_KEY}}


# -- Enter, Ctrl-C and Ctrl-D at the hidden prompts -----------------------------------------


def test_enter_at_a_hidden_prompt_keeps_the_stored_key_or_leaves_the_part_out(
    env: dict[str, str], paths: HomePaths, openai: FakeOpenAI, bot_api: BotApiThread
) -> None:
    bot_api.start()
    write_home(paths, bot_api.base_url)
    before = file_bytes(paths)
    openai.reply_text("Here.")
    with terminal({**env, "OPENAI_BASE_URL": openai.api_base}) as session:
        session.answer("Which provider should answer first?", "openai")
        session.answer("Model [", "")
        session.answer("openai API key (typed hidden", "")
        session.expect("ok: gpt-fake answered")  # the stored key, checked
        session.answer("Add another provider", "y")
        session.answer("Which provider?", "anthropic")
        session.answer("Model [", "")
        session.answer("anthropic API key (typed hidden", "")
        session.expect("anthropic is left out of this setup: no key was given")
        session.answer("Add another provider", "n")
        session.answer("Talk to your agents from Telegram", "y")
        session.answer("Telegram bot token (typed hidden", "")
        session.answer("Telegram user ids allowed to talk to it", "")  # [42] kept
        session.expect("accepts the token")
        session.answer("Run the engine as your user's service", "n")
        status = session.finish()
        output = session.output
    assert status == 0, output
    # Each hidden prompt said what Enter does.
    assert "openai API key (typed hidden; Enter keeps the one in auth.json):" in output
    assert "anthropic API key (typed hidden; Enter leaves anthropic out of this setup):" in (output)
    assert "Telegram bot token (typed hidden; Enter keeps the one in auth.json):" in output
    assert "kept the openai API key already in auth.json" in output
    assert "kept the Telegram bot token already in auth.json" in output
    assert "left out of this setup: anthropic" in output
    assert openai.requests[-1].headers["authorization"] == f"Bearer {API_KEY}"
    assert file_bytes(paths) == before  # the same setup: nothing to write


@pytest.mark.parametrize("stop", ["ctrl-c", "ctrl-d"])
def test_ctrl_c_or_ctrl_d_at_a_hidden_prompt_changes_nothing(
    env: dict[str, str], paths: HomePaths, openai: FakeOpenAI, bot_api: BotApiThread, stop: str
) -> None:
    bot_api.start()
    write_home(paths, bot_api.base_url)
    before = file_bytes(paths)
    openai.reply_text("Here.")
    with terminal({**env, "OPENAI_BASE_URL": openai.api_base}) as session:
        session.answer("Which provider should answer first?", "openai")
        session.answer("Model [", "")
        session.answer("openai API key (typed hidden", NEW_KEY)
        session.answer("Add another provider", "n")
        session.answer("Talk to your agents from Telegram", "y")
        session.expect("Telegram bot token (typed hidden")
        if stop == "ctrl-c":
            session.child.sendintr()
        else:
            session.child.sendeof()
        status = session.finish()
        output = session.output
    assert status == 130, output
    assert "cancelled: nothing was changed" in output
    assert "Traceback" not in output
    assert file_bytes(paths) == before


# -- without a terminal ------------------------------------------------------------------


def test_a_script_stops_at_a_failed_check_naming_it_and_changes_nothing(
    env: dict[str, str], paths: HomePaths, openai: FakeOpenAI, bot_api: BotApiThread
) -> None:
    bot_api.start().fail("getMe", 401, "Unauthorized")  # the token was revoked
    write_home(paths, bot_api.base_url)
    before = file_bytes(paths)
    openai.reply_text("Here.")
    result = init(
        {**env, "CB_TEST_KEY": NEW_KEY, "OPENAI_BASE_URL": openai.api_base},
        "--provider", "openai", "--api-key-env", "CB_TEST_KEY", "--telegram", "--yes",
        "--no-service",
    )  # fmt: skip
    assert result.returncode == 1, result.stdout
    message = result.stderr.replace("\n", " ")
    assert "Telegram failed its check: Telegram rejected the bot token (401 Unauthorized)" in (
        message
    )
    assert "Nothing was changed" in message and "--no-telegram leaves the bot out" in message
    assert "Traceback" not in result.stderr
    assert file_bytes(paths) == before  # the new openai key, which passed, is not saved


# -- applying fails: what was applied is undone ---------------------------------------------


class SettingsWriteFails(ConfigStore):
    """A disk that takes auth.json and then refuses settings.json (full, say)."""

    def write_settings(self, settings: Settings) -> None:
        raise OSError(28, "No space left on device")


def test_a_settings_json_that_cannot_be_written_puts_auth_json_back(paths: HomePaths) -> None:
    from claybot.cli.init_apply import SetupNotApplied, write_setup_files
    from claybot.cli.init_plan import plan_setup
    from claybot.cli.init_questions import CurrentSetup, ProviderAnswer

    store = ConfigStore(paths)
    paths.ensure()
    store.write_auth(store.read_auth().with_field("openai", "apiKey", API_KEY))
    store.write_settings(Settings())
    before = file_bytes(paths)
    current = CurrentSetup.read(paths)
    plan = plan_setup(current, [ProviderAnswer("anthropic", None, NEW_KEY)], None, None)
    with pytest.raises(SetupNotApplied) as failed:
        write_setup_files(SettingsWriteFails(paths), plan)
    assert failed.value.reason == (
        "settings.json cannot be written: [Errno 28] No space left on device"
    )
    assert failed.value.leftovers == []
    assert file_bytes(paths) == before


@pytest.mark.slow
def test_a_bot_the_engine_cannot_load_undoes_the_whole_setup(
    engine_process: EngineProcess, env: dict[str, str], paths: HomePaths, bot_api: BotApiThread
) -> None:
    api = bot_api.start()
    # A home set up before, whose bot has no token yet: the engine starts without it.
    write_home(paths, api.base_url, token=None)
    engine_process.start()
    before = file_bytes(paths)
    vendor = FakeAnthropic()
    with (
        LoopbackServer(vendor),
        terminal({**env, "ANTHROPIC_BASE_URL": vendor.base_url}) as session,
    ):
        vendor.reply_text("Here.")
        session.answer("Which provider should answer first?", "anthropic")
        session.answer("Model [", "")
        session.answer("anthropic API key (typed hidden", NEW_KEY)
        session.answer("Add another provider", "n")
        session.answer("Talk to your agents from Telegram", "y")
        session.answer("Telegram bot token (typed hidden", BOT_TOKEN)
        session.answer("Telegram user ids allowed to talk to it", "")
        session.expect("Run the engine as your user's service")
        # Every answer is in; Telegram stops taking the token before the engine loads it.
        api.fail("getMe", 401, "Unauthorized")
        session.child.sendline("n")
        status = session.finish()
        output = session.output
    assert status == 1, output
    assert file_bytes(paths) == before  # the new key and the provider order undone too
    message = " ".join(output.split())
    assert (
        "the setup was not applied: the engine refused it: plugin instance 'telegram' failed "
        "to load: Telegram rejected the bot token"
    ) in message
    assert "Nothing was changed." in message
    assert api.methods() == ["getMe", "getMe"]  # init's check, then the engine's load
    with engine_process.client() as client:
        providers = client.get("/v1/engine/providers").json()["providers"]
        loaded = client.get("/v1/engine/plugins").json()["loaded"]
    assert [p["id"] for p in providers] == ["openai", "local"]
    assert loaded == []
    engine_process.terminate()


@pytest.mark.slow
def test_a_new_token_for_a_running_bot_reloads_it(
    engine_process: EngineProcess, env: dict[str, str], paths: HomePaths, bot_api: BotApiThread
) -> None:
    api = bot_api.start()
    write_home(paths, api.base_url)
    engine_process.start()
    with engine_process.client() as client:
        wait_for(lambda: client.get("/v1/engine/plugins").json()["loaded"] != [], "the bot")
    api.token = NEW_TOKEN  # @BotFather revoked the old token and gave a new one
    result = init(
        {**env, "CB_TEST_TOKEN": NEW_TOKEN},
        "--provider", "local", "--telegram-token-env", "CB_TEST_TOKEN", "--telegram-allow", "42",
        "--no-service",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "saved the Telegram bot token in the running engine" in result.stdout
    assert "loaded telegram (Telegram)" in result.stdout
    assert auth(paths)["telegram"] == {"type": "token", "token": NEW_TOKEN}
    with engine_process.client() as client:
        loaded = client.get("/v1/engine/plugins").json()["loaded"]
    assert [entry["id"] for entry in loaded] == ["telegram"]
    engine_process.terminate()

"""`claybot init`: answered by options in a script, and asked on a real terminal."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from claybot.config.home import HomePaths
from tests.conftest import EngineProcess

API_KEY = "sk-test-Zq8hidden"
BOT_TOKEN = "123456789:AAtestTOKENhidden_x"


@pytest.fixture
def env(tmp_path: Path, paths: HomePaths) -> dict[str, str]:
    """The home to set up, and a user with no reachable systemd user manager (as in a
    container and in CI) whose config folder is temporary."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    return {
        **os.environ,
        "CLAYBOT_HOME": str(paths.home),
        "HOME": str(tmp_path / "user"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_RUNTIME_DIR": str(runtime),
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={runtime}/no-bus",
        "COLUMNS": "200",
    }


def init(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claybot", "init", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def settings(paths: HomePaths) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(paths.settings.read_text())
    return loaded


def auth(paths: HomePaths) -> dict[str, Any]:
    assert stat.S_IMODE(paths.auth.stat().st_mode) == 0o600
    loaded: dict[str, Any] = json.loads(paths.auth.read_text())
    return loaded


def telegram_instance(paths: HomePaths) -> dict[str, Any]:
    found = [p for p in settings(paths)["plugins"] if p["instanceId"] == "telegram"]
    assert len(found) == 1
    return found[0]


def test_init_with_options_writes_settings_and_auth(env: dict[str, str], paths: HomePaths) -> None:
    result = init(
        {**env, "CB_TEST_KEY": API_KEY},
        "--provider", "openai",
        "--model", "gpt-test",
        "--api-key-env", "CB_TEST_KEY",
        "--telegram-token-stdin",
        "--telegram-allow", "42",
        "--telegram-allow", "7",
        "--no-service",
        stdin=f"{BOT_TOKEN}\n",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert API_KEY not in result.stdout + result.stderr
    assert BOT_TOKEN not in result.stdout + result.stderr
    provider = settings(paths)["providers"][0]
    assert (provider["id"], provider["model"], provider["enabled"]) == ("openai", "gpt-test", True)
    bot = telegram_instance(paths)
    assert (bot["pluginId"], bot["enabled"]) == ("telegram", True)
    assert bot["settings"] == {"allowedUserIds": [42, 7]}
    assert auth(paths) == {
        "openai": {"type": "apiKey", "apiKey": API_KEY},
        "telegram": {"type": "token", "token": BOT_TOKEN},
    }
    assert "claybot start --detach" in result.stdout  # no service: how to start it

    # Run again with only --yes: what is configured stays, keys included.
    again = init(env, "--yes", "--no-service")
    assert again.returncode == 0, again.stderr
    assert "kept the openai API key already in auth.json" in again.stdout
    assert "kept the Telegram bot token already in auth.json" in again.stdout
    assert settings(paths)["providers"][0]["model"] == "gpt-test"
    assert telegram_instance(paths)["settings"] == {"allowedUserIds": [42, 7]}
    assert auth(paths)["openai"]["apiKey"] == API_KEY


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
            "--no-telegram, yet a --telegram-token-* or --telegram-allow option was given",
        ),
        (("--api-key-stdin", "--api-key-env", "X"), "", "give the API key one way only"),
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
    result = init(
        {**env, "CB_TEST_KEY": API_KEY},
        "--provider", "anthropic", "--api-key-env", "CB_TEST_KEY", "--no-telegram", "--no-service",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "saved the anthropic API key in the running engine" in result.stdout
    assert "anthropic answers first (the running engine)" in result.stdout
    with engine_process.client() as client:
        providers = client.get("/v1/engine/providers").json()["providers"]
    assert [p["id"] for p in providers][:2] == ["anthropic", "scripted"]
    assert auth(paths)["anthropic"]["apiKey"] == API_KEY


def test_init_on_a_terminal_asks_and_hides_the_secrets(
    env: dict[str, str], paths: HomePaths
) -> None:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "claybot", "init"],
        env={**env, "TERM": "dumb"},
        encoding="utf-8",
        timeout=60,
    )
    transcript = io.StringIO()  # everything the terminal showed
    child.logfile_read = transcript

    def answer(prompt: str, reply: str) -> None:
        child.expect_exact(prompt)
        child.sendline(reply)

    try:
        answer("Which provider should answer first? (openai, anthropic, local) [local]:", "openai")
        answer("Model [", "claude-wrong")  # any name is taken; the default shows in [...]
        answer("openai API key (typed hidden):", API_KEY)
        answer("Add another provider, tried when the ones before fail? [y/N]:", "n")
        answer("Talk to your agents from Telegram", "y")
        answer("Telegram bot token (typed hidden):", BOT_TOKEN)
        answer("Telegram user ids allowed to talk to it", "me")
        child.expect_exact("'me' is not a Telegram user id")  # explained, then asked again
        answer("Telegram user ids allowed to talk to it", "11, 22")
        answer("Run the engine as your user's service", "n")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    output = transcript.getvalue()
    assert child.exitstatus == 0, output
    assert "11, 22" in output  # what is typed shows on the terminal...
    assert API_KEY not in output and BOT_TOKEN not in output  # ...but never the secrets
    assert "saved the openai API key in auth.json" in output
    assert "3. Command sandbox" in output
    provider = settings(paths)["providers"][0]
    assert (provider["id"], provider["model"]) == ("openai", "claude-wrong")
    assert telegram_instance(paths)["settings"] == {"allowedUserIds": [11, 22]}
    assert auth(paths) == {
        "openai": {"type": "apiKey", "apiKey": API_KEY},
        "telegram": {"type": "token", "token": BOT_TOKEN},
    }

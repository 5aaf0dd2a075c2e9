"""Defects of the command line seen by a new user (issue 12), each with the test that
showed it: the real `claybot` against a real engine, or against none."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from claybot.config.home import HomePaths
from tests.cli.test_cli import cli, spawn
from tests.conftest import EngineProcess

pytestmark = pytest.mark.slow


def test_stop_on_a_home_where_no_engine_ever_ran_says_so(tmp_path: Path) -> None:
    paths = HomePaths(tmp_path / "never-started")
    result = cli(paths, "stop")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "no engine is running" in result.stdout


def test_events_piped_into_head_ends_when_head_does(engine_process: EngineProcess) -> None:
    engine_process.start()
    pipeline = spawn(engine_process.paths, "events", "--json")
    assert pipeline.stdout is not None
    assert json.loads(pipeline.stdout.readline())["type"] == "init"
    pipeline.stdout.close()  # as `head -1` does after its line
    # The next event the command writes finds nobody reading: it ends, quietly.
    cli(engine_process.paths, "chat", "--user", "eve", stdin="ping\n")
    assert pipeline.wait(30) == 0
    assert pipeline.stderr is not None
    errors = pipeline.stderr.read()
    assert "reconnecting" not in errors and "Traceback" not in errors


def test_running_an_unknown_heartbeat_task_is_an_error(engine_process: EngineProcess) -> None:
    engine_process.start()
    result = cli(engine_process.paths, "heartbeat", "run", "nope")
    assert result.returncode == 1
    assert "no heartbeat task with id starting 'nope'" in result.stderr
    assert "is running" not in result.stdout


def test_removing_an_unknown_cron_task_names_it_whole(engine_process: EngineProcess) -> None:
    engine_process.start()
    result = cli(engine_process.paths, "cron", "remove", "nope", "--yes")
    assert result.returncode == 1
    assert "no cron task with id starting 'nope'" in result.stderr


def test_chat_help_shows_its_placeholders(paths: HomePaths) -> None:
    result = cli(paths, "chat", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())  # the help is wrapped to the terminal
    assert "/allow N or /deny N" in text


def test_a_second_engine_on_a_taken_port_names_the_port_and_the_way_out(
    engine_process: EngineProcess,
) -> None:
    engine_process.start()
    with engine_process.client() as client:
        port = client.get("/v1/engine/status").json()["tcp"]["port"]
    # Its own home (a short path: a Unix socket's path is limited to ~107 bytes).
    other = HomePaths(Path(tempfile.mkdtemp(prefix="cb-", dir="/tmp")))
    started = time.monotonic()
    try:
        result = cli(other, "start", "--port", str(port), timeout_s=60)
    finally:
        shutil.rmtree(other.home, ignore_errors=True)
    assert result.returncode != 0
    said = " ".join(result.stderr.split())  # wrapped to the terminal
    assert f"port {port}" in said and "claybot start --port N" in said, said
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 30


def test_adding_a_provider_without_its_key_warns_and_says_how(
    engine_process: EngineProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    engine_process.start()
    result = cli(engine_process.paths, "providers", "add", "nokey", "--type", "openai")
    assert result.returncode == 0, result.stderr  # added: the key may come next
    said = " ".join(result.stderr.split())
    assert "warning: nokey: no API key" in said, said
    assert "claybot auth set nokey apiKey" in said


def test_adding_a_provider_without_its_key_warns_offline_too(
    paths: HomePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = cli(paths, "providers", "add", "nokey", "--type", "openai")
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "warning: nokey: no API key" in said, said


def test_stop_while_events_are_followed_ends_the_stream_cleanly(
    engine_process: EngineProcess,
) -> None:
    engine_process.start()
    follower = spawn(engine_process.paths, "events", "--json", stderr=subprocess.DEVNULL)
    try:
        assert follower.stdout is not None
        assert json.loads(follower.stdout.readline())["type"] == "init"
        result = cli(engine_process.paths, "stop")
        assert result.returncode == 0, result.stderr
        assert engine_process.process is not None
        assert engine_process.process.wait(30) == 0
    finally:
        follower.terminate()
        follower.wait(10)
    # The stream ended when the engine stopped: the server did not have to give up
    # waiting for it and cancel it.
    output = engine_process.output()
    assert "graceful shutdown" not in output and "Traceback" not in output, output


def test_a_second_instance_that_cannot_load_is_one_line_not_tracebacks(
    engine_process: EngineProcess,
) -> None:
    engine_process.start()
    assert cli(engine_process.paths, "plugins", "load", "clock").returncode == 0
    result = cli(engine_process.paths, "plugins", "load", "clock", "--instance", "clock2")
    assert result.returncode == 1
    assert "already registered" in result.stderr, result.stderr
    assert "Traceback" not in engine_process.output()


def test_a_refused_value_is_explained_without_internals(engine_process: EngineProcess) -> None:
    engine_process.start()
    result = cli(
        engine_process.paths,
        "cron", "add", "--name", "n", "--schedule", "61 * * * *", "--prompt", "p",
    )  # fmt: skip
    assert result.returncode == 1
    said = " ".join(result.stderr.split())
    assert "body." not in said and "Value error" not in said and "field:" not in said, said


def test_version_is_printed(paths: HomePaths) -> None:
    from claybot import __version__

    result = cli(paths, "--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"claybot {__version__}"


def _auth_round(paths: HomePaths) -> None:
    for key, value in (("apiKey", "sk-never-shown"), ("organization", "org-1")):
        assert cli(paths, "auth", "set", "openai", key, value).returncode == 0
    listed = cli(paths, "auth", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["entries"] == {
        "openai": {"type": "apiKey", "fields": ["apiKey", "organization"]}
    }
    assert "sk-never-shown" not in cli(paths, "auth", "list").stdout
    # A script (no terminal to ask on) deletes nothing without --yes.
    kept = cli(paths, "auth", "remove", "openai")
    assert kept.returncode == 1 and "pass --yes to confirm" in kept.stderr
    assert cli(paths, "auth", "remove", "openai", "apiKey", "--yes").returncode == 0
    fields = json.loads(cli(paths, "auth", "list", "--json").stdout)["entries"]["openai"]["fields"]
    assert fields == ["organization"]
    assert cli(paths, "auth", "remove", "openai", "--yes").returncode == 0
    assert json.loads(cli(paths, "auth", "list", "--json").stdout) == {"ok": True, "entries": {}}
    unknown = cli(paths, "auth", "remove", "nope", "--yes")
    assert (
        unknown.returncode == 1 and "no auth.json entry with id starting 'nope'" in unknown.stderr
    )


def test_auth_list_and_remove_without_an_engine(paths: HomePaths) -> None:
    _auth_round(paths)


def test_auth_list_and_remove_through_the_engine(engine_process: EngineProcess) -> None:
    engine_process.start()
    _auth_round(engine_process.paths)


def _enabled(paths: HomePaths) -> dict[str, bool]:
    listed = cli(paths, "providers", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return {p["id"]: p.get("enabled", True) for p in json.loads(listed.stdout)["providers"]}


def test_providers_disable_and_enable_keep_their_place(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    engine_process.start()
    backup = ("providers", "add", "backup", "--type", "scripted", "--model", "echo")
    assert cli(paths, *backup).returncode == 0
    assert cli(paths, "providers", "disable", "scripted").returncode == 0
    assert _enabled(paths) == {"scripted": False, "backup": True}
    # The disabled provider is not used: the engine answers through "backup".
    with engine_process.client() as client:
        status = client.get("/v1/engine/status").json()
    assert [p["id"] for p in status["inferenceProviders"]] == ["backup"]
    assert cli(paths, "providers", "enable", "scripted").returncode == 0
    assert _enabled(paths) == {"scripted": True, "backup": True}
    missing = cli(paths, "providers", "disable", "nope")
    assert missing.returncode == 1 and "nope" in missing.stderr
    engine_process.terminate()
    assert cli(paths, "providers", "disable", "backup").returncode == 0  # offline: the file
    saved = json.loads(paths.settings.read_text())["providers"]
    assert [(p["id"], p.get("enabled", True)) for p in saved] == [
        ("scripted", True),
        ("backup", False),
    ]


def test_plugins_info_shows_the_settings_a_plugin_takes(paths: HomePaths) -> None:
    shown = cli(paths, "plugins", "info", "clock")
    assert shown.returncode == 0, shown.stderr
    assert "timezone" in shown.stdout and "toolName" in shown.stdout
    assert "claybot plugins load clock --setting KEY=VALUE" in shown.stdout
    entry = json.loads(cli(paths, "plugins", "info", "clock", "--json").stdout)["plugin"]
    assert entry["id"] == "clock" and "timezone" in entry["settingsSchema"]["properties"]
    missing = cli(paths, "plugins", "info", "nope")
    assert missing.returncode == 1 and "no plugin 'nope' is installed" in missing.stderr


def test_heartbeat_tasks_are_kept_without_an_engine(paths: HomePaths) -> None:
    added = cli(paths, "heartbeat", "add", "--title", "Inbox", "--prompt", "anything new?")
    assert added.returncode == 0, added.stderr
    assert (paths.home / "heartbeat" / "inbox.md").exists()
    taken = cli(paths, "heartbeat", "add", "--title", "Inbox", "--prompt", "again")
    assert taken.returncode == 1 and "exists" in taken.stderr
    listing = json.loads(cli(paths, "heartbeat", "list", "--json").stdout)
    assert [(t["id"], t["prompt"]) for t in listing["tasks"]] == [("inbox", "anything new?")]
    assert "when the engine runs" in cli(paths, "heartbeat", "list").stdout
    assert cli(paths, "heartbeat", "remove", "inbox", "--yes").returncode == 0
    gone = cli(paths, "heartbeat", "remove", "inbox", "--yes")
    assert gone.returncode == 1 and "no heartbeat task with id starting 'inbox'" in gone.stderr


def answer_on_a_terminal(paths: HomePaths, answer: str, *args: str) -> tuple[int, str]:
    """Run the command with a terminal as its input, typing ``answer`` on it."""
    controller, terminal = pty.openpty()
    env = {**os.environ, "CLAYBOT_HOME": str(paths.home), "COLUMNS": "200"}
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "claybot", *args],
            env=env,
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        os.write(controller, answer.encode() + b"\n")
        output, _ = process.communicate(timeout=60)
    finally:
        os.close(controller)
        os.close(terminal)
    return process.returncode, output


def test_deleting_asks_first_on_a_terminal(paths: HomePaths) -> None:
    assert cli(paths, "auth", "set", "openai", "apiKey", "sk-1").returncode == 0
    code, output = answer_on_a_terminal(paths, "n", "auth", "remove", "openai")
    assert code == 1 and "Remove openai (every field) from auth.json?" in output, output
    assert "nothing was changed" in output
    assert "openai" in json.loads(cli(paths, "auth", "list", "--json").stdout)["entries"]
    code, output = answer_on_a_terminal(paths, "y", "auth", "remove", "openai")
    assert code == 0, output
    assert json.loads(cli(paths, "auth", "list", "--json").stdout)["entries"] == {}


def test_an_error_quoting_brackets_shows_them(paths: HomePaths) -> None:
    result = cli(paths, "plugins", "info", "[bold]x[/bold]")
    assert result.returncode == 1
    assert "no plugin '[bold]x[/bold]' is installed" in result.stderr, result.stderr


def test_ids_are_never_cut_in_a_narrow_terminal(paths: HomePaths) -> None:
    task_id = "a-rather-long-heartbeat-task-id-that-must-stay-whole"
    added = cli(paths, "heartbeat", "add", "--title", "t", "--prompt", "p", "--id", task_id)
    assert added.returncode == 0, added.stderr
    env = {**os.environ, "CLAYBOT_HOME": str(paths.home), "COLUMNS": "40"}
    listed = subprocess.run(
        [sys.executable, "-m", "claybot", "heartbeat", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert task_id in listed.stdout, listed.stdout

"""The `claybot` command line against a real engine process (and without one)."""

from __future__ import annotations

import json
import os
import queue
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO

import pytest

from claybot.config.home import HomePaths
from tests.conftest import EngineProcess

pytestmark = pytest.mark.slow


def cli(
    paths: HomePaths,
    *args: str,
    stdin: str | None = None,
    timeout_s: float = 60,
    env: Mapping[str, str | None] | None = None,
    columns: int = 200,
) -> subprocess.CompletedProcess[str]:
    """`claybot ARGS` on ``paths``; ``env`` sets variables (None removes one)."""
    chosen = {
        **os.environ,
        "CLAYBOT_HOME": str(paths.home),
        "COLUMNS": str(columns),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "claybot", *args],
        env={name: value for name, value in chosen.items() if value is not None},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def spawn(paths: HomePaths, *args: str, stderr: int = subprocess.PIPE) -> subprocess.Popen[str]:
    """`claybot ARGS` running in the background, its output readable as it comes."""
    env = {**os.environ, "CLAYBOT_HOME": str(paths.home), "COLUMNS": "200"}
    return subprocess.Popen(
        [sys.executable, "-m", "claybot", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def test_chat_prints_each_reply_in_order(engine_process: EngineProcess) -> None:
    engine_process.start()
    result = cli(
        engine_process.paths, "chat", "--user", "ann", stdin="hello\n[bold]not markup[/bold]\n"
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("agent>")]
    assert lines == ["agent> echo: hello", "agent> echo: [bold]not markup[/bold]"]


def test_chat_survives_an_engine_restart(engine_process: EngineProcess) -> None:
    engine_process.start()
    env = {**os.environ, "CLAYBOT_HOME": str(engine_process.paths.home)}
    chat = subprocess.Popen(
        [sys.executable, "-m", "claybot", "chat", "--user", "bob"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert chat.stdin is not None and chat.stdout is not None
    chat.stdin.write("before\n")
    chat.stdin.flush()
    assert chat.stdout.readline().strip() == "agent> echo: before"
    engine_process.kill()
    chat.stdin.write("during\n")  # posted while the engine is down: retried, accepted once
    chat.stdin.flush()
    restarter = threading.Timer(1.0, engine_process.start)
    restarter.start()
    chat.stdin.close()
    assert chat.stderr is not None
    out = chat.stdout.read()
    err = chat.stderr.read()
    assert chat.wait(90) == 0, err
    restarter.join()
    assert out.strip().splitlines() == ["agent> echo: during"]
    history = json.loads(cli(engine_process.paths, "agents", "list", "--json").stdout)["agents"]
    agent_id = next(a["agentId"] for a in history if a["descriptor"]["userId"] == "bob")
    records = json.loads(cli(engine_process.paths, "agents", "history", agent_id, "--json").stdout)[
        "records"
    ]
    assert [r["text"] for r in records if r["type"] == "user_message"] == ["before", "during"]


def test_agents_list_history_and_reset(engine_process: EngineProcess) -> None:
    engine_process.start()
    cli(engine_process.paths, "chat", "--user", "cat", stdin="remember this\n")
    agents = json.loads(cli(engine_process.paths, "agents", "list", "--json").stdout)["agents"]
    agent_id = agents[0]["agentId"]
    listing = cli(engine_process.paths, "agents", "list")
    assert agent_id[:10] in listing.stdout and "local:cat/cli" in listing.stdout
    transcript = cli(engine_process.paths, "agents", "history", agent_id).stdout
    assert "user> remember this" in transcript and "agent> echo: remember this" in transcript
    reset = cli(engine_process.paths, "agents", "reset", agent_id)
    assert reset.returncode == 0 and "reset" in reset.stdout
    assert "— reset" in cli(engine_process.paths, "agents", "history", agent_id).stdout
    missing = cli(engine_process.paths, "agents", "history", "nope")
    assert missing.returncode == 1 and "no agent with id starting 'nope'" in missing.stderr


def test_events_follows_the_stream(engine_process: EngineProcess) -> None:
    engine_process.start()
    follower = spawn(engine_process.paths, "events", "--json", stderr=subprocess.DEVNULL)
    assert follower.stdout is not None
    assert json.loads(follower.stdout.readline())["type"] == "init"
    cli(engine_process.paths, "chat", "--user", "dan", stdin="ping\n")
    seen = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        event = json.loads(follower.stdout.readline())
        seen.append(event["type"])
        if event["type"] == "agent.outgoing":
            break
    follower.terminate()
    follower.wait(10)
    assert "agent.created" in seen and seen[-1] == "agent.outgoing"


def test_plugins_online_and_offline(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    engine_process.start()
    loaded = cli(paths, "plugins", "load", "clock", "--setting", "timezone=Europe/Berlin")
    assert loaded.returncode == 0 and "loaded clock" in loaded.stdout
    assert "clock" in cli(paths, "plugins", "list").stdout
    bad = cli(
        paths, "plugins", "load", "clock", "--instance", "c2", "--setting", "timezone=Nowhere/City"
    )
    assert bad.returncode == 1 and "timezone" in bad.stderr
    assert cli(paths, "plugins", "unload", "clock").returncode == 0
    engine_process.terminate()
    offline = cli(
        paths, "plugins", "load", "clock", "--instance", "clock-2", "--setting", "timezone=UTC"
    )
    assert offline.returncode == 0 and "loads when the engine starts" in offline.stdout
    entries = {p["instanceId"]: p for p in json.loads(paths.settings.read_text())["plugins"]}
    assert entries["clock"]["enabled"] is False and entries["clock-2"]["settings"] == {
        "timezone": "UTC"
    }
    assert cli(paths, "plugins", "unload", "clock-2").returncode == 0
    assert json.loads(paths.settings.read_text())["plugins"][-1]["enabled"] is False
    unknown = cli(paths, "plugins", "load", "no-such-plugin")
    assert unknown.returncode == 1 and "unknown plugin" in unknown.stderr


def test_auth_set_online_and_offline(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    engine_process.start()
    online = cli(paths, "auth", "set", "openai", "apiKey", "sk-online-secret")
    assert online.returncode == 0 and "sk-online-secret" not in online.stdout + online.stderr
    engine_process.terminate()
    offline = cli(paths, "auth", "set", "telegram", "token", "123:offline-secret")
    assert offline.returncode == 0 and "offline-secret" not in offline.stdout
    auth = json.loads(paths.auth.read_text())
    assert (
        auth["openai"]["apiKey"] == "sk-online-secret"
        and auth["telegram"]["token"] == "123:offline-secret"
    )
    assert stat.S_IMODE(paths.auth.stat().st_mode) == 0o600
    assert cli(paths, "auth", "set", "../x", "apiKey", "v").returncode == 1
    # A type auth.json does not know is refused with the types, not a traceback, and
    # without echoing the value (a secret typed in the wrong place).
    wrong = cli(paths, "auth", "set", "openai", "type", "sk-typed-here")
    assert wrong.returncode == 1 and "apiKey, token, oauth" in wrong.stderr
    assert "Traceback" not in wrong.stderr and "sk-typed-here" not in wrong.stderr
    assert json.loads(paths.auth.read_text()) == auth


def test_providers_online_and_offline(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    engine_process.start()
    added = cli(
        paths,
        "providers",
        "add",
        "backup",
        "--type",
        "scripted",
        "--model",
        "echo",
        "--position",
        "0",
    )
    assert added.returncode == 0, added.stderr
    ids = [
        p["id"] for p in json.loads(cli(paths, "providers", "list", "--json").stdout)["providers"]
    ]
    assert ids == ["backup", "scripted"]
    assert cli(paths, "providers", "default", "scripted").returncode == 0
    assert cli(paths, "providers", "remove", "backup", "--yes").returncode == 0
    listed = json.loads(cli(paths, "providers", "list", "--json").stdout)["providers"]
    assert [p["id"] for p in listed] == ["scripted"]
    engine_process.terminate()
    assert (
        cli(
            paths,
            "providers",
            "add",
            "ollama",
            "--type",
            "openai",
            "--option",
            "baseUrl=http://x/v1",
        ).returncode
        == 0
    )
    assert cli(paths, "providers", "default", "ollama").returncode == 0
    saved = json.loads(paths.settings.read_text())["providers"]
    assert [p["id"] for p in saved] == ["ollama", "scripted"] and saved[0]["options"] == {
        "baseUrl": "http://x/v1"
    }
    wrong = cli(paths, "providers", "add", "x", "--type", "nonsense")
    assert wrong.returncode == 1 and "unknown provider type" in wrong.stderr


def test_keys_create_list_revoke(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    engine_process.start()
    created = cli(
        paths, "keys", "create", "--name", "ci", "--scope", "jobs:read", "--scope", "jobs:write"
    )
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert key.startswith("cb_") and "only this once" in created.stderr
    listed = json.loads(cli(paths, "keys", "list", "--json").stdout)["keys"]
    assert listed[0]["scopes"] == ["jobs:read", "jobs:write"] and key not in json.dumps(listed)
    revoked = cli(paths, "keys", "revoke", listed[0]["prefix"], "--yes")
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    assert json.loads(cli(paths, "keys", "list", "--json").stdout)["keys"][0]["revoked"] is True
    bad = cli(paths, "keys", "create", "--name", "x", "--scope", "root")
    assert bad.returncode == 1 and "unknown scope" in bad.stderr


def test_remote_is_reserved_and_no_engine_is_explained(paths: HomePaths) -> None:
    remote = cli(paths, "plugins", "load", "clock", "--remote", "https://example.invalid")
    assert remote.returncode == 1 and "reserved" in remote.stderr
    for args in (("chat",), ("agents", "list"), ("keys", "list")):
        result = cli(paths, *args, stdin="")
        assert result.returncode == 1 and "claybot start" in result.stderr, args
    help_text = cli(paths, "--help").stdout
    for command in (
        "start",
        "stop",
        "status",
        "chat",
        "agents",
        "events",
        "plugins",
        "auth",
        "providers",
        "keys",
    ):
        assert command in help_text


def test_chat_finishes_a_turn_that_ends_without_text(engine_process: EngineProcess) -> None:
    settings = {
        "providers": [
            {"id": "quiet", "type": "scripted", "model": "script", "options": {"responses": [""]}}
        ]
    }
    engine_process.paths.settings.write_text(json.dumps(settings))
    engine_process.start()
    result = cli(engine_process.paths, "chat", "--user", "eve", stdin="anything?\n", timeout_s=60)
    assert result.returncode == 0, result.stderr
    assert "agent>" not in result.stdout


class Lines:
    """A subprocess's stdout lines, read in a thread so a test can wait with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))

    def next(self, timeout_s: float = 30) -> str:
        return self._queue.get(timeout=timeout_s)


def poll(condition: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_chat_reply_pending_when_the_engine_crashes(engine_process: EngineProcess) -> None:
    """The engine dies mid-turn; the next one redoes the turn and chat prints it once."""
    paths = engine_process.paths
    slow = {"providers": [{"id": "scripted", "model": "echo", "options": {"delayS": 1.5}}]}
    paths.settings.write_text(json.dumps(slow))
    engine_process.start()
    env = {**os.environ, "CLAYBOT_HOME": str(paths.home)}
    chat = subprocess.Popen(
        [sys.executable, "-m", "claybot", "chat", "--user", "fay"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert chat.stdin is not None
    chat.stdin.write("slow\n")
    chat.stdin.flush()  # communicate() closes stdin later: chat then exits after the reply

    def recorded() -> bool:
        with engine_process.client() as client:
            agents = client.get("/v1/engine/agents").json()["agents"]
            if not agents:
                return False
            history = client.get(f"/v1/engine/agents/{agents[0]['agentId']}/history").json()
        return any(r["type"] == "user_message" for r in history["records"])

    poll(recorded)
    engine_process.kill()  # before the 1.5 s reply
    engine_process.start()
    out, err = chat.communicate(timeout=90)
    assert chat.returncode == 0, err
    assert out.strip().splitlines() == ["agent> echo: slow"]


def test_events_resume_after_an_engine_restart(engine_process: EngineProcess) -> None:
    engine_process.start()
    env = {**os.environ, "CLAYBOT_HOME": str(engine_process.paths.home)}
    follower = subprocess.Popen(
        [sys.executable, "-m", "claybot", "events"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        lines = Lines(follower.stdout)
        assert "init" in lines.next()
        engine_process.kill()
        engine_process.start()
        cli(engine_process.paths, "chat", "--user", "gus", stdin="again\n")
        while True:  # the reconnect's init, the new engine's start-up events, the chat
            line = lines.next()
            if "agent.outgoing" in line:
                break
        assert '"userId":"gus"' in line  # the payload is clipped to one line
    finally:
        follower.terminate()
        follower.wait(10)
    assert follower.stderr is not None and "reconnecting" in follower.stderr.read()


def test_plugins_offline_list_and_reenable_keep_settings(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    assert (
        cli(paths, "plugins", "load", "clock", "--setting", "timezone=Asia/Tokyo").returncode == 0
    )
    assert cli(paths, "plugins", "unload", "clock").returncode == 0
    listing = cli(paths, "plugins", "list")
    assert listing.returncode == 0, listing.stderr
    assert "clock" in listing.stdout and "engine not running" in listing.stdout
    assert cli(paths, "plugins", "load", "clock").returncode == 0  # no settings: keep them
    entries = json.loads(paths.settings.read_text())["plugins"]
    assert entries == [
        {
            "instanceId": "clock",
            "pluginId": "clock",
            "enabled": True,
            "settings": {"timezone": "Asia/Tokyo"},
        }
    ]
    bad = cli(paths, "plugins", "load", "clock", "--instance", "c3", "--setting", "timezone=Mars")
    assert bad.returncode == 1 and "timezone" in bad.stderr
    engine_process.start()  # what was saved offline loads at start
    loaded = json.loads(cli(paths, "plugins", "list", "--json").stdout)["loaded"]
    assert [entry["id"] for entry in loaded] == ["clock"]


def test_auth_value_from_stdin_is_never_echoed(paths: HomePaths) -> None:
    result = cli(paths, "auth", "set", "openai", "apiKey", stdin="sk-from-stdin\n")
    assert result.returncode == 0, result.stderr
    assert "sk-from-stdin" not in result.stdout + result.stderr
    assert json.loads(paths.auth.read_text())["openai"]["apiKey"] == "sk-from-stdin"
    empty = cli(paths, "auth", "set", "openai", "apiKey", stdin="")
    assert empty.returncode == 1 and "no value" in empty.stderr


MUTATIONS = [
    ("plugins", "load", "clock"),
    ("plugins", "unload", "clock"),
    ("auth", "set", "openai", "apiKey", "secret"),
    ("providers", "add", "openai"),
    ("providers", "remove", "openai"),
    ("providers", "default", "openai"),
    ("keys", "create", "--name", "x", "--scope", "admin"),
    ("keys", "revoke", "cb_x"),
    ("agents", "reset", "some-agent"),
]


@pytest.mark.parametrize("args", MUTATIONS, ids=lambda args: " ".join(args[:2]))
def test_every_mutation_rejects_remote(paths: HomePaths, args: tuple[str, ...]) -> None:
    result = cli(paths, *args, "--remote", "https://example.invalid")
    assert result.returncode == 1 and "reserved" in result.stderr
    assert not paths.settings.exists() and not paths.auth.exists()


def test_every_command_explains_itself(paths: HomePaths) -> None:
    commands = [
        ("chat",),
        ("events",),
        *[("agents", name) for name in ("list", "history", "reset")],
        *[("plugins", name) for name in ("list", "load", "unload")],
        ("auth", "set"),
        *[("providers", name) for name in ("list", "add", "remove", "default")],
        *[("keys", name) for name in ("create", "list", "revoke")],
    ]
    for command in commands:
        result = cli(paths, *command, "--help")
        assert result.returncode == 0 and "--home" in result.stdout, command
        assert len(result.stdout.splitlines()) > 5, command

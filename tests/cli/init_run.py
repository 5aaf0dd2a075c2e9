"""Running `claybot init` as a user does (a script, or a real terminal through pexpect),
the fake Telegram Bot API it checks tokens with, and what the home's files hold."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pexpect

from claybot.config.home import HomePaths
from tests.plugins.telegram.fake_bot_api import FakeBotApi

API_KEY = "sk-test-Zq8hidden"
BOT_TOKEN = "123456789:AAtestTOKENhidden_x"
START_TIMEOUT_S = 10.0
# Whatever the machine running the tests has set, init sees only what a test gives it.
VENDOR_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


def init_env(tmp_path: Path, paths: HomePaths) -> dict[str, str]:
    """The home to set up, and a user with no reachable systemd user manager (as in a
    container and in CI) whose config folder is temporary."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    inherited = {k: v for k, v in os.environ.items() if k not in VENDOR_VARIABLES}
    return {
        **inherited,
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


def file_bytes(paths: HomePaths) -> dict[str, bytes | None]:
    """settings.json and auth.json as they are on disk (None: absent)."""
    return {
        path.name: path.read_bytes() if path.exists() else None
        for path in (paths.settings, paths.auth)
    }


def settings(paths: HomePaths) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(paths.settings.read_text())
    return loaded


def auth(paths: HomePaths) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(paths.auth.read_text())
    return loaded


def default_interrupt() -> None:
    """In the child, before it runs: Ctrl-C interrupts it, as at a user's terminal.

    An ignored signal stays ignored across exec, and a suite started as a shell's
    background job (``make test &``) has SIGINT ignored: the command then never saw the
    Ctrl-C a test typed, and the test waited for its end in vain."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminal:
    """`claybot init` on a pseudo-terminal: what it shows, and what is typed."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "claybot", "init", *args],
            env={**env, "TERM": "dumb"},
            encoding="utf-8",
            timeout=60,
            preexec_fn=default_interrupt,
        )
        self.transcript = io.StringIO()  # everything the terminal showed
        self.child.logfile_read = self.transcript

    def expect(self, text: str) -> None:
        self.child.expect_exact(text)

    def answer(self, prompt: str, reply: str) -> None:
        self.child.expect_exact(prompt)
        self.child.sendline(reply)

    def finish(self) -> int:
        """Wait for the end; the exit status."""
        self.child.expect(pexpect.EOF)
        self.child.close()
        status = self.child.exitstatus
        assert status is not None, self.output
        return status

    @property
    def output(self) -> str:
        return self.transcript.getvalue()

    def close(self) -> None:
        if self.child.isalive():
            self.child.close(force=True)


@contextmanager
def terminal(env: dict[str, str], *args: str) -> Iterator[Terminal]:
    session = Terminal(env, *args)
    try:
        yield session
    finally:
        session.close()


class BotApiThread:
    """The fake Bot API served from a thread of its own, so a test can drive a terminal
    (which blocks) while it answers."""

    def __init__(self, token: str = BOT_TOKEN) -> None:
        self.api = FakeBotApi(token=token)
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, sock: socket.socket | None = None) -> FakeBotApi:
        async def serve() -> None:
            self._stop = asyncio.Event()
            async with self.api.running(sock):
                self._ready.set()
                await self._stop.wait()
            # Long polls a client gave up on still wait here: end them with the server.
            pending = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        self._thread = threading.Thread(
            target=self._loop.run_until_complete, args=(serve(),), daemon=True
        )
        self._thread.start()
        assert self._ready.wait(START_TIMEOUT_S), "the fake Bot API did not start"
        return self.api

    def stop(self) -> None:
        if self._thread is not None:
            stop = self._stop
            assert stop is not None
            self._loop.call_soon_threadsafe(stop.set)
            self._thread.join(START_TIMEOUT_S)
            self._thread = None
        self._loop.close()

    @property
    def base_url(self) -> str:
        return self.api.base_url


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def refusing_socket() -> socket.socket:
    """A loopback socket that is bound but does not listen: its port refuses connections
    until a server is started on it."""
    bound = socket.socket()
    bound.bind(("127.0.0.1", 0))
    return bound

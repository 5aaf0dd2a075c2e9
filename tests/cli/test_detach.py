"""`claybot start --detach`, and the readiness signal it (and systemd) wait for."""

from __future__ import annotations

import json
import signal
import time

import psutil
import pytest

from claybot.config.home import HomePaths
from claybot.engine.instance import InstanceLock
from claybot.kernel.service_notify import READY, STOPPING, NotifyListener
from tests.cli.test_cli import cli
from tests.conftest import ECHO_SETTINGS, EngineProcess, write_settings

pytestmark = pytest.mark.slow


def running(pid: int) -> bool:
    """Alive and not a zombie (a detached engine's parent may be slow to reap it)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_until_gone(pid: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while running(pid):
        assert time.monotonic() < deadline, f"process {pid} is still running"
        time.sleep(0.05)


def test_start_detach_returns_once_the_engine_answers(paths: HomePaths) -> None:
    write_settings(paths, ECHO_SETTINGS)
    started = cli(paths, "start", "--detach", "--port", "0")
    assert started.returncode == 0, started.stderr
    first_line = started.stdout.splitlines()[0]
    assert first_line.startswith("ClayBot engine ready (pid ")
    pid = int(first_line.removeprefix("ClayBot engine ready (pid ").rstrip(")"))
    assert "\nNext:\n" in started.stdout
    for command in ("claybot chat", "claybot doctor", "claybot stop"):
        assert f"  {command} " in started.stdout, started.stdout
    try:
        # Ready means it answers: no waiting after `start --detach` returned.
        status = json.loads(cli(paths, "status", "--json").stdout)
        assert status["ok"] is True and status["pid"] == pid
        chat = cli(paths, "chat", "--user", "ann", stdin="hello\n")
        assert "agent> echo: hello" in chat.stdout, chat.stderr
        output = (paths.logs / "engine.out").read_text()
        assert f"ClayBot engine ready (pid {pid})" in output

        again = cli(paths, "start", "--detach", "--port", "0")
        assert again.returncode == 0, again.stderr
        assert f"an engine is already running for {paths.home} (pid {pid})" in again.stdout
        assert json.loads(cli(paths, "status", "--json").stdout)["pid"] == pid

        stopped = cli(paths, "stop")
        assert stopped.returncode == 0 and "engine stopped" in stopped.stdout
    finally:
        if running(pid):
            psutil.Process(pid).kill()
    wait_until_gone(pid)
    assert not InstanceLock(paths).held_by_someone()
    stopped = json.loads(cli(paths, "status", "--json").stdout)
    assert stopped["ok"] is False and stopped["error"]["code"] == "engine_not_running"
    assert (paths.logs / "engine.out").read_text().endswith("stopping…\nstopped\n")


def test_start_detach_that_fails_says_why(paths: HomePaths) -> None:
    write_settings(paths, {"engine": {"port": "seventy"}})
    result = cli(paths, "start", "--detach")
    assert result.returncode == 1
    assert "the engine exited with code 1 before it was ready" in result.stderr
    assert "engine.port" in result.stderr  # the tail of what the engine printed
    assert "Traceback" not in result.stderr
    assert not InstanceLock(paths).held_by_someone()


def test_the_engine_says_ready_and_stopping_on_its_notify_socket(paths: HomePaths) -> None:
    write_settings(paths, ECHO_SETTINGS)
    with NotifyListener() as listener:
        engine = EngineProcess(paths, {"NOTIFY_SOCKET": listener.address})
        try:
            engine.start()
            deadline = time.monotonic() + 30
            states: list[str] = []
            while READY not in states:
                assert time.monotonic() < deadline, "no READY=1"
                states = listener.receive(0.5)
            assert f"STATUS=serving {paths.home}" in states
            # By READY=1 it answers on its socket (EngineProcess.start checked) and has
            # printed its banner; managed, it names `claybot stop` rather than Ctrl-C.
            assert "claybot stop" in engine.output() and "Ctrl-C" not in engine.output()
            assert engine.process is not None
            engine.process.send_signal(signal.SIGTERM)
            while STOPPING not in states:
                assert time.monotonic() < deadline + 30, "no STOPPING=1"
                states = listener.receive(0.5)
            assert engine.process.wait(30) == 0
        finally:
            if engine.process is not None and engine.process.poll() is None:
                engine.kill()


def test_the_foreground_banner_says_what_to_do_next(engine_process: EngineProcess) -> None:
    engine_process.start()  # it answers on its socket; the banner follows the sandbox probe
    deadline = time.monotonic() + 30
    while "  Ctrl-C " not in (output := engine_process.output()):
        assert time.monotonic() < deadline, output
        time.sleep(0.05)
    assert "\nNext:\n" in output
    assert "  claybot chat " in output and "  claybot doctor " in output
    assert "  Ctrl-C " in output

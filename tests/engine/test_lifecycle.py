"""`claybot start | stop | status` on a real engine process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from claybot.config.home import HomePaths
from tests.conftest import EngineProcess

pytestmark = pytest.mark.slow


def cli(paths: HomePaths, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAYBOT_HOME": str(paths.home)}
    return subprocess.run(
        [sys.executable, "-m", "claybot", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_status_when_nothing_runs(paths: HomePaths) -> None:
    result = cli(paths, "status", "--json")
    assert result.returncode == 1
    answer = json.loads(result.stdout)
    assert answer["ok"] is False and answer["error"]["code"] == "engine_not_running"
    assert str(paths.socket) in answer["error"]["message"]
    assert "not running" in cli(paths, "status").stdout


def test_one_engine_per_home_and_force_replaces_it(engine_process: EngineProcess) -> None:
    engine_process.start()
    first_pid = int(engine_process.paths.pid.read_text())
    second = cli(engine_process.paths, "start", "--port", "0", timeout_s=30)
    assert second.returncode != 0
    assert "already running" in second.stderr and str(first_pid) in second.stderr

    status = json.loads(cli(engine_process.paths, "status", "--json").stdout)
    assert status["ok"] is True and status["pid"] == first_pid

    env = {**os.environ, "CLAYBOT_HOME": str(engine_process.paths.home)}
    replacement = subprocess.Popen(
        [sys.executable, "-m", "claybot", "start", "--port", "0", "--force"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert replacement.stdout is not None
        lines = []
        for line in replacement.stdout:
            lines.append(line)
            if "engine ready" in line:
                break
        assert any("engine ready" in line for line in lines), lines
        assert engine_process.process is not None
        assert engine_process.process.wait(30) == 0  # the first one stopped cleanly
        assert int(engine_process.paths.pid.read_text()) == replacement.pid
    finally:
        replacement.send_signal(signal.SIGTERM)
        assert replacement.wait(30) == 0


def test_sigterm_cleans_up_and_stop_reports(engine_process: EngineProcess) -> None:
    engine_process.start()
    assert engine_process.terminate() == 0
    assert not engine_process.paths.socket.exists()
    assert not engine_process.paths.pid.exists()
    engine_process.start()
    result = cli(engine_process.paths, "stop")
    assert result.returncode == 0 and "stopping…\nengine stopped" in result.stdout
    assert engine_process.process is not None and engine_process.process.wait(30) == 0
    assert engine_process.output().endswith("stopping…\nstopped\n"), engine_process.output()
    assert "no engine is running" in cli(engine_process.paths, "stop").stdout


def test_a_kill_9_leaves_nothing_that_blocks_a_restart(engine_process: EngineProcess) -> None:
    engine_process.start()
    engine_process.kill()
    assert engine_process.paths.pid.exists()  # stale, as after any crash
    engine_process.start()
    assert json.loads(cli(engine_process.paths, "status", "--json").stdout)["ok"] is True


def test_an_invalid_settings_file_stops_the_start_with_the_field(paths: HomePaths) -> None:
    paths.home.mkdir(parents=True, exist_ok=True)
    paths.settings.write_text(json.dumps({"engine": {"port": "seventy"}}))
    result = cli(paths, "start", timeout_s=30)
    assert result.returncode != 0
    assert "settings.json" in result.stderr and "engine.port" in result.stderr
    assert json.loads(paths.settings.read_text()) == {"engine": {"port": "seventy"}}

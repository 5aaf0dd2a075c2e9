"""`claybot service install | uninstall | status`: the unit and plist files, and a real
systemd user manager running the engine from them."""

from __future__ import annotations

import json
import os
import plistlib
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from claybot import __version__
from claybot.cli.service_unit import (
    STOP_TIMEOUT_S,
    UNIT_NAME,
    ServiceSpec,
    systemd_environment,
    systemd_escape,
    systemd_unit,
)

SYSTEMD = Path("/lib/systemd/systemd")


def run_cli(
    env: dict[str, str], *args: str, timeout_s: float = 200
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claybot", *args],
        env={**env, "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


@pytest.fixture
def user_env(tmp_path: Path) -> dict[str, str]:
    """A user whose config, home and runtime folders are temporary, with no session bus:
    no systemd user manager can be reached from it (as in a container)."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {
        **os.environ,
        "HOME": str(tmp_path / "user"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_RUNTIME_DIR": str(runtime),
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={runtime}/no-bus",
    }
    env.pop("CLAYBOT_HOME", None)
    return env


@pytest.fixture
def claybot_home() -> Iterator[Path]:
    # Short: the engine's socket path must fit in 107 bytes.
    home = Path(f"/tmp/cb-svc-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    yield home
    shutil.rmtree(home, ignore_errors=True)


def unit_path(env: dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "systemd" / "user" / "claybot.service"


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """A unit file's sections and keys (a key may repeat), as systemd's parser reads them."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"a line outside any section: {raw!r}"
        key, separator, value = line.partition("=")
        assert separator, f"not a key=value line: {raw!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def systemd_verify(unit: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`systemd-analyze --user verify`: parse warnings go to stderr with exit code 0,
    so a clean unit is one with a 0 exit *and* nothing on stderr."""
    # A short runtime folder of its own: the user units systemd reads name sockets in it
    # (gpg-agent's), and under pytest-xdist's deeper tmp_path their paths passed the
    # 108 bytes a socket's path may have, which systemd-analyze warns about.
    with tempfile.TemporaryDirectory(prefix="cb-rt-") as runtime:
        return subprocess.run(
            ["systemd-analyze", "--user", "verify", str(unit)],
            env={**os.environ, "XDG_RUNTIME_DIR": runtime},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )


def assert_runs_claybot(argv: list[str], environment: dict[str, str]) -> None:
    """The service's command is a ClayBot that exists and answers --version."""
    executable = Path(argv[0])
    assert executable.is_absolute() and os.access(executable, os.X_OK), argv
    version = subprocess.run(
        [*argv[:3], "--version"],
        env={"PATH": "/usr/bin:/bin", **environment},  # the service's, not the test's
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"claybot {__version__}"


def test_install_writes_a_user_unit_that_systemd_accepts(
    user_env: dict[str, str], claybot_home: Path, tmp_path: Path
) -> None:
    result = run_cli(user_env, "service", "install", "--home", str(claybot_home), "--no-start")
    assert result.returncode == 0, result.stderr
    unit = unit_path(user_env)
    assert f"wrote {unit}" in result.stdout
    assert "not started (--no-start)" in result.stderr
    assert "systemctl --user enable --now claybot.service" in result.stderr

    sections = parse_unit(unit.read_text())
    service = sections["Service"]
    assert service["Type"] == ["notify"]  # the engine sends READY=1 (tested below)
    assert service["Restart"] == ["on-failure"]
    assert service["RestartSec"] == ["5"]
    assert service["KillSignal"] == ["SIGTERM"] and service["KillMode"] == ["mixed"]
    assert service["TimeoutStopSec"] == [str(STOP_TIMEOUT_S)]
    assert sections["Install"]["WantedBy"] == ["default.target"]
    argv = shlex.split(service["ExecStart"][0])
    assert argv[1:] == ["-m", "claybot", "start", "--home", str(claybot_home)]
    environment = dict(
        shlex.split(line)[0].split("=", 1) for line in service.get("Environment", [])
    )
    if os.environ.get("PYTHONPATH"):  # the service imports the ClayBot that installed it
        assert environment == {"PYTHONPATH": os.path.abspath(os.environ["PYTHONPATH"])}
    assert_runs_claybot(argv, environment)

    if shutil.which("systemd-analyze") is not None:
        verified = systemd_verify(unit, tmp_path)
        assert (verified.returncode, verified.stderr) == (0, ""), verified.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_reports_a_unit_it_cannot_read(tmp_path: Path) -> None:
    """The check above would catch a broken unit: systemd-analyze says so on stderr."""
    spec = ServiceSpec((sys.executable, "-m", "claybot", "start"), tmp_path)
    unit = tmp_path / "claybot.service"
    unit.write_text(systemd_unit(spec).replace("Restart=on-failure", "Restart=sometimes"))
    verified = systemd_verify(unit, tmp_path)
    assert "Restart" in verified.stderr or "restart" in verified.stderr, verified


def test_systemd_words_are_escaped_for_its_parser() -> None:
    assert systemd_escape("/usr/bin/python3") == "/usr/bin/python3"
    assert systemd_escape("/srv/my bots") == '"/srv/my bots"'
    assert systemd_escape("/srv/100%") == "/srv/100%%"
    assert systemd_escape("/srv/$HOME") == "/srv/$$HOME"
    assert systemd_escape('a"b\\c') == '"a\\"b\\\\c"'
    assert systemd_environment("PYTHONPATH", "/a b/%n/$x") == 'Environment="PYTHONPATH=/a b/%%n/$x"'
    with pytest.raises(ValueError, match="absolute"):
        ServiceSpec(("python3", "-m", "claybot"), Path("/x"))
    with pytest.raises(ValueError, match="control character"):
        ServiceSpec(("/usr/bin/python3",), Path("/x\ny"))


def test_status_and_uninstall(user_env: dict[str, str], claybot_home: Path) -> None:
    unit = unit_path(user_env)
    before = run_cli(user_env, "service", "status", "--home", str(claybot_home))
    assert before.returncode == 0, before.stderr
    assert "service:  not installed" in before.stdout
    assert "engine:   not running" in before.stdout

    run_cli(user_env, "service", "install", "--home", str(claybot_home), "--no-start")
    status = run_cli(user_env, "service", "status")  # finds the home in the unit
    assert status.returncode == 0, status.stderr
    assert f"service:  installed (systemd user unit {unit})" in status.stdout
    assert f"home:    {claybot_home}" in status.stdout
    assert "enabled: disabled" in status.stdout
    assert "active:  unknown" in status.stdout
    assert "user manager is not reachable" in status.stdout
    assert f"engine:   not running (no answer on {claybot_home}/claybot.sock)" in status.stdout
    report = json.loads(run_cli(user_env, "service", "status", "--json").stdout)
    assert report["installed"] is True and report["home"] == str(claybot_home)
    assert report["engine"] == {"home": str(claybot_home), "running": False, "pid": None}

    refused = run_cli(user_env, "service", "uninstall")  # no terminal: --yes is needed
    assert refused.returncode == 1 and "pass --yes" in refused.stderr
    assert unit.exists()
    removed = run_cli(user_env, "service", "uninstall", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert f"removed {unit}" in removed.stdout
    assert not unit.exists()
    after = run_cli(user_env, "service", "status", "--json")
    assert json.loads(after.stdout)["installed"] is False
    again = run_cli(user_env, "service", "uninstall", "--yes")
    assert again.returncode == 0 and "no claybot service is installed" in again.stdout


def test_install_without_a_user_manager_says_what_to_run(
    user_env: dict[str, str], claybot_home: Path
) -> None:
    result = run_cli(user_env, "service", "install", "--home", str(claybot_home))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "not started: systemd's user manager is not reachable" in result.stderr
    assert "systemctl --user daemon-reload\n  systemctl --user enable --now claybot.service" in (
        result.stderr
    )
    assert "claybot start --detach" in result.stderr
    assert unit_path(user_env).exists()


def test_a_unit_for_another_home_is_replaced_only_with_force(
    user_env: dict[str, str], claybot_home: Path, tmp_path: Path
) -> None:
    run_cli(user_env, "service", "install", "--home", str(claybot_home), "--no-start")
    other = tmp_path / "other-home"
    refused = run_cli(user_env, "service", "install", "--home", str(other), "--no-start")
    assert refused.returncode == 1
    assert f"the service already runs the home {claybot_home}" in refused.stderr
    assert f"--home {claybot_home}" in unit_path(user_env).read_text()
    forced = run_cli(user_env, "service", "install", "--home", str(other), "--no-start", "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"--home {other}" in unit_path(user_env).read_text()

    unit_path(user_env).write_text("[Service]\nExecStart=/bin/true\n")  # someone else's
    foreign = run_cli(user_env, "service", "install", "--home", str(other), "--no-start")
    assert foreign.returncode == 1 and "was not written by claybot" in foreign.stderr


def test_launchd_plist(user_env: dict[str, str], claybot_home: Path) -> None:
    launchd = ("--manager", "launchd")
    result = run_cli(user_env, "service", "install", "--home", str(claybot_home), *launchd)
    assert result.returncode == 0, result.stderr
    assert "not started: launchd runs only on macOS" in result.stderr
    plist_path = Path(user_env["HOME"]) / "Library/LaunchAgents/dev.claybot.engine.plist"
    with plist_path.open("rb") as file:
        plist = plistlib.load(file)
    assert plist["Label"] == "dev.claybot.engine"
    argv = plist["ProgramArguments"]
    assert argv[1:] == ["-m", "claybot", "start", "--home", str(claybot_home)]
    assert_runs_claybot(argv, plist["EnvironmentVariables"])
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}  # restarted after a failure only
    assert plist["ExitTimeOut"] == STOP_TIMEOUT_S
    assert plist["StandardOutPath"] == str(claybot_home / "logs" / "service.out")

    status = run_cli(user_env, "service", "status", *launchd)
    assert f"service:  installed (launchd agent {plist_path})" in status.stdout
    assert f"home:    {claybot_home}" in status.stdout
    removed = run_cli(user_env, "service", "uninstall", "--yes", *launchd)
    assert removed.returncode == 0, removed.stderr
    assert not plist_path.exists()
    assert "not installed" in run_cli(user_env, "service", "status", *launchd).stdout


@dataclass
class UserManager:
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log: Path  # the output of the manager and of the units it runs (there is no journal)

    def systemctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["systemctl", "--user", *args], env=self.env, capture_output=True, text=True, timeout=60
        )

    def explain(self, home: Path) -> str:
        """What a failed assertion needs to show: the unit's state, the manager's log
        and the engine's own log (both gone with their folders once the test ends)."""
        status = self.systemctl("status", "--no-pager", "--full", UNIT_NAME)
        parts = [f"systemctl status:\n{status.stdout}{status.stderr}"]
        for path in (self.log, home / "logs" / "engine.log"):
            try:
                tail = path.read_text(errors="replace").splitlines()[-40:]
            except OSError as exc:
                tail = [f"(unreadable: {exc})"]
            parts.append(f"{path}:\n" + "\n".join(tail))
        return "\n\n".join(parts)


@pytest.fixture
def user_manager(user_env: dict[str, str], tmp_path: Path) -> Iterator[UserManager]:
    """A real systemd user manager on the temporary user's folders.

    systemd refuses to run a user manager on a machine not booted with it; bubblewrap
    shows it an empty /run/systemd/system (the sign of a systemd boot) and leaves the
    rest of the machine as it is.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None or not SYSTEMD.exists() or shutil.which("systemctl") is None:
        pytest.skip("needs bubblewrap and systemd (apt-get install bubblewrap systemd)")
    env = {k: v for k, v in user_env.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    Path(env["HOME"]).mkdir(exist_ok=True)
    # There is no journal here: the manager logs to its stderr and the units it starts
    # inherit its output, so a failed start can be read in systemd.log.
    manager_conf = Path(env["XDG_CONFIG_HOME"]) / "systemd" / "user.conf"
    manager_conf.parent.mkdir(parents=True, exist_ok=True)
    manager_conf.write_text("[Manager]\nDefaultStandardOutput=inherit\n")
    log = (tmp_path / "systemd.log").open("wb")
    process = subprocess.Popen(
        [
            bwrap,
            "--dev-bind",
            "/",
            "/",
            "--tmpfs",
            "/run/systemd",
            "--dir",
            "/run/systemd/system",
            "--die-with-parent",
            "--",
            str(SYSTEMD),
            "--user",
        ],
        env={**env, "SYSTEMD_LOG_TARGET": "console"},
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    manager = UserManager(env, process, tmp_path / "systemd.log")
    deadline = time.monotonic() + 30
    while manager.systemctl("show", "--property=Version").returncode != 0:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.skip(
                f"no systemd user manager can run here: {(tmp_path / 'systemd.log').read_text()}"
            )
        time.sleep(0.1)
    yield manager
    manager.systemctl("exit")
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    log.close()


def engine_status(env: dict[str, str], home: Path) -> dict[str, object]:
    """The engine's status, with ``running`` (`status --json` is the API's answer, or
    the engine_not_running error)."""
    result = run_cli(env, "status", "--home", str(home), "--json")
    answer: dict[str, object] = json.loads(result.stdout)
    if answer["ok"] is False:
        return {"running": False, "home": str(home)}
    return {"running": True, **answer}


def wait_for(condition, what: str, timeout_s: float = 60):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_systemd_runs_restarts_and_stops_the_engine(
    user_manager: UserManager, tmp_path: Path
) -> None:
    # A home whose name systemd would expand if the unit did not escape it.
    home = Path(f"/tmp/cb {os.getpid()}%n$HOME")
    home.mkdir()
    try:
        (home / "settings.json").write_text(
            json.dumps({"providers": [{"id": "scripted", "model": "echo"}]})
        )
        env = user_manager.env
        # An engine started by hand has the home: the service is not started beside it.
        assert run_cli(env, "start", "--detach", "--home", str(home), "--port", "0").returncode == 0
        beside = run_cli(env, "service", "install", "--home", str(home))
        assert beside.returncode == 0, beside.stderr
        assert "an engine already runs for" in beside.stderr and "outside the service" in (
            beside.stderr
        )
        assert "once `claybot stop` has stopped it:" in beside.stderr
        assert run_cli(env, "stop", "--home", str(home)).returncode == 0

        installed = run_cli(env, "service", "install", "--home", str(home))
        assert installed.returncode == 0, f"{installed.stderr}\n{user_manager.explain(home)}"
        # Type=notify: `enable --now` returned once the engine had said READY=1.
        assert "started: the systemd user unit is enabled and running" in installed.stdout
        status = engine_status(env, home)
        assert status["running"] is True and status["home"] == str(home)
        first_pid = status["pid"]
        assert isinstance(first_pid, int)

        report = json.loads(run_cli(env, "service", "status", "--json").stdout)
        assert (report["enabled"], report["active"]) == ("enabled", "active")
        assert report["engine"] == {"home": str(home), "running": True, "pid": first_pid}
        assert user_manager.systemctl(
            "show", "--property=StatusText", "claybot.service"
        ).stdout == (f"StatusText=serving {home}\n")

        os.kill(first_pid, signal.SIGKILL)  # a crash: Restart=on-failure brings it back
        restarted = wait_for(
            lambda: (s := engine_status(env, home)).get("running") and s["pid"] != first_pid and s,
            "systemd to restart the engine",
        )
        second_pid = restarted["pid"]

        removed = run_cli(env, "service", "uninstall", "--yes")
        assert removed.returncode == 0, removed.stderr
        assert engine_status(env, home) == {"running": False, "home": str(home)}
        assert not Path(f"/proc/{second_pid}").exists() or _is_zombie(second_pid)
        assert user_manager.systemctl("is-active", "claybot.service").stdout.strip() in (
            "inactive",
            "unknown",
        )
        assert not unit_path(env).exists()
        # Stopped with SIGTERM, the engine shut down cleanly: its socket and pid file are gone.
        assert not (home / "claybot.sock").exists() and not (home / "claybot.pid").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (FileNotFoundError, ProcessLookupError, IndexError):  # reaped meanwhile
        return True

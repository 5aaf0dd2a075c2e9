"""The shell plugin's ``exec``: a scripted model runs commands through a real agent turn.

Every behaviour is shown for both backends, forced with the plugin's ``sandbox``
setting. File system confinement (a read-only root, only ``writeDirs`` writable,
secrets hidden) is bubblewrap's alone: the unconfined backend, which runs only when
the settings name it, limits resources and takes the network away, and the file
checks below run under bwrap only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from claybot.net.egress import EgressProxy
from claybot.permissions.model import Permissions
from claybot.sandbox import (
    MIB,
    EgressRoute,
    ResourceLimits,
    Sandbox,
    SandboxConfig,
    SandboxMode,
    SandboxPolicy,
    SandboxRunner,
    SandboxUnavailable,
    bwrap_argv,
    sandbox_environment,
    secret_paths,
    unconfined_argv,
)
from claybot.sandbox.cgroup import PidsCgroups, discover_pids_cgroups
from tests.agents.test_agents import next_event
from tests.conftest import write_settings

OUTPUT_CAP = 4096


@cache
def bwrap_works() -> bool:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    probe = [bwrap, "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--", "/bin/true"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


BWRAP = pytest.param(
    "bwrap",
    marks=pytest.mark.skipif(not bwrap_works(), reason="bubblewrap missing or unusable here"),
)
BACKENDS = [BWRAP, "unconfined"]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"text": "", "toolCalls": [{"name": name, "arguments": arguments}]}


def exec_call(command: str, **arguments: Any) -> dict[str, Any]:
    return call("exec", command=command, **arguments)


async def run_turn(
    paths: HomePaths,
    backend: str,
    script: list[Any],
    *,
    grant_network_after: int | None = None,
    before_start: Any = None,
) -> list[dict[str, Any]]:
    """One user message; the tool results of the scripted turn(s), in order.

    With ``grant_network_after``, the script asks for @network and the user approves;
    the model's script continues in the turn that follows the grant.
    """
    settings = {"sandbox": backend, "maxOutputBytes": OUTPUT_CAP}
    write_settings(
        paths,
        {
            "providers": [
                {"id": "s", "type": "scripted", "model": "script", "options": {"responses": script}}
            ],
            "plugins": [{"instanceId": "shell", "pluginId": "shell", "settings": settings}],
        },
    )
    engine = Engine(paths, EngineOptions(port=0))
    events: list[Event] = []
    engine.events.add_listener(events.append)
    await engine.start()
    try:
        posted = await engine.post_inbound(InboundMessage("local", "u", "c", "go"))
        await next_event(events, "agent.outgoing", timeout_s=60)
        if grant_network_after is not None:
            [request] = engine.permissions.list("pending")
            await engine.permissions.decide(request.id, True, "test")
            await next_event(events, "agent.outgoing", count=2, timeout_s=60)
        page = await engine.agents.histories.page(
            posted.agent_id, after=None, before=None, limit=200
        )
        return [r["output"] for r in page.records if r["type"] == "tool_result"]
    finally:
        await engine.stop()


@pytest.fixture
def outside(paths: HomePaths) -> Path:
    """A folder the agent holds no grant for, inside the ClayBot home."""
    folder = paths.home / "outside"
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def on_root() -> Iterator[Path]:
    """A folder outside /tmp and the ClayBot home: under bwrap it sits on the read-only root."""
    folder = Path(f"/var/tmp/claybot-exec-{uuid.uuid4().hex[:12]}")
    folder.mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_exec_runs_in_the_workspace_and_refuses_cwds_outside_the_grants(
    paths: HomePaths, outside: Path, backend: str
) -> None:
    workspace = paths.workspace.resolve()
    marker = outside / "ran"
    sneaky = f"touch {marker}"
    script = [
        exec_call("echo hello; echo oops >&2; exit 3"),
        exec_call("pwd; echo made > made.txt; echo HOME=$HOME"),
        exec_call("pwd", cwd=f"{workspace}/sub"),
        exec_call(sneaky, cwd=str(outside)),
        exec_call(sneaky, cwd=f"{workspace}/link"),
        exec_call(sneaky, cwd=f"{workspace}/../outside"),
        exec_call(sneaky, cwd="relative/path"),
        exec_call("head -c 3000000 /dev/zero | tr '\\0' a; echo flooded >&2"),
        "done",
    ]
    paths.home.mkdir(parents=True, exist_ok=True)
    (paths.workspace / "sub").mkdir(parents=True)
    os.symlink(outside, paths.workspace / "link")
    results = await run_turn(paths, backend, script)

    assert [r["isError"] for r in results] == [True, False, False, True, True, True, True, False]
    failed, default_cwd, sub, *refused, flood = results
    label = "UNCONFINED: not sandboxed" if backend == "unconfined" else "bwrap sandbox"
    assert failed["text"].startswith(f"exit code: 3 ({label}")
    assert "stdout:\nhello\n" in failed["text"] and "stderr:\noops\n" in failed["text"]
    assert f"stdout:\n{workspace}\nHOME={workspace}\n" in default_cwd["text"]
    assert (paths.workspace / "made.txt").read_text() == "made\n"
    assert f"stdout:\n{workspace}/sub\n" in sub["text"]
    for refusal in refused[:3]:
        assert refusal["text"].startswith("exec refused: cwd ")
        assert f"read access to {outside} is not granted" in refusal["text"]
    assert "must be absolute" in refused[3]["text"]
    assert not marker.exists()
    # The cap keeps the head of the flood, says so up front and at the cut, and the
    # command still ran to its end.
    assert flood["text"].startswith("exit code: 0") and "[output cut]" in flood["text"]
    assert "a" * OUTPUT_CAP in flood["text"] and "a" * (OUTPUT_CAP + 1) not in flood["text"]
    assert (
        f"[stdout cut at {OUTPUT_CAP} bytes; {3_000_000 - OUTPUT_CAP} more bytes" in flood["text"]
    )
    assert "stderr:\nflooded\n" in flood["text"]


async def test_under_bwrap_only_write_dirs_are_writable_and_secrets_are_hidden(
    paths: HomePaths, outside: Path, on_root: Path
) -> None:
    if not bwrap_works():
        pytest.skip("bubblewrap missing or unusable here")
    workspace = paths.workspace.resolve()
    paths.home.mkdir(parents=True, exist_ok=True)
    paths.auth.write_text('{"canary": {"type": "apiKey", "apiKey": "cb_secret_canary"}}')
    script = [
        exec_call(f"echo x > {on_root}/new.txt"),
        exec_call(f"echo x > {outside}/new.txt"),
        exec_call(f"echo x > {paths.settings}"),
        exec_call(f"cat {paths.auth}; cat {paths.settings} | head -c 100; ls {paths.home}"),
        exec_call("echo x > /usr/new.txt"),
        exec_call(f"echo kept > {workspace}/kept.txt && cat {workspace}/kept.txt"),
        "done",
    ]
    results = await run_turn(paths, "bwrap", script)
    texts = [r["text"] for r in results]

    assert [r["isError"] for r in results] == [True, True, True, False, True, False]
    assert "Read-only file system" in texts[0]
    assert not (on_root / "new.txt").exists()
    assert "Directory nonexistent" in texts[1]  # the home is blanked but for the grants
    assert not (outside / "new.txt").exists()
    # Secrets are covered by an unusable /dev/null: no reading, no writing.
    assert f"cannot create {paths.settings}: Permission denied" in texts[2]
    assert '"sandbox": "bwrap"' in paths.settings.read_text()
    assert "cb_secret_canary" not in texts[3] and "scripted" not in texts[3]
    assert f"cat: {paths.auth}: Permission denied" in texts[3]
    listed = texts[3].split("stdout:\n")[1].split("\n\nstderr:")[0].splitlines()
    assert "workspace" in listed and "outside" not in listed  # only grants show in the home
    assert "Read-only file system" in texts[4]
    assert not await asyncio.to_thread(os.path.exists, "/usr/new.txt")
    assert "stdout:\nkept\n" in texts[5]
    assert (paths.workspace / "kept.txt").read_text() == "kept\n"


# The sandbox gives commands a fresh /tmp, so a virtualenv under /tmp (a CI clone) is not
# there inside it: the connecting script runs on the system's interpreter when it has one.
SYSTEM_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


@pytest.fixture
async def listener() -> AsyncIterator[tuple[int, list[str]]]:
    """A TCP server on loopback; the list records each connection it accepts."""
    accepted: list[str] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append("connection")
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield port, accepted


@pytest.mark.parametrize("backend", BACKENDS)
async def test_without_network_no_socket_opens_and_with_it_one_does(
    paths: HomePaths, backend: str, listener: tuple[int, list[str]]
) -> None:
    port, accepted = listener
    connect = (
        f'{shlex.quote(SYSTEM_PYTHON)} -c "import socket; '
        f"socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')\""
    )
    script = [
        exec_call(connect),
        call("request_permission", permission="@network", reason="to reach a server"),
        "Waiting for the network.",
        exec_call(connect),
        "done",
    ]
    results = await run_turn(paths, backend, script, grant_network_after=1)

    assert [r["isError"] for r in results] == [True, False, False]
    assert "connected" not in results[0]["text"]
    assert "Error" in results[0]["text"]  # ConnectionRefusedError / OSError: unreachable
    assert "stdout:\nconnected\n" in results[2]["text"]
    assert accepted == ["connection"]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_command_past_its_timeout_is_killed_with_its_children(
    paths: HomePaths, backend: str
) -> None:
    late = paths.workspace.resolve() / "late"
    # Ignores SIGTERM (so SIGKILL has to follow) and leaves a child that would
    # write a file 4 s later if anything of the group survived.
    command = f"trap '' TERM; echo started; (sleep 4; touch {late}) & sleep 60"
    script = [exec_call(command, timeoutMs=500), "done"]
    started = time.monotonic()
    [result] = await run_turn(paths, backend, script)
    took = time.monotonic() - started

    assert result["isError"]
    assert result["text"].startswith("timed out after 0.5 s; the command and its children")
    assert "stdout:\nstarted\n" in result["text"]
    assert took < 4  # 0.5 s, plus a 2 s grace for SIGTERM before SIGKILL
    await asyncio.sleep(4.5 - took)
    assert not late.exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_command_stopped_as_it_starts_ends_at_once_with_all_of_it(
    tmp_path: Path, backend: SandboxMode
) -> None:
    # A turn stopped (a job cancelled) in the first milliseconds of its command: asyncio
    # alone killed only the first process and then waited for the pipes, which the
    # command's own child holds, so the stop waited out the whole command. The stops
    # below sweep the start, some of them landing inside it.
    sandbox = runner(backend)
    folder = str(tmp_path)
    granted = Permissions(workingDir=folder, writeDirs=[folder], network=True)
    markers = []
    for delay_ms in range(0, 40, 2):
        marker = tmp_path / f"survived-{delay_ms}"
        markers.append(marker)
        command = sandbox.run(
            f"sleep 3 && touch {marker}", cwd=folder, home=folder, permissions=granted,
            timeout_s=30,
        )  # fmt: skip
        running = asyncio.ensure_future(command)
        await asyncio.sleep(delay_ms / 1000)
        stopped_at = time.monotonic()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        took = time.monotonic() - stopped_at
        assert took < 2.5, f"stopped {delay_ms} ms in, it took {took:.1f} s to end"
    await asyncio.sleep(3.5)  # past the moment a survivor would have written its marker
    assert [marker.name for marker in markers if marker.exists()] == []


async def test_callers_stopped_while_the_sandbox_probes_leave_the_probe_to_the_next(
    tmp_path: Path,
) -> None:
    # Each caller stopped in the probe used to stop the probe too, and the next caller
    # started another; one stopped inside the probe's process start waited forever.
    probes: list[float] = []

    def discover() -> tuple[PidsCgroups | None, str]:
        probes.append(time.monotonic())
        return discover_pids_cgroups()

    sandbox = Sandbox(tmp_path / "claybot", discover_cgroups=discover)
    for delay_ms in range(0, 20, 2):
        caller = asyncio.ensure_future(sandbox.support())
        await asyncio.sleep(delay_ms / 1000)
        caller.cancel()
        stopped_at = time.monotonic()
        with contextlib.suppress(asyncio.CancelledError):
            await caller
        assert time.monotonic() - stopped_at < 2.5  # at once; the bound is for a busy machine
    support = await sandbox.support()
    assert await sandbox.support() is support
    assert len(probes) == 1
    await sandbox.close()


# -- the pure parts and the runner on a poorer machine ----------------------------------


POLICY = SandboxPolicy(
    cwd="/home/u/.claybot/workspace",
    network="none",
    read_dirs=("/data", "/home/u/.claybot/workspace/docs"),
    write_dirs=("/home/u/.claybot/workspace", "/data/out"),
    blanked_dirs=("/home/u/.claybot",),
    hidden_dirs=("/home/u/.ssh",),
    hidden_files=("/home/u/.claybot/auth.json",),
)


def test_bwrap_argv_orders_mounts_so_grants_never_reveal_secrets() -> None:
    command = "echo hi; rm -rf / # $(whoami)"
    argv = bwrap_argv("/usr/bin/bwrap", command, POLICY)
    assert argv[:2] == ["/usr/bin/bwrap", "--unshare-all"]
    assert "--share-net" not in argv
    assert {"--die-with-parent", "--new-session"} <= set(argv)
    # Root keeps its capabilities in bwrap unless they are dropped, and a capable
    # command could unmount what covers the secrets.
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    # The command is one argument of /bin/sh -c inside the sandbox, never split.
    assert argv[-4:] == ["--", "/bin/sh", "-c", command]

    def at(*mount: str) -> int:
        for index in range(len(argv)):
            if tuple(argv[index : index + len(mount)]) == mount:
                return index
        raise AssertionError(f"{mount} not in {argv}")

    assert at("--ro-bind", "/", "/") < at("--tmpfs", "/tmp") < at("--tmpfs", "/home/u/.claybot")
    assert at("--tmpfs", "/home/u/.claybot") < at("--ro-bind-try", "/data", "/data")
    assert at("--ro-bind-try", "/data", "/data") < at("--bind-try", "/data/out", "/data/out")
    workspace = "/home/u/.claybot/workspace"
    assert at("--bind-try", workspace, workspace) < at("--tmpfs", "/home/u/.ssh")
    assert at("--tmpfs", "/home/u/.ssh") < at(
        "--ro-bind", "/dev/null", "/home/u/.claybot/auth.json"
    )
    # A read grant inside a write grant would turn it read-only: it is left to the write.
    assert "/home/u/.claybot/workspace/docs" not in argv
    assert at("--ro-bind", "/dev/null", "/home/u/.claybot/auth.json") < at("--proc", "/proc")
    assert at("--dev", "/dev") < at("--chdir", workspace)

    # /run holds the host's service sockets (PostgreSQL's): without the host's network,
    # it is the sandbox's own.
    assert at("--tmpfs", "/tmp") < at("--tmpfs", "/run") < at("--tmpfs", "/home/u/.claybot")

    with_network = bwrap_argv("/usr/bin/bwrap", "true", SandboxPolicy("/w", network="host"))
    assert with_network[1:3] == ["--unshare-all", "--share-net"]
    assert "/run" not in with_network


RELAY = ("/usr/bin/python3", "-I", "-S", "-c", "relay code")


def test_bwrap_argv_gives_an_egress_command_only_the_proxys_socket() -> None:
    egress = EgressRoute("/tmp/claybot-egress-x/1.sock", RELAY)
    argv = bwrap_argv("/usr/bin/bwrap", "python3 s.py", SandboxPolicy("/w", "egress", egress))
    assert "--share-net" not in argv  # a network namespace of its own
    run, bound = argv.index("/run"), argv.index("/tmp/claybot-egress-x/1.sock")
    assert argv[run - 1 : run + 1] == ["--tmpfs", "/run"]
    assert argv[bound - 1 : bound + 2] == ["--ro-bind", egress.socket, "/run/claybot-egress.sock"]
    assert run < bound < argv.index("--proc")
    # The relay runs first, with the socket's path inside, then becomes the command.
    tail = [*RELAY, "/run/claybot-egress.sock", "/bin/sh", "-c", "python3 s.py"]
    assert argv[-len(tail) - 1 :] == ["--", *tail]
    with pytest.raises(ValueError, match="route"):
        bwrap_argv("/usr/bin/bwrap", "true", SandboxPolicy("/w", "egress"))


def test_unconfined_argv_isolates_the_network_or_refuses() -> None:
    assert unconfined_argv("ls", "host", None) == ["/bin/sh", "-c", "ls"]
    prefix = ("/usr/bin/unshare", "--net", "--")
    assert unconfined_argv("ls", "none", prefix) == [*prefix, "/bin/sh", "-c", "ls"]
    with pytest.raises(SandboxUnavailable, match="network isolation"):
        unconfined_argv("ls", "none", None)
    egress = EgressRoute("/tmp/e/1.sock", RELAY)
    assert unconfined_argv("ls", "egress", prefix, egress) == [
        *prefix, *RELAY, "/tmp/e/1.sock", "/bin/sh", "-c", "ls",
    ]  # fmt: skip
    with pytest.raises(SandboxUnavailable, match="never given the host's network"):
        unconfined_argv("ls", "egress", None, egress)


def test_the_environment_carries_no_secrets() -> None:
    source = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "HOME": "/root",
        "OPENAI_API_KEY": "sk-x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "CLAYBOT_DATABASE_URL": "postgresql://u:p@h/db",
        "SSH_AUTH_SOCK": "/tmp/ssh-agent",
    }
    env = sandbox_environment("/w", source)
    assert env == {"PATH": "/usr/bin", "LANG": "C.UTF-8", "HOME": "/w"}
    assert sandbox_environment("/w", {})["PATH"] == "/usr/local/bin:/usr/bin:/bin"


def test_secret_paths_cover_user_keys_and_the_claybot_home() -> None:
    paths = secret_paths(["/home/u", "/root"], "/srv/claybot")
    for expected in (
        "/home/u/.ssh",
        "/root/.ssh",
        "/home/u/.aws",
        "/etc/shadow",
        "/srv/claybot/auth.json",
        "/srv/claybot/settings.json",
        "/srv/claybot/claybot.sock",
        "/srv/claybot/claybot.db",
        "/srv/claybot/agents",
        "/srv/claybot/permissions",
    ):
        assert expected in paths
    assert "/srv/claybot/workspace" not in paths


def runner(mode: SandboxMode, tools: dict[str, str] | None = None) -> SandboxRunner:
    """A runner; ``tools`` stands for what is on PATH when given (a poorer machine)."""
    limits = ResourceLimits(cpu_s=10, memory_bytes=1024 * MIB, file_size_bytes=MIB, processes=512)
    config = SandboxConfig(mode, limits, OUTPUT_CAP)
    sandbox = Sandbox("/nonexistent/claybot", which=None if tools is None else tools.get)
    return sandbox.runner("test", config)


async def test_without_any_network_isolation_the_unconfined_backend_fails_closed(
    tmp_path: Path,
) -> None:
    poor = runner("unconfined", {"unshare": "/bin/false"})  # an `unshare` that never works
    folder = str(tmp_path)
    marker = tmp_path / "ran"
    closed = Permissions(workingDir=folder, readDirs=[folder], writeDirs=[folder])
    with pytest.raises(SandboxUnavailable, match="was not run"):
        await poor.run(f"touch {marker}", cwd=folder, home=folder, permissions=closed, timeout_s=5)
    assert not marker.exists()
    allowed = closed.model_copy(update={"network": True})
    result = await poor.run(
        f"touch {marker}", cwd=folder, home=folder, permissions=allowed, timeout_s=5
    )
    assert result.exit_code == 0 and marker.exists()


# An `unshare` whose namespace comes without the right to bring its loopback up.
NO_LOOPBACK_UNSHARE = """#!/bin/sh
while [ "$1" != "--" ]; do shift; done; shift
exec /usr/bin/unshare --map-root-user --net -- /usr/bin/setpriv --bounding-set=-all "$@"
"""


async def test_an_egress_command_whose_loopback_cannot_come_up_is_not_run(
    tmp_path: Path,
) -> None:
    # The relay cannot listen on a loopback that is down: the command does not run at
    # all, rather than run on any other network.
    unshare = tmp_path / "unshare"
    unshare.write_text(NO_LOOPBACK_UNSHARE)
    unshare.chmod(0o755)
    poor = runner("unconfined", {"unshare": str(unshare)})
    folder = str(tmp_path)
    marker = tmp_path / "ran"
    allowed = Permissions(workingDir=folder, writeDirs=[folder], network=True)
    proxy = EgressProxy()
    try:
        async with proxy.listening("test") as egress:
            result = await poor.run(
                f"touch {marker}", cwd=folder, home=folder, permissions=allowed, timeout_s=10,
                egress_socket=egress,
            )  # fmt: skip
    finally:
        await proxy.close()
    assert result.exit_code == 125, result
    assert "no usable loopback" in result.stderr.text()
    assert "never given the host's network" in result.stderr.text()
    assert not marker.exists()


async def test_without_a_working_bwrap_auto_refuses_instead_of_running_unconfined() -> None:
    for mode in ("auto", "bwrap"):
        with pytest.raises(SandboxUnavailable, match=r"bubblewrap is not installed.*apt-get"):
            await runner(mode, {}).backend()
        unusable = {"bwrap": "/bin/false", "unshare": "/usr/bin/unshare"}  # installed, fails
        with pytest.raises(SandboxUnavailable, match="cannot create its namespaces"):
            await runner(mode, unusable).backend()
    assert await runner("unconfined", {}).backend() == "unconfined"  # named on purpose
    if bwrap_works():
        assert await runner("auto").backend() == "bwrap"

"""``claybot start --detach``: the engine in the background, and the wait until it serves.

The engine runs as ``python -m claybot start`` in a session of its own (so the
terminal's hangup and Ctrl-C do not reach it), its output in
``<home>/logs/engine.out``: the JSON log (``engine.log``) misses what is printed
before logging starts or instead of it (an invalid settings.json, a crash on
import), which is exactly what a failed start needs to show. The file is begun
anew at each detached start, so it holds one run.

Readiness is the engine's own ``READY=1`` on a notify socket (the protocol
systemd's ``Type=notify`` uses), then a status request over its socket.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from claybot.config.home import HomePaths
from claybot.kernel.service_notify import NOTIFY_SOCKET_ENV, READY, NotifyListener

if TYPE_CHECKING:
    from claybot.wire.status import EngineStatus

OUTPUT_TAIL_LINES = 20
POLL_S = 0.1
STOP_GRACE_S = 10.0


def output_path(paths: HomePaths) -> Path:
    return paths.logs / "engine.out"


@dataclass(frozen=True)
class Detached:
    pid: int
    status: EngineStatus  # GET /v1/engine/status, once ready


class DetachFailed(RuntimeError):
    """The engine did not become ready; the message says why and shows its output."""


def engine_argv(paths: HomePaths, port: int | None) -> list[str]:
    argv = [sys.executable, "-m", "claybot", "start", "--home", str(paths.home)]
    return argv if port is None else [*argv, "--port", str(port)]


def start_detached(paths: HomePaths, port: int | None, timeout_s: float) -> Detached:
    """Start the engine in the background and return once it answers on its socket.

    On failure the engine started here is not left behind: it exited by itself, or
    it is stopped (SIGTERM, then SIGKILL) before ``DetachFailed`` is raised.
    """
    out = output_path(paths)
    with NotifyListener() as listener, out.open("wb") as output:
        env = {**os.environ, NOTIFY_SOCKET_ENV: listener.address}
        child = subprocess.Popen(
            engine_argv(paths, port),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            _wait_ready(child, listener, out, timeout_s)
        except KeyboardInterrupt:  # Ctrl-C while it starts: the start is called off
            _stop(child)
            raise
    status = _status_of(paths, child)
    return Detached(child.pid, status)


def _wait_ready(
    child: subprocess.Popen[bytes], listener: NotifyListener, out: Path, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while READY not in listener.receive(POLL_S):
        code = child.poll()
        if code is not None:
            raise DetachFailed(
                f"the engine exited with code {code} before it was ready. "
                f"Its output ({out}):\n{_tail(out)}"
            )
        if time.monotonic() > deadline:
            _stop(child)
            raise DetachFailed(
                f"the engine was not ready within {timeout_s:g}s, so it was stopped "
                f"(a longer --timeout waits more). Its output ({out}):\n{_tail(out)}"
            )


def _status_of(paths: HomePaths, child: subprocess.Popen[bytes]) -> EngineStatus:
    """The ready engine's status, from its socket: ready means it answers there."""
    from claybot.client.engine_client import EngineClient, EngineNotRunning

    with EngineClient(paths.socket, timeout_s=10) as client:
        try:
            status = client.status()
        except EngineNotRunning as exc:
            _stop(child)
            raise DetachFailed(f"the engine said it was ready but {exc}") from None
    if status.pid != child.pid:
        raise DetachFailed(
            f"another engine (pid {status.pid}) answers on {paths.socket}, "
            f"not the one started (pid {child.pid})"
        )
    return status


def _stop(child: subprocess.Popen[bytes]) -> None:
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _tail(path: Path, lines: int = OUTPUT_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(unreadable: {exc})"
    kept = text.rstrip("\n").splitlines()[-lines:]
    return "\n".join(f"  {line}" for line in kept) if kept else "  (nothing)"

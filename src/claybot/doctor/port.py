"""The TCP port of settings.json: free for the next start, or held by this home's engine.

"This home's engine" is the one holding the home's lock whose socket answers and says
it listens on that port; anything else on the port would make ``claybot start`` fail.
"""

from __future__ import annotations

import contextlib
import errno
import socket
from dataclasses import dataclass

import httpx

from claybot.client.engine_client import EngineApiError, EngineClient, EngineNotRunning
from claybot.config.home import HomePaths
from claybot.config.settings import DEFAULT_PORT
from claybot.doctor.context import DoctorContext
from claybot.doctor.finding import Finding, fail, ok, warn
from claybot.engine.instance import InstanceLock, read_pid
from claybot.server.listeners import PortInUse, bind_tcp_socket


def check_port(context: DoctorContext) -> list[Finding]:
    if context.settings is None:
        return []  # config.settings says why
    host, port = context.settings.engine.host, context.settings.engine.port
    if port == 0:
        return [ok("port", "engine.port is 0: the engine picks a free port at each start")]
    where = f"{host}:{port}"
    engine = _running_engine(context.paths, context.limits.probe_timeout_s)
    if isinstance(engine, str):
        return [warn("port", engine, "claybot start --force")]
    if engine is not None and engine.port == port:
        return [ok("port", f"{where} is held by this home's engine (pid {engine.pid})")]
    running = f"; this home's engine runs on port {engine.port}" if engine is not None else ""
    try:
        bind_tcp_socket(host, port).close()
    except PortInUse:
        return [
            fail(
                "port",
                f"{where} is in use by another program (not this home's engine){running}",
                f"claybot start --port {_free_port(host)}  (or set engine.port in settings.json)",
            )
        ]
    except OSError as exc:
        reason = errno.errorcode.get(exc.errno or 0, "") or type(exc).__name__
        return [
            fail(
                "port",
                f"cannot listen on {where}: {exc.strerror or exc} ({reason})",
                "set engine.host and engine.port in settings.json to an address of this machine",
            )
        ]
    return [ok("port", f"{where} is free{running}")]


@dataclass(frozen=True)
class RunningEngine:
    pid: int | None
    port: int | None  # its TCP port, as its status reports it


def _running_engine(paths: HomePaths, timeout_s: float) -> RunningEngine | str | None:
    """This home's engine and its port; None if none runs; a sentence if it does not answer."""
    if not InstanceLock(paths).held_by_someone():
        return None
    pid = read_pid(paths)
    with EngineClient(paths.socket, timeout_s=timeout_s) as client:
        try:
            status = client.request("GET", "/v1/engine/status")
        except (EngineNotRunning, EngineApiError, httpx.HTTPError, OSError) as exc:
            return (
                f"an engine holds this home's lock (pid {pid}) but its socket does not "
                f"answer ({type(exc).__name__})"
            )
    tcp = status.get("tcp") or {}
    port = tcp.get("port")
    return RunningEngine(status.get("pid", pid), port if isinstance(port, int) else None)


def _free_port(host: str) -> int:
    """A port free right now on ``host`` (the kernel's pick), to suggest."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with contextlib.closing(socket.socket(family)) as probe, contextlib.suppress(OSError):
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
    return DEFAULT_PORT + 1

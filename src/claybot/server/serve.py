"""Running an engine in the foreground: ``claybot start``.

Startup: take the home's lock, start the engine, bind the socket (0600) and TCP,
write the pid file, print where it listens. When settings.json's ``engine.socketPath``
names another socket, the engine answers there too (seed 000's clients connect to
it), with the home's socket still the one ClayBot's own clients use. SIGTERM/SIGINT (or POST
/v1/engine/shutdown): stop accepting, end event streams, let running turns finish
(or leave them durably pending), flush, remove the socket and pid file.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from claybot.api.tcp_auth import ApiKeyMiddleware
from claybot.config.home import HomePaths
from claybot.config.settings import Settings
from claybot.engine.engine import Engine, EngineOptions
from claybot.engine.instance import InstanceLock
from claybot.jobs.artifact_links import ArtifactLinks
from claybot.kernel.event_loop import event_loop_runner
from claybot.kernel.service_notify import READY, STOPPING, ServiceNotifier
from claybot.server.app import create_app
from claybot.server.banner import ReadyEngine, home_flag, ready_banner
from claybot.server.listeners import (
    bind_configured_socket,
    bind_tcp_socket,
    bind_unix_socket,
    make_server,
)
from claybot.server.relay_guard import RelayedWritesRefused

log = logging.getLogger(__name__)

DRAIN_TIMEOUT_S = 10.0


async def serve(
    paths: HomePaths,
    options: EngineOptions,
    *,
    announce: Callable[[str], None] = lambda line: print(line, flush=True),
    notifier: ServiceNotifier | None = None,
) -> None:
    paths.ensure()
    options.defer_database = True  # the socket first; SQLAlchemy imports after it is up
    lock = InstanceLock(paths)
    lock.acquire()  # AlreadyRunning if another engine has this home
    engine = Engine(paths, options)
    stop = asyncio.Event()
    stopped_cleanly = False
    configured: ConfiguredSocket | None = None
    try:
        await engine.start()
        links = ArtifactLinks()  # the app signs the artifacts' links, the TCP listener checks
        app = create_app(engine, request_shutdown=stop.set, artifact_links=links)
        freeze_boot_heap()
        unix_socket = bind_unix_socket(paths.socket)
        configured = ConfiguredSocket.bind(paths, engine.settings)
        port = options.port if options.port is not None else engine.settings.engine.port
        tcp_socket = bind_tcp_socket(engine.settings.engine.host, port)
        engine.tcp_port = tcp_socket.getsockname()[1]
        servers = [
            make_server(RelayedWritesRefused(app)),
            make_server(ApiKeyMiddleware(app, engine.keys, links=links)),
        ]
        serving = [
            asyncio.create_task(servers[0].serve(sockets=[unix_socket, *configured.sockets()])),
            asyncio.create_task(servers[1].serve(sockets=[tcp_socket])),
        ]
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        while not all(server.started for server in servers):
            if any(task.done() for task in serving):
                break
            await asyncio.sleep(0.005)
        lock.write_pid()
        engine.database.open()
        await engine.sandbox.support()  # for the line below: can agents run commands here?
        ready = ReadyEngine(
            pid=os.getpid(),
            socket=str(paths.socket),
            http=f"http://{engine.settings.engine.host}:{engine.tcp_port}",
            home=str(paths.home),
            exec_summary=engine.sandbox.announcement(),
        )
        # Started by a manager (systemd, or `claybot start --detach`), no Ctrl-C reaches
        # the engine: its banner says `claybot stop` instead.
        managed = notifier is not None and notifier.address is not None
        announce(ready_banner(ready, detached=managed, home_flag=home_flag(paths.home, os.environ)))
        if notifier is not None:
            notifier.notify(READY, f"STATUS=serving {paths.home}")
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([stopped, *serving], return_when=asyncio.FIRST_COMPLETED)
        if notifier is not None:
            notifier.notify(STOPPING)
        announce("stopping…")
        for server in servers:
            server.should_exit = True
        await engine.stop(DRAIN_TIMEOUT_S)  # which ends the event streams first
        stopped_cleanly = True
        await asyncio.gather(*serving, return_exceptions=True)
        stopped.cancel()
        announce("stopped")
    finally:
        if not stopped_cleanly:
            await engine.stop(0)
        if configured is not None:
            configured.remove()
        lock.release()


class ConfiguredSocket:
    """The socket settings.json's ``engine.socketPath`` names (relative: to the home),
    when it is not the home's own. One that cannot be bound is logged, not fatal: the
    engine still serves its home's socket."""

    def __init__(self, path: Path | None, sock: socket.socket | None) -> None:
        self.path = path
        self._socket = sock
        self._inode = path.stat().st_ino if path is not None and sock is not None else None

    @classmethod
    def bind(cls, paths: HomePaths, settings: Settings) -> ConfiguredSocket:
        named = settings.engine.socket_path
        if not named:
            return cls(None, None)
        path = Path(os.path.abspath(paths.home / Path(named).expanduser()))
        if path == Path(os.path.abspath(paths.socket)):
            return cls(None, None)
        try:
            return cls(path, bind_configured_socket(path))
        except OSError as exc:
            log.warning(
                "settings.json's engine.socketPath %s cannot be served: %s; clients that "
                "use it will not reach the engine (the home's socket %s still answers)",
                path,
                exc.strerror or exc,
                paths.socket,
                extra={"action": "engine.socket_path_unavailable", "path": str(path)},
            )
            return cls(path, None)

    def sockets(self) -> list[socket.socket]:
        return [] if self._socket is None else [self._socket]

    def remove(self) -> None:
        """Remove the socket file, if it is still the one this engine bound."""
        if self.path is None or self._inode is None:
            return
        with contextlib.suppress(OSError):
            if self.path.stat().st_ino == self._inode:
                self.path.unlink()


def freeze_boot_heap() -> None:
    """Take what boot built out of the garbage collector's sight, once.

    Settings, plugins, thousands of cron tasks and loaded agents live as long as
    the engine. Left in the oldest generation, every full collection walks them
    again: with 10,000 cron tasks one took 60-80 ms, long enough to make 1,000
    runs that fire together late. Later objects are collected as usual.
    ``claybot start`` turns the collector off for boot (its passes over what boot
    builds find next to nothing): on from here.

    No collection first. One walks every object boot made (80-125 ms of a 1 s boot
    with 10,000 agents) to find about 450 unreachable ones: closures, cells and a
    few classes that imports made and dropped, tens of kilobytes holding no file or
    socket. Frozen, they stay for the engine's life; that is cheaper than the walk.
    """
    gc.freeze()
    gc.enable()


def run(paths: HomePaths, options: EngineOptions, notifier: ServiceNotifier | None = None) -> None:
    """Run until stopped; ``notifier`` is told when the engine is ready and when it stops."""
    with event_loop_runner() as runner:
        try:
            runner.run(serve(paths, options, notifier=notifier))
        except KeyboardInterrupt:
            sys.exit(130)

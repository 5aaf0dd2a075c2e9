"""Running a command in the sandbox: what the machine offers, spawning, capping, killing.

``Sandbox`` is probed once per engine (is there a bubblewrap that works, may the
engine make pids cgroups) and hands out ``SandboxRunner``s, one per owner (a shell
plugin instance, the cron and heartbeat gates), each with its own mode and limits.

A command runs in its own session (process group) and, where the engine may make
one, its own pids cgroup. Past its timeout the group gets SIGTERM and, after a
grace period, SIGKILL; once the command ends, whatever it left running is killed:
the group, the cgroup (which ``setsid`` does not leave) and, under bubblewrap, the
PID namespace, which the kernel empties when the command's init dies.

It is longer than most modules because probing, spawning and cleaning up are one
security boundary: the rule "confined or it does not run" is easier to check when
every path a command can take is read in one file.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.resources
import logging
import os
import pwd
import shutil
import signal
import stat
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from typing_extensions import TypedDict

from claybot.kernel.processes import ProcessGroup, drain, signal_group, start_group
from claybot.permissions.model import Permissions
from claybot.permissions.protected import ProtectedPaths
from claybot.sandbox.cgroup import (
    CommandCgroup,
    PidsCgroups,
    discover_pids_cgroups,
    remove_parent,
)
from claybot.sandbox.limits import DEFAULT_LIMITS, ResourceLimits, limits_applier
from claybot.sandbox.policy import (
    NETWORK_ISOLATIONS,
    Backend,
    EgressRoute,
    NetworkMode,
    SandboxMode,
    SandboxPolicy,
    SandboxUnavailable,
    bwrap_argv,
    private_paths,
    sandbox_environment,
    secret_paths,
    unconfined_argv,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

READ_CHUNK = 65536
KILL_GRACE_S = 2.0
DRAIN_S = 2.0  # how long output may keep coming once the command has ended
PROBE_TIMEOUT_S = 10.0
RETURNCODE_WAIT_S = 5.0
# bwrap's own processes (the launcher and the namespace's init) count in the cgroup.
BWRAP_PROCESSES = 2
RELAY_PROCESSES = 1  # an "egress" command's relay (egress_relay.py) counts too
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    "bubblewrap; Arch: pacman -S bubblewrap)"
)


@dataclass(frozen=True)
class SandboxConfig:
    mode: SandboxMode
    limits: ResourceLimits = DEFAULT_LIMITS
    max_output_bytes: int = 1_000_000
    kill_grace_s: float = KILL_GRACE_S


class SandboxStatus(TypedDict):
    """Whether agents' commands are confined, and what by (``GET /v1/engine/status``)."""

    confined: bool
    backend: Literal["bwrap"] | None
    bwrap: str | None  # the bubblewrap binary's path
    problem: str  # why commands cannot be confined; "" when they can
    processLimit: str | None
    unconfined: list[str]  # the owners whose runners run commands unconfined
    summary: str


@dataclass(frozen=True)
class SandboxSupport:
    """What this machine offers, probed once."""

    bwrap: str | None  # a bubblewrap that works here
    problem: str  # why commands cannot be confined; "" when they can
    cgroups: PidsCgroups | None  # per-command pids cgroups, when the engine may make them
    cgroup_problem: str

    @property
    def process_limit(self) -> str:
        """What bounds a command's processes here, for the status and the start line."""
        if self.cgroups is not None:
            return f"cgroup v{self.cgroups.version} pids.max"
        if os.geteuid() == 0:
            return "none: the engine runs as root and may not make pids cgroups"
        return "RLIMIT_NPROC (counts all of the engine user's processes)"


@dataclass
class CapturedOutput:
    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0  # bytes read past the cap and thrown away

    def text(self) -> str:
        return self.data.decode(errors="replace")


@dataclass(frozen=True)
class ExecResult:
    backend: Backend
    exit_code: int | None  # None when the command was killed for running too long
    stdout: CapturedOutput
    stderr: CapturedOutput
    duration_s: float
    timed_out: bool = False


def default_user_homes() -> tuple[str, ...]:
    """Whose ``~/.ssh``, ``~/.aws`` ... are hidden from commands."""
    homes = [os.path.expanduser("~"), pwd.getpwuid(os.getuid()).pw_dir, "/root"]
    return tuple(dict.fromkeys(homes))


class Sandbox:
    """The machine's command sandbox, shared by everything that runs agents' commands."""

    def __init__(
        self,
        claybot_home: Path | str,
        *,
        which: Callable[[str], str | None] | None = None,
        environ: Mapping[str, str] | None = None,
        user_homes: tuple[str, ...] | None = None,
        discover_cgroups: Callable[[], tuple[PidsCgroups | None, str]] = discover_pids_cgroups,
    ) -> None:
        self.claybot_home = str(claybot_home)
        self.environ = os.environ if environ is None else environ
        # The helpers are looked for on the engine's PATH; tests pass their own ``which``
        # (or a PATH without bwrap) to play a poorer machine.
        if which is None:
            which = functools.partial(shutil.which, path=self.environ.get("PATH", os.defpath))
        self.bwrap = which("bwrap")
        self.unshare = which("unshare")
        self.user_homes = default_user_homes() if user_homes is None else user_homes
        self._discover_cgroups = discover_cgroups
        self._support: SandboxSupport | None = None
        # Each probe runs once, in a task of its own that the callers share (_shared).
        self._probes: dict[str, asyncio.Future[Any]] = {}
        self._unconfined: set[str] = set()

    def runner(self, owner: str, config: SandboxConfig) -> SandboxRunner:
        """A runner for ``owner``; an unconfined one is listed in the status until forgotten."""
        if config.mode == "unconfined":
            self._unconfined.add(owner)
            log.warning(
                "%s runs commands UNCONFINED: they can read and write whatever the engine's "
                "user can, the secrets in the ClayBot home included (its settings say "
                "sandbox: unconfined)",
                owner,
                extra={"action": "sandbox.unconfined", "owner": owner},
            )
        return SandboxRunner(self, owner, config)

    def forget(self, owner: str) -> None:
        self._unconfined.discard(owner)

    def secret_paths(self) -> list[str]:
        """What no command, and no file tool, may reach: the engine's files and the keys."""
        return secret_paths(self.user_homes, self.claybot_home)

    def protected_paths(self) -> ProtectedPaths:
        """What file tools refuse whatever the grants (resolved, as the paths they check
        are): the engine's files and the keys, and the conversations' received files but
        for an agent's own (a grant inside them)."""
        return ProtectedPaths(
            engine=tuple(dict.fromkeys(os.path.realpath(p) for p in self.secret_paths())),
            private=tuple(os.path.realpath(p) for p in private_paths(self.claybot_home)),
        )

    async def support(self) -> SandboxSupport:
        if self._support is None:
            self._support = await self._shared("support", self._probe)
        return self._support

    async def _shared(self, name: str, probe: Callable[[], Awaitable[T]]) -> T:
        """``probe``'s result, run once for every caller. A caller that is stopped while
        it runs (a turn cancelled in its first milliseconds) leaves it running for the
        others: cut short in its process start, a probe waited forever for asyncio to
        notice that process's end (CPython 3.11). One that failed runs again."""
        task = self._probes.get(name)
        if task is None or task.cancelled() or (task.done() and task.exception() is not None):
            task = self._probes[name] = asyncio.ensure_future(probe())
        result: T = await asyncio.shield(task)
        return result

    async def _probe(self) -> SandboxSupport:
        cgroups, cgroup_problem = await asyncio.to_thread(self._discover_cgroups)
        if self.bwrap is None:
            problem = f"bubblewrap is not installed, so commands cannot be confined; {INSTALL_HINT}"
            bwrap = None
        else:
            probe = [self.bwrap, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
            probe += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]
            error = await _failure_of(probe)
            if error is None:
                bwrap, problem = self.bwrap, ""
            else:
                bwrap = None
                problem = (
                    f"bubblewrap ({self.bwrap}) cannot create its namespaces here ({error}), so "
                    "commands cannot be confined; allow unprivileged user namespaces "
                    "(sysctl kernel.unprivileged_userns_clone=1, or the AppArmor profile for "
                    "bwrap) or run the engine where they work"
                )
        support = SandboxSupport(bwrap, problem, cgroups, cgroup_problem)
        log.log(
            logging.WARNING if problem else logging.INFO,
            "exec sandbox: %s; processes bounded by %s",
            problem or f"bubblewrap ({bwrap}) confines commands",
            support.process_limit,
            extra={"action": "sandbox.probed", "cgroupProblem": cgroup_problem or None},
        )
        return support

    async def network_isolation(self) -> tuple[str, ...] | None:
        """The ``unshare`` argv prefix that gives an empty network namespace, if any works."""
        return await self._shared("isolation", self._probe_isolation)

    async def _probe_isolation(self) -> tuple[str, ...] | None:
        if self.unshare is not None:
            for flags in NETWORK_ISOLATIONS:
                prefix = (self.unshare, *flags, "--")
                if await _failure_of([*prefix, "/bin/true"]) is None:
                    return prefix
        return None

    def status(self) -> SandboxStatus:
        """For ``GET /v1/engine/status``: whether commands are confined, and what by."""
        support = self._support
        return {
            "confined": bool(support and support.bwrap),
            "backend": "bwrap" if support and support.bwrap else None,
            "bwrap": support.bwrap if support else None,
            "problem": support.problem if support else "not probed yet",
            "processLimit": support.process_limit if support else None,
            "unconfined": sorted(self._unconfined),
            "summary": self.announcement(),
        }

    def announcement(self) -> str:
        """One line for ``claybot start``: can agents run commands, and how confined."""
        support = self._support
        if support is None:
            return "not probed"
        if self._unconfined:
            return (
                f"UNCONFINED for {', '.join(sorted(self._unconfined))} (settings say "
                "sandbox: unconfined): commands can read and write all the engine's user can"
            )
        if support.bwrap is None:
            return f"UNAVAILABLE: exec and gates refuse to run. {support.problem}"
        return f"confined by bubblewrap; processes bounded by {support.process_limit}"

    async def close(self) -> None:
        for task in self._probes.values():
            task.cancel()  # a probe still running (each is bounded by PROBE_TIMEOUT_S)
        await asyncio.gather(*self._probes.values(), return_exceptions=True)
        support = self._support
        if support is not None and support.cgroups is not None:
            await asyncio.to_thread(remove_parent, support.cgroups)

    def policy(
        self, cwd: str, permissions: Permissions, egress: EgressRoute | None = None
    ) -> SandboxPolicy:
        """What a bubblewrapped command sees (reads the file system: call it off the loop)."""
        hidden_dirs: list[str] = []
        hidden_files: list[str] = []
        protected = self.protected_paths()
        private = set(protected.private_grants(permissions))
        for path in [*self.secret_paths(), *protected.private]:
            resolved = os.path.realpath(path)
            try:
                mode = os.lstat(resolved).st_mode
            except OSError:
                continue  # nothing there to hide
            (hidden_dirs if stat.S_ISDIR(mode) else hidden_files).append(resolved)
        return SandboxPolicy(
            cwd=cwd,
            network=_network_mode(permissions, egress),
            egress=egress,
            read_dirs=tuple(_unmoved_dirs(d for d in permissions.readDirs if d not in private)),
            write_dirs=tuple(_unmoved_dirs(d for d in permissions.writeDirs if d not in private)),
            blanked_dirs=tuple(
                home
                for home in (os.path.realpath(self.claybot_home),)
                if os.path.isdir(home)  # bwrap cannot make a mount point on the read-only root
            ),
            hidden_dirs=tuple(hidden_dirs),
            hidden_files=tuple(hidden_files),
            # Read-only whatever the grant says: nothing done there may change them.
            private_dirs=tuple(_unmoved_dirs(sorted(private))),
        )


class SandboxRunner:
    """Runs commands for one owner with one configuration."""

    def __init__(self, sandbox: Sandbox, owner: str, config: SandboxConfig) -> None:
        self.sandbox = sandbox
        self.owner = owner
        self.config = config

    async def backend(self) -> Backend:
        """The backend commands run in; SandboxUnavailable when they cannot be confined."""
        if self.config.mode == "unconfined":
            return "unconfined"
        support = await self.sandbox.support()
        if support.bwrap is None:
            raise SandboxUnavailable(f"{support.problem}. The command was not run")
        return "bwrap"

    async def run(
        self,
        command: str,
        *,
        cwd: str,
        home: str,
        permissions: Permissions,
        timeout_s: float,
        egress_socket: str | None = None,
    ) -> ExecResult:
        """Run ``command`` (already checked: ``cwd`` resolved and granted). Raises
        ``SandboxUnavailable`` without starting anything when it cannot be confined.

        ``egress_socket``: with ``permissions.network``, the command's network is the
        egress proxy listening on that Unix socket, in a namespace of its own where the
        host's loopback and LAN do not exist; without it, ``@network`` is the host's."""
        backend = await self.backend()
        support = await self.sandbox.support()
        egress = None
        if egress_socket is not None and permissions.network:
            egress = EgressRoute(egress_socket, _relay_argv())
        network = _network_mode(permissions, egress)
        if backend == "bwrap":
            assert support.bwrap is not None
            policy = await asyncio.to_thread(self.sandbox.policy, cwd, permissions, egress)
            argv = bwrap_argv(support.bwrap, command, policy)
            overhead = BWRAP_PROCESSES
        else:
            isolation = None if network == "host" else await self.sandbox.network_isolation()
            argv = unconfined_argv(command, network, isolation, egress)
            overhead = 1 if isolation else 0
        if egress is not None:
            overhead += RELAY_PROCESSES
        cgroup: CommandCgroup | None = None
        if support.cgroups is not None:
            try:
                cgroup = await asyncio.to_thread(
                    support.cgroups.create, self.config.limits.processes + overhead
                )
            except OSError as exc:
                raise SandboxUnavailable(
                    f"the command's process limit could not be set up ({exc}); it was not run"
                ) from exc
        started = time.monotonic()
        try:
            exit_code, stdout, stderr, timed_out = await self._spawn(
                argv, cwd, home, timeout_s, cgroup
            )
        finally:
            if cgroup is not None:
                await asyncio.to_thread(cgroup.remove)
        return ExecResult(backend, exit_code, stdout, stderr, time.monotonic() - started, timed_out)

    async def _spawn(
        self, argv: list[str], cwd: str, home: str, timeout_s: float, cgroup: CommandCgroup | None
    ) -> tuple[int | None, CapturedOutput, CapturedOutput, bool]:
        try:
            process = await start_group(
                argv,
                cwd=cwd,
                env=sandbox_environment(home, self.sandbox.environ),
                preexec_fn=limits_applier(self.config.limits, cgroup),
            )
        except asyncio.CancelledError:
            # Stopped as it started: the group is killed, but bubblewrap's sandboxed
            # command is in a session of its own; the cgroup holds all of it.
            if cgroup is not None:
                await asyncio.shield(asyncio.to_thread(cgroup.kill_all))
            raise
        group = ProcessGroup(
            process.pid,
            exited=functools.partial(_exited, process.pid),
            kill_grace_s=self.config.kill_grace_s,
        )
        assert process.stdout is not None and process.stderr is not None
        cap = self.config.max_output_bytes
        stdout, stderr = CapturedOutput(), CapturedOutput()
        readers = [
            asyncio.create_task(_capture(process.stdout, stdout, cap)),
            asyncio.create_task(_capture(process.stderr, stderr, cap)),
        ]
        try:
            # Past the timeout, or when the turn is stopped, the command's group goes.
            timed_out = await group.wait(timeout_s)
        finally:
            # What the command left running goes too: its group, and all of its cgroup
            # (a `setsid` child has left the group but never the cgroup).
            group.kill()
            if cgroup is not None:
                await asyncio.shield(asyncio.to_thread(cgroup.kill_all))
            # A reader still waiting then reads a pipe held elsewhere: it is cancelled.
            for error in await drain(readers, DRAIN_S):
                log.warning(
                    "reading a command's output failed: %s", error,
                    extra={"action": "sandbox.output_error"},
                )  # fmt: skip
        return (None if timed_out else await _returncode(process)), stdout, stderr, timed_out


def _network_mode(permissions: Permissions, egress: EgressRoute | None) -> NetworkMode:
    if not permissions.network:
        return "none"
    return "host" if egress is None else "egress"


@functools.cache
def _relay_argv() -> tuple[str, ...]:
    """The egress relay, run by the engine's own interpreter (a path the sandbox shows)
    isolated: no PYTHON* variables, no site-packages; it needs the standard library only."""
    source = (importlib.resources.files("claybot.sandbox") / "egress_relay.py").read_text()
    return (sys.executable, "-I", "-S", "-c", source)


async def _exited(pid: int) -> None:
    """Until the process has ended.

    Not ``Process.wait()``: before Python 3.12 it also waits for the pipes to close,
    and a child the command left behind holds them, so a command that exited would
    count as running until its timeout. A pidfd becomes readable once the process
    ends, whoever holds its pipes.
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already reaped
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ended.done():
            ended.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await ended
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def _returncode(process: asyncio.subprocess.Process) -> int | None:
    """The exit status, which the event loop's child watcher records a moment after the
    end (``returncode``: ``wait()`` may still be held up by pipes, see ``_exited``)."""
    deadline = time.monotonic() + RETURNCODE_WAIT_S
    # The watcher sets it from a callback and offers nothing else to wait on.
    while process.returncode is None and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.001)
    return process.returncode


def _unmoved_dirs(paths: Iterable[str]) -> list[str]:
    # Grants are stored resolved; one that has since become a link (or vanished) would
    # bind whatever it points at now, so it is left out: the command sees less, not more.
    return [path for path in paths if os.path.realpath(path) == path and os.path.isdir(path)]


async def _capture(stream: asyncio.StreamReader, sink: CapturedOutput, cap: int) -> None:
    # Reading on past the cap keeps the command from blocking on a full pipe.
    while chunk := await stream.read(READ_CHUNK):
        room = cap - len(sink.data)
        if room > 0:
            sink.data += chunk[:room]
        sink.dropped += max(0, len(chunk) - max(room, 0))


async def _failure_of(argv: list[str]) -> str | None:
    """None when ``argv`` runs and exits 0; else what went wrong, in a few words."""
    try:
        # start_group: a start cut short (the engine stopping) ends at once.
        process = await start_group(
            argv, cwd="/", env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        )
    except OSError as exc:
        return str(exc)
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            _, stderr = await process.communicate()
    except TimeoutError:
        signal_group(process.pid, signal.SIGKILL)
        await process.wait()
        return f"no answer in {PROBE_TIMEOUT_S:g} s"
    if process.returncode == 0:
        return None
    lines = stderr.decode(errors="replace").strip().splitlines()
    return lines[0][:200] if lines else f"exit code {process.returncode}"

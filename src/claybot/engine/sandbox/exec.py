"""Running a command in the sandbox: picking the backend, spawning, capping, killing.

The command runs in its own session (process group). Past its timeout the group
gets SIGTERM and, after a grace period, SIGKILL; once the command ends, whatever
it left running in its group is killed too. Under bubblewrap the command also
lives in its own PID namespace, which the kernel empties when ``bwrap`` dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from claybot.engine.agents.state import Permissions
from claybot.engine.sandbox.limits import ResourceLimits, limits_applier
from claybot.engine.sandbox.policy import (
    NETWORK_ISOLATIONS,
    Backend,
    SandboxMode,
    SandboxPolicy,
    SandboxUnavailable,
    bwrap_argv,
    rlimit_argv,
    sandbox_environment,
    secret_paths,
)

log = logging.getLogger(__name__)

READ_CHUNK = 65536
KILL_GRACE_S = 2.0
DRAIN_S = 2.0  # how long output may keep coming once the command has ended
PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class SandboxConfig:
    mode: SandboxMode
    limits: ResourceLimits
    max_output_bytes: int
    claybot_home: str  # blanked in the sandbox; its secrets stay hidden even if granted
    user_homes: tuple[str, ...] = ()  # whose ~/.ssh, ~/.aws, ... are hidden
    kill_grace_s: float = KILL_GRACE_S


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


class SandboxRunner:
    """Runs commands with one configuration; probes what the machine supports once."""

    def __init__(
        self,
        config: SandboxConfig,
        *,
        which: Callable[[str], str | None] = shutil.which,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        # ``which`` finds the helpers; tests pass their own to play a poorer machine.
        self.bwrap = which("bwrap")
        self.unshare = which("unshare")
        self._environ = os.environ if environ is None else environ
        self._lock = asyncio.Lock()
        self._backend: Backend | None = None
        self._isolation: tuple[str, ...] | None = None
        self._isolation_probed = False

    async def backend(self) -> Backend:
        async with self._lock:
            if self._backend is None:
                self._backend = await self._choose_backend()
            return self._backend

    async def _choose_backend(self) -> Backend:
        mode = self.config.mode
        if mode == "bwrap":
            if self.bwrap is None:
                raise SandboxUnavailable("sandbox is 'bwrap' but bwrap is not on PATH")
            return "bwrap"
        if mode == "auto" and self.bwrap is not None:
            probe = [self.bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/"]
            if await _succeeds([*probe, "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]):
                log.info("exec sandbox: bubblewrap", extra={"action": "sandbox.backend"})
                return "bwrap"
            log.warning(
                "bwrap is installed but cannot create namespaces here; exec falls back to "
                "rlimit, which does not confine the file system (allow unprivileged user "
                "namespaces to use bwrap)",
                extra={"action": "sandbox.bwrap_unusable"},
            )
        else:
            log.warning(
                "exec sandbox: rlimit only; commands can read and write whatever the engine's "
                "user can (install bubblewrap to confine them)",
                extra={"action": "sandbox.backend", "mode": mode},
            )
        return "rlimit"

    async def network_isolation(self) -> tuple[str, ...] | None:
        """The ``unshare`` argv prefix that gives an empty network namespace, if any works."""
        async with self._lock:
            if not self._isolation_probed:
                self._isolation = await self._probe_isolation()
                self._isolation_probed = True
            return self._isolation

    async def _probe_isolation(self) -> tuple[str, ...] | None:
        if self.unshare is not None:
            for flags in NETWORK_ISOLATIONS:
                prefix = (self.unshare, *flags, "--")
                if await _succeeds([*prefix, "/bin/true"]):
                    return prefix
        log.warning(
            "no network isolation works here (no bwrap, `unshare --net` and `unshare -rn` "
            "fail); exec refuses commands of agents without @network",
            extra={"action": "sandbox.no_isolation"},
        )
        return None

    async def run(
        self, command: str, *, cwd: str, home: str, permissions: Permissions, timeout_s: float
    ) -> ExecResult:
        """Run ``command`` (already checked: ``cwd`` resolved and granted). Raises
        ``SandboxUnavailable`` without starting anything when it cannot be isolated."""
        backend = await self.backend()
        if backend == "bwrap":
            assert self.bwrap is not None
            policy = await asyncio.to_thread(self._bwrap_policy, cwd, permissions)
            argv = bwrap_argv(self.bwrap, command, policy)
        else:
            isolation = None if permissions.network else await self.network_isolation()
            argv = rlimit_argv(command, permissions.network, isolation)
        started = time.monotonic()
        exit_code, stdout, stderr, timed_out = await self._spawn(argv, cwd, home, timeout_s)
        return ExecResult(backend, exit_code, stdout, stderr, time.monotonic() - started, timed_out)

    def _bwrap_policy(self, cwd: str, permissions: Permissions) -> SandboxPolicy:
        hidden_dirs: list[str] = []
        hidden_files: list[str] = []
        for path in secret_paths(self.config.user_homes, self.config.claybot_home):
            resolved = os.path.realpath(path)
            try:
                mode = os.lstat(resolved).st_mode
            except OSError:
                continue  # nothing there to hide
            (hidden_dirs if stat.S_ISDIR(mode) else hidden_files).append(resolved)
        return SandboxPolicy(
            cwd=cwd,
            network=permissions.network,
            read_dirs=tuple(_unmoved_dirs(permissions.readDirs)),
            write_dirs=tuple(_unmoved_dirs(permissions.writeDirs)),
            blanked_dirs=tuple(
                home
                for home in (os.path.realpath(self.config.claybot_home),)
                if os.path.isdir(home)  # bwrap cannot make a mount point on the read-only root
            ),
            hidden_dirs=tuple(hidden_dirs),
            hidden_files=tuple(hidden_files),
        )

    async def _spawn(
        self, argv: list[str], cwd: str, home: str, timeout_s: float
    ) -> tuple[int | None, CapturedOutput, CapturedOutput, bool]:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=sandbox_environment(home, self._environ),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=limits_applier(self.config.limits),
        )
        assert process.stdout is not None and process.stderr is not None
        cap = self.config.max_output_bytes
        stdout, stderr = CapturedOutput(), CapturedOutput()
        readers = [
            asyncio.create_task(_capture(process.stdout, stdout, cap)),
            asyncio.create_task(_capture(process.stderr, stderr, cap)),
        ]
        timed_out = False
        try:
            try:
                await asyncio.wait_for(process.wait(), timeout_s)
            except TimeoutError:
                timed_out = True
                await self._terminate(process)
        except asyncio.CancelledError:  # the turn was stopped: the command goes with it
            await asyncio.shield(self._terminate(process))
            raise
        finally:
            # What the command left running in its group goes too.
            _signal_group(process.pid, signal.SIGKILL)
            await _finish_readers(readers)
        return (None if timed_out else process.returncode), stdout, stderr, timed_out

    async def _terminate(self, process: asyncio.subprocess.Process) -> None:
        """SIGTERM to the group; SIGKILL once the grace is over."""
        _signal_group(process.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), self.config.kill_grace_s)
        _signal_group(process.pid, signal.SIGKILL)
        await process.wait()


def _unmoved_dirs(paths: Iterable[str]) -> list[str]:
    # Grants are stored resolved; one that has since become a link (or vanished) would
    # bind whatever it points at now, so it is left out: the command sees less, not more.
    return [path for path in paths if os.path.realpath(path) == path and os.path.isdir(path)]


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


async def _capture(stream: asyncio.StreamReader, sink: CapturedOutput, cap: int) -> None:
    # Reading on past the cap keeps the command from blocking on a full pipe.
    while chunk := await stream.read(READ_CHUNK):
        room = cap - len(sink.data)
        if room > 0:
            sink.data += chunk[:room]
        sink.dropped += max(0, len(chunk) - max(room, 0))


async def _finish_readers(readers: list[asyncio.Task[None]]) -> None:
    """Let the output drain; a reader still waiting (a pipe held elsewhere) is cancelled."""
    _done, pending = await asyncio.wait(readers, timeout=DRAIN_S)
    for task in pending:
        task.cancel()
    for result in await asyncio.gather(*readers, return_exceptions=True):
        if isinstance(result, Exception):
            log.warning(
                "reading a command's output failed: %s", result,
                extra={"action": "sandbox.output_error"},
            )  # fmt: skip


async def _succeeds(argv: list[str]) -> bool:
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
    except OSError:
        return False
    try:
        return await asyncio.wait_for(process.wait(), PROBE_TIMEOUT_S) == 0
    except TimeoutError:
        process.kill()
        await process.wait()
        return False

"""Processes the engine watches or supervises.

A command the sandbox runs and a proactive agent's CLI run both start in a new
session, so the child leads its own process group and a signal to the group also
reaches whatever it started. ``ProcessGroup`` is that part, written once: wait
for the leader with a timeout, and on timeout or cancellation SIGTERM the group,
then SIGKILL it once the grace period is over. How the end of the leader is
detected is the caller's (the sandbox watches a pidfd, because its commands may
leave children holding the pipes), and so is what is killed besides the group (a
cgroup) and how output is read and capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, signum: signal.Signals) -> None:
    """``signum`` to every process of the group; a group already gone is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


# How long a process stopped as it started may take to end (a killed group ends at once;
# what the group kill cannot reach is left to the caller, e.g. a cgroup).
STOPPED_START_WAIT_S = 2.0


async def start_group(
    argv: Sequence[str],
    *,
    cwd: str | Path,
    env: Mapping[str, str],
    preexec_fn: Callable[[], object] | None = None,
) -> asyncio.subprocess.Process:
    """``argv`` in a new session (its own process group), stdin empty, output piped.

    Cancelled while the process starts, the start still finishes (shielded), its
    whole group is killed, and the cancellation goes on. Left to asyncio, a start
    cut short kills only the first process and then waits for the pipes to close:
    a command's children hold them (bubblewrap's sandboxed command does), so a turn
    stopped in the first milliseconds of its command waited out all of that command.
    """
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=preexec_fn,
        )
    )
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        # A start that failed left nothing to stop; what outlives the wait is the caller's.
        with contextlib.suppress(Exception):
            process = await starting
            signal_group(process.pid, signal.SIGKILL)
            async with asyncio.timeout(STOPPED_START_WAIT_S):
                await process.wait()  # its pipes closed, its transport done with
        raise


class ProcessGroup:
    """A child that leads its own process group, and how to stop all of it."""

    def __init__(
        self,
        pid: int,
        *,
        exited: Callable[[], Awaitable[object]],
        kill_grace_s: float,
        on_sigkill: Callable[[], None] | None = None,
    ) -> None:
        self.pid = pid  # also the group's id
        self._exited = exited  # resolves once the leader has ended
        self._kill_grace_s = kill_grace_s
        self._on_sigkill = on_sigkill  # told when SIGTERM was not enough

    def kill(self) -> None:
        signal_group(self.pid, signal.SIGKILL)

    async def wait(self, timeout_s: float, *, on_timeout: Callable[[], None] | None = None) -> bool:
        """Until the leader ends; whether it ran past ``timeout_s`` (then it is terminated).

        Cancelled (a turn stopped, the engine shutting down), the group is terminated
        first, shielded from the cancellation, and the cancellation goes on.
        """
        try:
            try:
                async with asyncio.timeout(timeout_s):
                    await self._exited()
            except TimeoutError:
                if on_timeout is not None:
                    on_timeout()
                await self.terminate()
                return True
        except asyncio.CancelledError:
            await asyncio.shield(self.terminate())
            raise
        return False

    async def terminate(self) -> None:
        """SIGTERM to the group; SIGKILL once the grace is over."""
        signal_group(self.pid, signal.SIGTERM)
        try:
            async with asyncio.timeout(self._kill_grace_s):
                await self._exited()
        except TimeoutError:
            if self._on_sigkill is not None:
                self._on_sigkill()
        self.kill()
        await self._exited()


async def drain(
    readers: list[asyncio.Task[None]],
    drain_s: float,
    *,
    kill_stragglers: ProcessGroup | None = None,
) -> list[Exception]:
    """Let the output readers finish once the process has ended; their errors.

    A reader still waiting after ``drain_s`` reads a pipe that something else holds
    (a child left running). With ``kill_stragglers`` that group is killed and the
    reader given ``drain_s`` more; a reader still waiting then is cancelled.
    """
    _done, pending = await asyncio.wait(readers, timeout=drain_s)
    if pending and kill_stragglers is not None:
        kill_stragglers.kill()
        _done, pending = await asyncio.wait(pending, timeout=drain_s)
    for task in pending:
        task.cancel()
    results = await asyncio.gather(*readers, return_exceptions=True)
    return [result for result in results if isinstance(result, Exception)]

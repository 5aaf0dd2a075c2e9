"""Runners: what executes an objective. ``claude`` spawns the Claude CLI.

``claude -p <objective> --output-format stream-json --verbose [--model m]`` is
spawned without a shell, in ``cwd``, in a new session (its own process group),
with an allowlisted environment. Its stdout is split into lines: each raw line
and each piece of clean text go to the sink as they arrive. On timeout (or
cancellation: shutdown, delete) the whole group gets SIGTERM, then SIGKILL after
the grace period.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from claybot.kernel.processes import ProcessGroup, drain, start_group
from claybot.proactive.models import RunResult
from claybot.proactive.streamjson import LineSplitter, StreamJsonParser

log = logging.getLogger(__name__)

KILL_GRACE_S = 5.0  # between SIGTERM and SIGKILL (seed 004)
DRAIN_S = 2.0  # how long output may keep coming after the process exited
READ_CHUNK = 64 * 1024
STDERR_TAIL_BYTES = 4096
ERROR_DETAIL_CHARS = 300


@dataclass(frozen=True)
class RunRequest:
    agent_id: str
    execution_id: str
    objective: str
    cwd: Path
    model: str
    timeout_s: float


@dataclass(frozen=True)
class RunOutcome:
    result: RunResult
    exit_code: int | None
    error: str | None = None


class RunSink(Protocol):
    async def raw(self, line: bytes) -> None:
        """One raw output line (for the ``.jsonl`` file)."""

    async def text(self, piece: str) -> None:
        """A piece of clean text (streamed to clients, written to the ``.log``)."""


class Runner(Protocol):
    async def run(self, request: RunRequest, sink: RunSink) -> RunOutcome:
        """Run to the end; on cancellation, stop what was started, then re-raise."""
        ...


EnvironmentSource = Callable[[], Awaitable[dict[str, str]]]


def claude_arguments(binary: str, objective: str, model: str) -> list[str]:
    args = [binary, "-p", objective, "--output-format", "stream-json", "--verbose"]
    if model:
        args += ["--model", model]
    return args


class ClaudeRunner:
    def __init__(
        self,
        environment: EnvironmentSource,
        *,
        binary: str = "claude",
        kill_grace_s: float = KILL_GRACE_S,
    ) -> None:
        self._environment = environment
        self._binary = binary
        self.kill_grace_s = kill_grace_s

    async def run(self, request: RunRequest, sink: RunSink) -> RunOutcome:
        env = await self._environment()
        binary = shutil.which(self._binary, path=env.get("PATH"))
        if binary is None:
            return RunOutcome(
                "failure",
                None,
                f"the {self._binary!r} CLI was not found on PATH; install Claude Code, "
                'or give this agent the runner "engine"',
            )
        try:
            # Its own process group: a kill reaches its children.
            process = await start_group(
                claude_arguments(binary, request.objective, request.model),
                cwd=request.cwd,
                env=env,
            )
        except OSError as exc:
            return RunOutcome("failure", None, f"could not start {self._binary!r}: {exc.strerror}")
        group = ProcessGroup(
            process.pid,
            exited=process.wait,
            kill_grace_s=self.kill_grace_s,
            on_sigkill=functools.partial(
                log.warning,
                "proactive run ignored SIGTERM; sending SIGKILL",
                extra={"action": "proactive.run_kill", "pid": process.pid},
            ),
        )
        parser = StreamJsonParser()
        stderr_tail = bytearray()
        assert process.stdout is not None and process.stderr is not None
        readers = [
            asyncio.create_task(_pump_stdout(process.stdout, parser, sink)),
            asyncio.create_task(_pump_stderr(process.stderr, stderr_tail)),
        ]
        try:
            timed_out = await group.wait(
                request.timeout_s,
                on_timeout=functools.partial(
                    log.warning,
                    "proactive run timed out; terminating",
                    extra={"action": "proactive.run_timeout", "agentId": request.agent_id},
                ),
            )
        finally:
            # A leftover child holding the pipe is killed, not waited for.
            for error in await drain(readers, DRAIN_S, kill_stragglers=group):
                log.warning(
                    "reading a run's output failed: %s", error,
                    extra={"action": "proactive.output_error"},
                )  # fmt: skip
        return _outcome(process.returncode, timed_out, request.timeout_s, parser, stderr_tail)


async def _pump_stdout(
    stream: asyncio.StreamReader, parser: StreamJsonParser, sink: RunSink
) -> None:
    splitter = LineSplitter()

    async def handle(line: bytes) -> None:
        await sink.raw(line)
        text = parser.feed(line)
        if text:
            await sink.text(text)

    while chunk := await stream.read(READ_CHUNK):
        for line in splitter.feed(chunk):
            await handle(line)
    for line in splitter.finish():
        await handle(line)


async def _pump_stderr(stream: asyncio.StreamReader, tail: bytearray) -> None:
    while chunk := await stream.read(READ_CHUNK):
        tail.extend(chunk)
        del tail[:-STDERR_TAIL_BYTES]


def _outcome(
    returncode: int | None,
    timed_out: bool,
    timeout_s: float,
    parser: StreamJsonParser,
    stderr_tail: bytearray,
) -> RunOutcome:
    exit_code = returncode if returncode is not None and returncode >= 0 else None
    if timed_out:
        return RunOutcome("timeout", exit_code, f"timed out after {timeout_s:g} s")
    if returncode == 0:
        if parser.result is not None and parser.result.is_error:
            detail = parser.result.text or parser.result.subtype or "error"
            return RunOutcome(
                "failure", 0, f"the run reported an error: {detail[:ERROR_DETAIL_CHARS]}"
            )
        return RunOutcome("success", 0)
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else "?"
        error = f"killed by {name}"
    else:
        error = f"Exit code: {returncode}"
    detail = _last_line(stderr_tail)
    return RunOutcome("failure", exit_code, f"{error}: {detail}" if detail else error)


def _last_line(data: bytearray) -> str:
    lines = [line.strip() for line in data.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1][:ERROR_DETAIL_CHARS] if lines else ""

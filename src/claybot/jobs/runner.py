"""Running one claimed job: the agents' turn loop over the job's rows, to an end the
store records.

A run picks up where the job's records stop. The first run appends the task; a
run after a person answered appends the answer as the result of the ``ask_user``
call that asked, in the same fenced transaction that clears ``user_answer``, so
it lands exactly once; a run after a lost worker goes on from the last step (a
tool that was running when the worker died is reported to the model as
interrupted, never run twice). The run ends the job ``completed`` (``final_answer``,
or an answer without tool calls), ``waiting_for_user`` (``ask_user``), ``failed``
(an error, the model's silence, the time limit) or ``cancelled``; when the worker
drains it gives the job back to the queue instead; when its claim was lost it
writes nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from claybot.agents.history import build_context, tool_result_record, turn_progress
from claybot.agents.ports import ProviderRouter
from claybot.agents.records import HistoryRecord, ToolResultRecord
from claybot.agents.turn import TurnOutcome
from claybot.agents.turn_loop import LoopLimits, TurnLoop, TurnWork
from claybot.config.settings import JobSettings
from claybot.files.reference import FileReference
from claybot.jobs.database import JobDatabase
from claybot.jobs.mcp_servers import McpServers
from claybot.jobs.model import Claim, Job, JobStatus, LeaseLost
from claybot.jobs.prompts import system_prompt, task_message
from claybot.jobs.tools import JobToolContext, JobTools
from claybot.jobs.transcript import JobTranscript
from claybot.kernel.events import DiscardedEvents
from claybot.net.egress import EgressProxy
from claybot.permissions.model import Permissions
from claybot.providers.base import TokenUsage
from claybot.sandbox import (
    DEFAULT_LIMITS,
    ResourceLimits,
    Sandbox,
    SandboxConfig,
    SandboxRunner,
)
from claybot.tools.base import AgentKind, ToolRegistry

log = logging.getLogger(__name__)

ASK_USER = "ask_user"
FINAL_ANSWER = "final_answer"
# After a cancel or the time limit, this long for the turn to write its closing records.
CLOSE_GRACE_S = 5.0
JOBS_SANDBOX_OWNER = "jobs"  # run_python's commands, as the sandbox names their owner


class Stop(enum.Enum):
    CANCEL = "cancel"  # a person cancelled the job: it ends cancelled
    DRAIN = "drain"  # the worker is stopping: the job goes back to the queue
    LOST = "lost"  # the claim is gone: write nothing


@dataclass
class StopSignal:
    """How a worker stops a running job from outside it."""

    reason: Stop | None = None
    _event: asyncio.Event = field(default_factory=asyncio.Event)

    def stop(self, reason: Stop) -> None:
        if self.reason is None:
            self.reason = reason
            self._event.set()

    async def wait(self) -> Stop:
        await self._event.wait()
        assert self.reason is not None
        return self.reason


@dataclass(frozen=True)
class RunLimits:
    max_iterations: int = 50
    tool_output_limit: int = 16_000
    python_timeout_s: float = 120.0


@dataclass
class JobOwner:
    """The turn loop's owner for a job: replies go to the job's log, once each."""

    db: JobDatabase
    claim: Claim
    usage: TokenUsage = field(default_factory=TokenUsage)

    @property
    def id(self) -> str:
        return self.claim.job.id

    @property
    def kind(self) -> AgentKind:
        return "job"

    @property
    def permissions(self) -> Permissions:
        return Permissions()  # a job's tools confine themselves to its own directory

    async def reply(
        self,
        item_id: str,
        outgoing_id: str,
        text: str,
        *,
        final: bool,
        delivered_before: bool,
        files: tuple[FileReference, ...] = (),  # never: a job has no send_file
    ) -> bool:
        if not delivered_before:
            await self.db.logs.add(
                self.id, f"Assistant: {text}", claim=self.claim, step_key=outgoing_id
            )
        return True

    def count_usage(self, usage: TokenUsage, provider: str, model: str) -> None:
        self.usage = self.usage + usage


class JobRunner:
    def __init__(
        self,
        db: JobDatabase,
        providers: Callable[[str | None], ProviderRouter],
        sandbox: SandboxRunner,
        workroot: Path,
        limits: RunLimits = RunLimits(),
        egress: EgressProxy | None = None,
    ) -> None:
        self.db = db
        self.providers = providers  # the router for a job's ``model`` (None: the default)
        self.sandbox = sandbox
        self.workroot = workroot
        self.limits = limits
        # Shared by the jobs this runner runs; their stderr logs go under the workroot.
        self.mcp = McpServers(workroot / ".mcp")
        # run_python's network, for the jobs that allow one: a socket per script.
        self.egress = EgressProxy() if egress is None else egress

    async def close(self) -> None:
        """Stop the MCP servers the jobs started; remove the egress proxy's folder."""
        await self.mcp.close()
        await self.egress.close()

    async def run(self, claim: Claim, stop: StopSignal) -> JobStatus | None:
        """Run the job until it ends, waits, is released or lost; its status then (None
        when the claim was lost and nothing more was written)."""
        try:
            return await self._run(claim, stop)
        except LeaseLost as exc:
            log.info(
                "a job's claim was lost: %s",
                exc,
                extra={"action": "job.lost", "jobId": claim.job.id},
            )
            return None

    async def _run(self, claim: Claim, stop: StopSignal) -> JobStatus | None:
        job = claim.job
        transcript = await JobTranscript.open(self.db, claim)
        records = await transcript.read()
        ended = await self._settle(claim, transcript, records)
        if ended is not None:
            return ended
        records = await transcript.read()
        progress = turn_progress(records, job.id)
        workdir = self.workroot / job.id  # made by the first tool that needs it
        attachments = list(claim.attachments)
        tools = ToolRegistry()
        job_tools = JobTools(
            JobToolContext(
                self.db,
                claim,
                transcript,
                workdir,
                self.sandbox,
                job.allow_network,
                self.mcp,
                self.egress,
                self.limits.python_timeout_s,
            ),
            tools,
        )
        job_tools.offer_builtins()
        await job_tools.offer_discovered(job.tools_discovered or [])
        loop = TurnLoop(
            providers=self.providers(job.model),
            tools=tools,
            events=DiscardedEvents(),
            now_ms=lambda: int(time.time() * 1000),
            limits=LoopLimits(
                system_prompt=system_prompt(job.hitl_mode),
                max_tool_iterations=self.limits.max_iterations,
                tool_output_limit=self.limits.tool_output_limit,
            ),
        )
        owner = JobOwner(self.db, claim)
        work = TurnWork(
            job.id,
            task_message(job.task, attachments),
            None,
            transcript,
            build_context(records),
            progress if progress.started else None,
        )
        if not progress.started:
            transcript.log("Job started")
        turn = asyncio.create_task(loop.run(owner, work), name=f"job-{job.id}")
        stopper = asyncio.create_task(stop.wait())
        budget = max(1.0, job.timeout_seconds - _ran_s(job))
        started = time.monotonic()
        try:
            await asyncio.wait({turn, stopper}, timeout=budget, return_when="FIRST_COMPLETED")
        finally:
            stopper.cancel()
        state = _state(job, records, time.monotonic() - started)
        if turn.done():
            return await self._ended(claim, turn.result(), state, transcript)
        turn.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeaseLost):
            await turn
        reason = stop.reason
        if reason is Stop.LOST:
            return None
        if reason is Stop.DRAIN:
            await self.db.jobs.release(claim)
            return JobStatus.QUEUED
        why = "cancelled" if reason is Stop.CANCEL else f"timed out after {job.timeout_seconds} s"
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_GRACE_S):
                await loop.close(owner, work, f"The job was {why}.", failed=True)
        if reason is Stop.CANCEL:
            await self.db.jobs.finish(claim, JobStatus.CANCELLED)
            return JobStatus.CANCELLED
        await self.db.jobs.finish(claim, JobStatus.FAILED, error=f"The job {why}.")
        return JobStatus.FAILED

    async def _settle(
        self, claim: Claim, transcript: JobTranscript, records: list[HistoryRecord]
    ) -> JobStatus | None:
        """What the records already decide before the model is asked anything: the
        answer to a pending question is appended (once), a question still unanswered
        waits again, a finished run is recorded as finished."""
        job = claim.job
        progress = turn_progress(records, job.id)
        asked = [call for call in progress.unanswered_calls if call.name == ASK_USER]
        if asked:
            call = asked[0]
            if job.user_answer is None:  # the worker died between asking and pausing
                question = str(call.arguments.get("question", ""))
                await self.db.jobs.pause(claim, question, _state(job, records, 0.0))
                return JobStatus.WAITING_FOR_USER
            transcript.append(
                tool_result_record(
                    int(time.time() * 1000), job.id, call, job.user_answer, is_error=False
                )
            )
            await transcript.checkpoint(clear_answer=True)
            await self.db.logs.add(job.id, f"User answered: {job.user_answer}", claim=claim)
            return None
        if job.user_answer is not None:  # answered in an earlier run that died after it
            await transcript.checkpoint(clear_answer=True)
        answer = _final_answer(records, job.id)
        if answer is not None:
            return await self._ended(claim, TurnOutcome(answer, ended_by="finish"), {}, transcript)
        if progress.done:
            finals = [sent.text for sent in progress.outgoing if sent.final]
            outcome = TurnOutcome(finals[-1] if finals else "", progress.failed)
            return await self._ended(claim, outcome, {}, transcript)
        return None

    async def _ended(
        self,
        claim: Claim,
        outcome: TurnOutcome,
        state: dict[str, Any],
        transcript: JobTranscript,
    ) -> JobStatus:
        """The job's ending, written with what its transcript still holds unwritten."""
        if outcome.ended_by == "ask":
            await transcript.checkpoint()
            await self.db.jobs.pause(claim, outcome.text, state, log="Waiting for the user")
            return JobStatus.WAITING_FOR_USER
        if outcome.failed or not outcome.text.strip():
            error = outcome.text if outcome.failed else "the model gave an empty answer"
            await self.db.jobs.finish(
                claim,
                JobStatus.FAILED,
                error=error,
                log=f"Job failed: {error}",
                checkpoint=transcript.take(),
            )
            return JobStatus.FAILED
        await self.db.jobs.finish(
            claim,
            JobStatus.COMPLETED,
            result=outcome.text,
            log="Job completed",
            checkpoint=transcript.take(),
        )
        return JobStatus.COMPLETED


def _final_answer(records: Sequence[HistoryRecord], job_id: str) -> str | None:
    for record in reversed(records):
        if (
            isinstance(record, ToolResultRecord)
            and record.messageId == job_id
            and record.toolName == FINAL_ANSWER
            and not record.output.isError
        ):
            return record.output.text
    return None


def _ran_s(job: Job) -> float:
    state = job.execution_state or {}
    ran = state.get("run_seconds", 0)
    return float(ran) if isinstance(ran, int | float) else 0.0


def _state(job: Job, records: Sequence[HistoryRecord], ran_s: float) -> dict[str, Any]:
    """Seed 002's ``execution_state``; the conversation itself is in ``job_records``."""
    previous = job.execution_state or {}
    resumed = previous.get("resumed_count", -1)
    return {
        "checkpoint": "waiting_for_input",
        "context": {"variables": {}, "packages_installed": [], "records": len(records)},
        "sandbox_id": None,
        "resumed_count": (resumed if isinstance(resumed, int) else -1) + 1,
        "last_checkpoint_at": datetime.now(UTC).isoformat(),
        "run_seconds": _ran_s(job) + ran_s,
    }


def job_runner(
    db: JobDatabase,
    providers: Callable[[str | None], ProviderRouter],
    sandbox: Sandbox,
    workroot: Path,
    settings: JobSettings,
    egress: EgressProxy | None = None,
) -> JobRunner:
    """A runner with the limits ``settings.jobs`` sets (the engine's and ``claybot worker``'s);
    ``egress`` is the default proxy unless a test gives its own."""
    limits = ResourceLimits(
        cpu_s=DEFAULT_LIMITS.cpu_s,
        memory_bytes=settings.python_memory_mb * 1024 * 1024,
        file_size_bytes=settings.max_file_bytes,
        processes=DEFAULT_LIMITS.processes,
    )
    return JobRunner(
        db,
        providers,
        sandbox.runner(JOBS_SANDBOX_OWNER, SandboxConfig("auto", limits)),
        workroot,
        RunLimits(max_iterations=settings.max_iterations),
        egress,
    )

"""The ``engine`` runner: the objective runs as a turn of an engine agent.

Each proactive agent has its own engine agent (descriptor ``cron{id:
"proactive-<id>"}``). A run resets its context first, so every run starts
fresh like ``claude -p``, then posts the objective through the agent's durable
inbox and waits for the turn. Each message the turn sends is streamed as output;
the turn's history records are the raw ``.jsonl``. Works wherever the engine has
an inference provider, with no Claude CLI installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from claybot.agents.descriptors import CronDescriptor
from claybot.agents.records import AssistantMessageRecord, parse_record
from claybot.agents.system import AgentSystem, EngineStopping
from claybot.agents.turn import Turn
from claybot.proactive.runner import RunOutcome, RunRequest, RunSink

ABORT_WAIT_S = 5.0
HISTORY_LIMIT = 1000


def engine_agent_descriptor(proactive_id: str) -> CronDescriptor:
    return CronDescriptor(id=f"proactive-{proactive_id}")


class EngineRunner:
    def __init__(self, agents: AgentSystem) -> None:
        self._agents = agents

    async def run(self, request: RunRequest, sink: RunSink) -> RunOutcome:
        message_id = f"proactive:{request.execution_id}"
        text = f"Working directory: {request.cwd}\n\n{request.objective}"
        try:
            agent_id = await self._agents.resolve(engine_agent_descriptor(request.agent_id))
            await self._agents.reset(agent_id)
            # The owner wrote the objective: it is the turn's user message, not a notice.
            turn = await self._agents.submit(agent_id, text, message_id=message_id)
        except EngineStopping:
            return RunOutcome("failure", None, "the engine is shutting down")
        streamed = asyncio.create_task(_stream(turn, sink))
        timed_out = False
        try:
            outcome = await turn.outcome(request.timeout_s)
        except TimeoutError:
            timed_out = True
            self._agents.abort(agent_id)
            with contextlib.suppress(TimeoutError):
                outcome = await turn.outcome(ABORT_WAIT_S)
        except asyncio.CancelledError:
            self._agents.abort(agent_id)
            streamed.cancel()
            raise
        # Every message the turn sent reaches the sink before the run ends.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ABORT_WAIT_S):
                await asyncio.shield(streamed)
        streamed.cancel()
        records = await self._turn_records(agent_id, message_id)
        for record in records:
            await sink.raw(json.dumps(record, ensure_ascii=False).encode() + b"\n")
        if timed_out:
            return RunOutcome("timeout", None, f"timed out after {request.timeout_s:g} s")
        if not any(_is_final_answer(record) for record in records):
            return RunOutcome("failure", None, "the turn ended without an answer")
        if outcome.failed:
            return RunOutcome("failure", None, (outcome.text or "the turn failed")[:300])
        return RunOutcome("success", 0)

    async def _turn_records(self, agent_id: str, message_id: str) -> list[dict[str, Any]]:
        page = await self._agents.histories.page(
            agent_id, after=None, before=None, limit=HISTORY_LIMIT
        )
        return [r for r in page.records if r.get("messageId") == message_id]


async def _stream(turn: Turn, sink: RunSink) -> None:
    async for message in turn.replies():
        if message.text:
            await sink.text(message.text + "\n")


def _is_final_answer(raw: dict[str, Any]) -> bool:
    record = parse_record(raw)
    return isinstance(record, AssistantMessageRecord) and record.final

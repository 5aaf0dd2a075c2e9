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
from claybot.agents.system import AgentSystem, EngineStopping
from claybot.kernel.events import Event, EventBus
from claybot.proactive.runner import RunOutcome, RunRequest, RunSink

ABORT_WAIT_S = 5.0
HISTORY_LIMIT = 1000


def engine_agent_descriptor(proactive_id: str) -> CronDescriptor:
    return CronDescriptor(id=f"proactive-{proactive_id}")


class EngineRunner:
    def __init__(self, agents: AgentSystem, events: EventBus) -> None:
        self._agents = agents
        self._events = events

    async def run(self, request: RunRequest, sink: RunSink) -> RunOutcome:
        message_id = f"proactive:{request.execution_id}"
        try:
            agent_id = await self._agents.resolve(engine_agent_descriptor(request.agent_id))
            await self._agents.reset(agent_id)
        except EngineStopping:
            return RunOutcome("failure", None, "the engine is shutting down")
        texts: asyncio.Queue[str] = asyncio.Queue()

        def on_event(event: Event) -> None:
            if event.type != "agent.outgoing" or event.payload.get("agentId") != agent_id:
                return
            message = event.payload.get("message")
            if isinstance(message, dict) and message.get("inReplyTo") == message_id:
                text = message.get("text")
                if isinstance(text, str) and text:
                    texts.put_nowait(text)

        remove_listener = self._events.add_listener(on_event)
        streamed = asyncio.create_task(_stream(texts, sink))
        try:
            return await self._turn(agent_id, message_id, request, sink)
        finally:
            remove_listener()
            await _drain(texts, streamed)

    async def _turn(
        self, agent_id: str, message_id: str, request: RunRequest, sink: RunSink
    ) -> RunOutcome:
        text = f"Working directory: {request.cwd}\n\n{request.objective}"
        try:
            # The owner wrote the objective: it is the turn's user message, not a system notice.
            item = await self._agents.post_to_agent(agent_id, text, message_id=message_id)
        except EngineStopping:
            return RunOutcome("failure", None, "the engine is shutting down")
        if item is None or item.processed is None:
            return RunOutcome("failure", None, "the engine refused the run's message")
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(item.processed), request.timeout_s)
        except TimeoutError:
            timed_out = True
            self._agents.abort(agent_id)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(item.processed), ABORT_WAIT_S)
        except asyncio.CancelledError:
            self._agents.abort(agent_id)
            raise
        records = await self._turn_records(agent_id, message_id)
        for record in records:
            await sink.raw(json.dumps(record, ensure_ascii=False).encode() + b"\n")
        if timed_out:
            return RunOutcome("timeout", None, f"timed out after {request.timeout_s:g} s")
        final = next(
            (
                r
                for r in reversed(records)
                if r.get("type") == "assistant_message" and r.get("final")
            ),
            None,
        )
        if final is None:
            return RunOutcome("failure", None, "the turn ended without an answer")
        if final.get("error"):
            return RunOutcome("failure", None, str(final.get("text") or "the turn failed")[:300])
        return RunOutcome("success", 0)

    async def _turn_records(self, agent_id: str, message_id: str) -> list[dict[str, Any]]:
        page = await self._agents.history(agent_id, after=None, before=None, limit=HISTORY_LIMIT)
        return [r for r in page.records if r.get("messageId") == message_id]


async def _stream(texts: asyncio.Queue[str], sink: RunSink) -> None:
    while True:
        text = await texts.get()
        await sink.text(text + "\n")
        texts.task_done()


async def _drain(texts: asyncio.Queue[str], streamed: asyncio.Task[None]) -> None:
    """Everything the turn sent reaches the sink before the run ends."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(texts.join(), ABORT_WAIT_S)
    streamed.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await streamed

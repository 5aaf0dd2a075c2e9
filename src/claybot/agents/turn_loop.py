"""The turn loop: one message's turn, over a transcript.

It appends ``user_message``, then loops: inference, an ``assistant_message``
(durable before its text goes out), tool calls and their ``tool_result``s, until
the model answers without tool calls (the ``final`` record), with a cap on tool
rounds and on each tool's output. After a crash the turn resumes from what the
transcript holds: text already produced is re-delivered under the same outgoing
ids instead of being generated again, and a tool call that was running when the
engine died is reported to the model as interrupted rather than silently re-run.
A message a tool sends (``send_file``'s files) goes out as a reply does: recorded
first, under the next outgoing id, and sent again after a crash only if unmarked.

The loop knows nothing of files, inboxes or connectors: it reads and appends
through a ``Transcript`` and answers through its ``TurnOwner`` (an agent today,
a job over database rows tomorrow), so both run the very same loop.

It is longer than most modules because the recovery rules above (resume, re-deliver,
report an interrupted tool) touch every step of the loop, and reading them apart
from the steps would hide which step each one guards.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import orjson
from pydantic import ValidationError

from claybot.agents.history import (
    TurnProgress,
    assistant_message_record,
    record_to_message,
    tool_result_record,
    turn_progress,
    user_message_record,
)
from claybot.agents.packed_context import PackedContext
from claybot.agents.ports import ProviderRouter
from claybot.agents.records import HistoryRecord
from claybot.agents.transcript import Transcript
from claybot.agents.turn import TurnOutcome
from claybot.agents.turn_stream import TurnStream
from claybot.files.placement import PlacedFile
from claybot.files.reference import FileReference
from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventSink
from claybot.permissions.model import Permissions
from claybot.providers.base import InferenceRequest, TokenUsage, ToolCall
from claybot.providers.router import InferenceFailed
from claybot.tools.base import AgentKind, ToolContext, ToolRegistry, ToolResult

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = "You are ClayBot, a helpful assistant. Answer clearly and briefly."
INTERRUPTED_TOOL = (
    "The engine restarted while this tool call was running, so it may or may not have "
    "completed. It was not run again; check its effect before retrying."
)
NOT_RUN_ASKING = "Not run: the turn stopped to wait for the user's answer."
NOT_RUN_FINISHED = "Not run: the task was already finished."
CUT_OFF_NOTICE = "[Cut off: the reply reached the model's output token limit.]"
# How much of a tool call's arguments and result its events carry (history has it all).
EVENT_SUMMARY_CHARS = 500
TOOL_LIMIT_NOTICE = "[Stopped: the tool limit of {rounds} rounds for one message was reached.]"


@dataclass(frozen=True)
class LoopLimits:
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_tool_iterations: int = 25
    tool_output_limit: int = 16_000
    max_context_messages: int = 200


class TurnOwner(Protocol):
    """Whom the loop works for: whose tools run, where replies go, who pays the tokens."""

    @property
    def id(self) -> str: ...

    @property
    def kind(self) -> AgentKind: ...

    @property
    def permissions(self) -> Permissions: ...

    async def reply(
        self,
        item_id: str,
        outgoing_id: str,
        text: str,
        *,
        final: bool,
        delivered_before: bool,
        files: tuple[FileReference, ...] = (),
    ) -> bool:
        """Hand a reply on (unless ``delivered_before``: then only note it); ``files``:
        what a tool sent (``send_file``), ``text`` their caption. False when it could not
        go out now (the engine is stopping): it is not marked delivered, and the owner
        keeps the turn's item pending so that the next start delivers it."""
        ...

    def count_usage(self, usage: TokenUsage, provider: str, model: str) -> None: ...


@dataclass
class TurnWork:
    """One message's turn, as the loop sees it."""

    item_id: str
    text: str
    origin: str | None
    transcript: Transcript
    # The inference context since the last reset; the loop extends it as it appends.
    context: PackedContext = field(default_factory=PackedContext)
    progress: TurnProgress | None = None  # what the transcript held of it after a crash
    # The message's file references, each with the path the agent reads it at.
    files: tuple[PlacedFile, ...] = ()


def _summary(text: str) -> str:
    """The start of a tool's arguments or result: enough for a one-line summary."""
    return text if len(text) <= EVENT_SUMMARY_CHARS else text[: EVENT_SUMMARY_CHARS - 1] + "…"


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[truncated: {len(text) - limit} more characters]"


def _to_context(work: TurnWork, record: HistoryRecord) -> None:
    message = record_to_message(record)
    if message is not None:  # a tool's message (send_file) is not context
        work.context.append(message)


def outcome_of(progress: TurnProgress) -> TurnOutcome:
    """How a finished turn ended, from what the transcript says about it."""
    finals = [sent.text for sent in progress.outgoing if sent.final]
    return TurnOutcome(finals[-1] if finals else "", progress.failed)


class TurnLoop:
    def __init__(
        self,
        *,
        providers: ProviderRouter,
        tools: ToolRegistry,
        events: EventSink,
        now_ms: Callable[[], int],
        limits: LoopLimits,
    ) -> None:
        self.providers = providers
        self.tools = tools
        self.events = events
        self.now_ms = now_ms
        self.limits = limits

    async def run(self, owner: TurnOwner, work: TurnWork) -> TurnOutcome:
        limits = self.limits
        progress = work.progress
        if progress is not None:
            for sent_before in progress.outgoing:
                await self._reply(
                    owner,
                    work,
                    sent_before.id,
                    sent_before.text,
                    final=sent_before.final,
                    files=sent_before.files,
                )
            if progress.done:
                return outcome_of(progress)
        if progress is None or not progress.started:
            self._append(
                work,
                user_message_record(
                    self.now_ms(), work.text, work.item_id, origin=work.origin, files=work.files
                ),
            )
        if progress is not None:
            for call in progress.unanswered_calls:
                self._append(
                    work,
                    tool_result_record(
                        self.now_ms(), work.item_id, call, INTERRUPTED_TOOL, is_error=True
                    ),
                )
        sent = len(progress.outgoing) if progress is not None else 0
        for iteration in range(limits.max_tool_iterations + 1):
            self._trim(work)
            # Read each round (cached by the registry): a tool may add tools (a job's
            # discover_tools).
            schemas = self.tools.schemas_for(owner.kind)
            request = InferenceRequest(
                messages=work.context.window(limits.max_context_messages),
                system_prompt=limits.system_prompt,
                tools=schemas,
            )
            stream = TurnStream(self.events, owner.id, work.item_id, f"{work.item_id}#{sent}")
            try:
                result = await self.providers.complete(request, stream)
            except InferenceFailed as exc:
                text = f"Inference failed: {exc}"
                await self._fail(owner, work, sent, text)
                return TurnOutcome(text, failed=True)
            finally:
                stream.flush()
            calls = result.tool_calls
            text = result.text
            if result.cut_off:
                text = (text + "\n\n" if text else "") + CUT_OFF_NOTICE
            if calls and iteration == limits.max_tool_iterations:
                # Out of rounds: the calls are not run, and the user is told why it stopped.
                calls = ()
                text = (text + "\n\n" if text else "") + TOOL_LIMIT_NOTICE.format(
                    rounds=limits.max_tool_iterations
                )
            outgoing: str | None = f"{work.item_id}#{sent}" if text else None
            record = assistant_message_record(
                self.now_ms(),
                text,
                work.item_id,
                tool_calls=calls,
                usage=result.usage,
                provider=result.provider_id,
                model=result.model,
                final=not calls,
                outgoing_id=outgoing,
            )
            if outgoing is None and not self._durable_first(calls):
                # Written with what its calls write first: an effect, a result, the end.
                self._append(work, record)
            else:
                await self._append_durably(work, record)
            owner.count_usage(result.usage, result.provider_id, result.model)
            if outgoing is not None:
                sent += 1
                # The last message of a turn needs no delivery mark: `done` follows at once.
                await self._reply(owner, work, outgoing, text, final=not calls, mark=bool(calls))
            if not calls:
                return TurnOutcome(text)
            for index, call in enumerate(calls):
                output = await self._run_tool(owner, call, work.item_id)
                if output.ends_turn == "ask":
                    # This call's result is the person's answer, appended when it comes.
                    await self._not_run(work, calls[index + 1 :], NOT_RUN_ASKING)
                    return TurnOutcome(output.text, ended_by="ask")
                if output.delivers is not None:
                    await self._deliver(owner, work, call, output, f"{work.item_id}#{sent}")
                    sent += 1
                else:
                    self._append(
                        work,
                        tool_result_record(
                            self.now_ms(), work.item_id, call, output.text, is_error=output.is_error
                        ),
                    )
                if output.ends_turn == "finish":
                    # No checkpoint: the owner commits these last records with the
                    # ending itself (a job: one write with its completion, not two).
                    self._append_not_run(work, calls[index + 1 :], NOT_RUN_FINISHED)
                    return TurnOutcome(output.text, ended_by="finish")
                await work.transcript.checkpoint()
        raise AssertionError("the last iteration never has tool calls")  # pragma: no cover

    def _durable_first(self, calls: Sequence[ToolCall]) -> bool:
        """Whether the answer making these calls must be durable before they run (see
        ``ToolDefinition.durable_first``); a final answer (no calls) always is."""
        if not calls:
            return True
        for call in calls:
            tool = self.tools.get(call.name)
            if tool is not None and tool.durable_first:
                return True
        return False  # only tools that write it with their effect, or none (unknown names)

    async def _not_run(self, work: TurnWork, calls: Sequence[ToolCall], text: str) -> None:
        """Every tool call needs a result, or the next request to the model is invalid."""
        self._append_not_run(work, calls, text)
        await work.transcript.checkpoint()

    def _append_not_run(self, work: TurnWork, calls: Sequence[ToolCall], text: str) -> None:
        for call in calls:
            self._append(
                work,
                tool_result_record(self.now_ms(), work.item_id, call, text, is_error=True),
            )

    async def close(
        self, owner: TurnOwner, work: TurnWork, text: str, *, failed: bool
    ) -> TurnOutcome:
        """End a turn that did not finish normally (stopped, or a bug) with a final record
        and message; if it finished just before, its own outcome stands."""
        progress = turn_progress(await work.transcript.read_turn(work.item_id), work.item_id)
        if progress.done:
            return outcome_of(progress)
        # Every tool call needs its result, or the next request to the model is invalid.
        for call in progress.unanswered_calls:
            self._append(
                work,
                tool_result_record(
                    self.now_ms(), work.item_id, call, f"Not completed: {text}", is_error=True
                ),
            )
        await self._fail(owner, work, len(progress.outgoing), text, error=failed)
        return TurnOutcome(text, failed)

    # -- steps -------------------------------------------------------------------------

    # Each append puts the record's context entry in the context: what a restarted
    # engine rebuilds from the same record (``record_to_message``), so the two agree.

    def _append(self, work: TurnWork, record: HistoryRecord) -> None:
        work.transcript.append(record)
        _to_context(work, record)

    async def _append_durably(self, work: TurnWork, record: HistoryRecord) -> None:
        await work.transcript.append_durably(record)
        _to_context(work, record)

    def _trim(self, work: TurnWork) -> None:
        """Keep memory bounded: what is beyond the window lives only in the transcript."""
        limit = self.limits.max_context_messages
        if len(work.context) > 2 * limit:
            work.context.trim(limit)

    async def _reply(
        self,
        owner: TurnOwner,
        work: TurnWork,
        outgoing_id: str,
        text: str,
        *,
        final: bool,
        mark: bool = True,
        files: tuple[FileReference, ...] = (),
    ) -> None:
        before = work.transcript.delivered(work.item_id, outgoing_id)
        sent = await owner.reply(
            work.item_id, outgoing_id, text, final=final, delivered_before=before, files=files
        )
        if mark and sent and not before:
            work.transcript.mark_delivered(work.item_id, outgoing_id)

    async def _deliver(
        self, owner: TurnOwner, work: TurnWork, call: ToolCall, output: ToolResult, outgoing_id: str
    ) -> None:
        """A message a tool sends (``send_file``), delivered as a reply is: its record and
        the call's result are durable before it goes out, so after a crash it is sent
        again only if it was not marked sent, and the call is never run again. The
        record is not context: the model knows it from the call's result."""
        delivery = output.delivers
        assert delivery is not None
        work.transcript.append(
            assistant_message_record(
                self.now_ms(),
                delivery.text,
                work.item_id,
                final=False,
                outgoing_id=outgoing_id,
                files=delivery.files,
                tool_call_id=call.id,
            )
        )
        await self._append_durably(
            work,
            tool_result_record(
                self.now_ms(), work.item_id, call, output.text, is_error=output.is_error
            ),
        )
        await self._reply(
            owner, work, outgoing_id, delivery.text, final=False, files=delivery.files
        )

    async def _fail(
        self, owner: TurnOwner, work: TurnWork, sent: int, text: str, *, error: bool = True
    ) -> None:
        outgoing_id = f"{work.item_id}#{sent}"
        await self._append_durably(
            work,
            assistant_message_record(
                self.now_ms(), text, work.item_id, final=True, outgoing_id=outgoing_id, error=error
            ),
        )
        if error:
            self.events.emit(
                EventType.AGENT_ERROR,
                {"agentId": owner.id, "messageId": work.item_id, "error": text},
            )
        await self._reply(owner, work, outgoing_id, text, final=True, mark=False)

    async def _run_tool(self, owner: TurnOwner, call: ToolCall, message_id: str) -> ToolResult:
        """Run one call, announced (``agent.tool_call``) and summed up (``agent.tool_result``)
        on the event stream for whoever watches the conversation."""
        self.events.emit(
            EventType.AGENT_TOOL_CALL,
            {
                "agentId": owner.id,
                "messageId": message_id,
                "callId": call.id,
                "name": call.name,
                "arguments": _summary(orjson.dumps(call.arguments).decode()),
            },
        )
        result = await self._run_tool_call(owner, call, message_id)
        self.events.emit(
            EventType.AGENT_TOOL_RESULT,
            {
                "agentId": owner.id,
                "messageId": message_id,
                "callId": call.id,
                "name": call.name,
                "isError": result.is_error,
                "text": _summary(result.text),
            },
        )
        return result

    async def _run_tool_call(self, owner: TurnOwner, call: ToolCall, message_id: str) -> ToolResult:
        tool = self.tools.get(call.name)
        if tool is None or owner.kind not in tool.visible_to:
            return ToolResult(f"Unknown tool {call.name!r}.", is_error=True)
        try:
            arguments = tool.parameters.model_validate(call.arguments)
        except ValidationError as exc:
            return ToolResult(f"Invalid arguments for {call.name!r}: {exc}", is_error=True)
        try:
            context = ToolContext(owner.id, owner.kind, message_id, owner.permissions)
            output = await tool.run(arguments, context)
        except Exception as exc:  # a failing tool is a result the model reads, never a dead agent
            log.warning(
                "tool raised",
                extra={"action": "tool.error", "tool": call.name, "agentId": owner.id},
                exc_info=True,
            )
            return ToolResult(f"{call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
        result = output if isinstance(output, ToolResult) else ToolResult(str(output))
        return replace(result, text=truncate(result.text, self.limits.tool_output_limit))

"""One agent: processes its inbox one item at a time.

A message turn appends ``user_message``, then loops: inference, an
``assistant_message`` (durable before its text goes out), tool calls and their
``tool_result``s, until the model answers without tool calls (the ``final``
record). After a crash the turn resumes from what history holds: text already
produced is re-delivered under the same outgoing ids instead of being generated
again, and a tool call that was running when the engine died is reported to the
model as interrupted rather than silently re-run.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import ValidationError

from claybot.agents.descriptors import AgentDescriptor, UserDescriptor, agent_kind
from claybot.agents.history import (
    Record,
    TurnProgress,
    assistant_message_record,
    build_context,
    context_window,
    record_to_message,
    reset_record,
    since_last_marker,
    tool_result_record,
    turn_progress,
    user_message_record,
)
from claybot.agents.inbox import AgentInbox, InboxItem, InboxLog
from claybot.agents.ports import Outbox, ProviderRouter
from claybot.agents.state import AgentState, ProviderSelection, TokenTotals
from claybot.agents.store import FileAgentStore
from claybot.agents.turn import TurnOutcome
from claybot.connectors.base import OutgoingMessage
from claybot.kernel.events import EventBus
from claybot.permissions.model import Permissions
from claybot.permissions.tags import PermissionTagError, apply_grant, parse_tag
from claybot.providers.base import ChatMessage, InferenceRequest, TokenUsage, ToolCall
from claybot.providers.router import InferenceFailed
from claybot.tools.base import ToolContext, ToolRegistry, ToolResult

log = logging.getLogger(__name__)

SEEN_IDS_LIMIT = 4096  # idempotent-retry window per agent
INTERRUPTED_TOOL = (
    "The engine restarted while this tool call was running, so it may or may not have "
    "completed. It was not run again; check its effect before retrying."
)
DEFAULT_SYSTEM_PROMPT = "You are ClayBot, a helpful assistant. Answer clearly and briefly."
STOPPED_TEXT = "Stopped."
TOOL_LIMIT_NOTICE = "[Stopped: the tool limit of {rounds} rounds for one message was reached.]"
UNEXPECTED_ERROR = "Unexpected error while processing this message; it was not completed."


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[truncated: {len(text) - limit} more characters]"


@dataclass
class AgentRuntime:
    """What every agent shares; built once by the engine."""

    store: FileAgentStore
    inbox_log: InboxLog
    events: EventBus
    providers: ProviderRouter
    tools: ToolRegistry
    outbox: Outbox
    now_ms: Callable[[], int]
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_tool_iterations: int = 25
    tool_output_limit: int = 16_000
    max_context_messages: int = 200
    default_permissions: Permissions = field(default_factory=Permissions)


class Agent:
    def __init__(
        self,
        agent_id: str,
        descriptor: AgentDescriptor,
        state: AgentState,
        records: list[Record],
        runtime: AgentRuntime,
    ) -> None:
        self.id = agent_id
        self.descriptor = descriptor
        self.kind = agent_kind(descriptor)
        self.state = state
        self.runtime = runtime
        self.context: list[ChatMessage] = build_context(since_last_marker(records))
        self.inbox = AgentInbox()
        self.running = False
        self.unloaded = False
        self.state_dirty = False
        self.last_active = 0.0
        self._seen: OrderedDict[str, None] = OrderedDict()
        for record in records:
            # Resets too: a connector's /reset delivered again must not reset twice.
            if record.get("type") in ("user_message", "reset") and record.get("messageId"):
                self.remember(str(record["messageId"]))
        self._resume: dict[str, TurnProgress] = {}
        self._current: asyncio.Task[TurnOutcome] | None = None
        self._stop_requested = False

    # -- message ids ---------------------------------------------------------

    def has_seen(self, message_id: str) -> bool:
        return message_id in self._seen

    def remember(self, message_id: str) -> None:
        self._seen[message_id] = None
        if len(self._seen) > SEEN_IDS_LIMIT:
            self._seen.popitem(last=False)

    def forget(self, message_id: str) -> None:
        self._seen.pop(message_id, None)

    def resume_from(self, item_id: str, progress: TurnProgress) -> None:
        """History shows this item's turn already started before a crash."""
        self._resume[item_id] = progress

    # -- processing ----------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.running or bool(len(self.inbox))

    def abort(self) -> bool:
        """Stop the running turn (``/stop``); False if no turn is running."""
        task = self._current
        if task is None or task.done():
            return False
        self._stop_requested = True
        task.cancel()
        return True

    async def process(self, item: InboxItem) -> TurnOutcome:
        """Run one item: a reset, or a message's whole turn (resumed if it had started)."""
        if item.kind == "reset":
            await self._reset(item)
            outcome = TurnOutcome("")
        else:
            outcome = await self._guarded_turn(item)
        self.state.updatedAt = self.runtime.now_ms()
        self.state_dirty = True
        return outcome

    async def _guarded_turn(self, item: InboxItem) -> TurnOutcome:
        """Run the turn in its own task so ``/stop`` can cancel it without stopping the engine."""
        self._stop_requested = False
        task = asyncio.ensure_future(self._turn(item))
        self._current = task
        try:
            return await task
        except asyncio.CancelledError:
            if not self._stop_requested:
                raise  # the engine is shutting down: the item stays pending
            return await self._end(item, STOPPED_TEXT, failed=False)
        except OSError:
            # The disk refused a write (full, failing): nothing more can be recorded now.
            # The item stays pending; the agent system resumes it from history later.
            raise
        except Exception:
            # A bug must not leave the user (or a parent agent) waiting forever.
            log.exception(
                "turn failed",
                extra={"action": "agent.turn_failed", "agentId": self.id, "itemId": item.id},
            )
            return await self._end(item, UNEXPECTED_ERROR, failed=True)
        finally:
            self._current = None
            self._stop_requested = False

    async def _end(self, item: InboxItem, text: str, *, failed: bool) -> TurnOutcome:
        """Close a turn that did not finish normally with a final record and message."""
        await self.runtime.store.writer.flush()
        records = await asyncio.to_thread(self.runtime.store.read_history, self.id, repair=False)
        progress = turn_progress(records, item.id)
        if progress.done:  # it finished just before the stop arrived
            return outcome_of(progress)
        # Every tool call needs its result, or the next request to the model is invalid.
        for call in progress.unanswered_calls:
            self._append(
                tool_result_record(
                    self.runtime.now_ms(), item.id, call, f"Not completed: {text}", is_error=True
                )
            )
        await self._fail(item, len(progress.outgoing), text, error=failed)
        return TurnOutcome(text, failed)

    async def _reset(self, item: InboxItem) -> None:
        message = item.context.get("message")
        record = reset_record(
            self.runtime.now_ms(), item.id, message if isinstance(message, str) else None
        )
        await self.runtime.store.append_history(self.id, record)
        self.context = build_context([record])
        self.runtime.events.emit("agent.reset", {"agentId": self.id, "context": item.context})

    def _append(self, record: Record) -> None:
        self.runtime.store.append_history_nowait(self.id, record)
        message = record_to_message(record)
        if message is not None:
            self.context.append(message)

    async def _append_durable(self, record: Record) -> None:
        await self.runtime.store.append_history(self.id, record)
        message = record_to_message(record)
        if message is not None:
            self.context.append(message)

    async def _apply_grant(self, item: InboxItem) -> None:
        """A decided permission request: apply it and persist state before the turn runs."""
        grant = item.context.get("grant")
        if not isinstance(grant, dict) or not grant.get("approved"):
            return
        try:
            tag = parse_tag(str(grant.get("permission", "")))
        except PermissionTagError:
            log.error("ignoring a malformed grant", extra={"agentId": self.id, "itemId": item.id})
            return
        self.state.permissions = apply_grant(self.state.permissions, tag)
        self.state.updatedAt = self.runtime.now_ms()
        self.state_dirty = False
        await self.runtime.store.write_state(self.id, self.state)

    async def _turn(self, item: InboxItem) -> TurnOutcome:
        rt = self.runtime
        progress = self._resume.pop(item.id, None)
        await self._apply_grant(item)  # idempotent: also on a resumed turn
        if progress is not None:
            for outgoing_id, text, final in progress.outgoing:
                await self._deliver(item, outgoing_id, text, final=final)
            if progress.done:
                return outcome_of(progress)
        if progress is None or not progress.started:
            origin = item.context.get("origin")
            self._append(
                user_message_record(
                    rt.now_ms(),
                    item.text,
                    item.id,
                    origin=origin if isinstance(origin, str) else None,
                )
            )
        if progress is not None:
            for call in progress.unanswered_calls:
                self._append(
                    tool_result_record(rt.now_ms(), item.id, call, INTERRUPTED_TOOL, is_error=True)
                )
        sent = len(progress.outgoing) if progress is not None else 0
        schemas = rt.tools.schemas_for(self.kind)
        for iteration in range(rt.max_tool_iterations + 1):
            self._trim_context()
            request = InferenceRequest(
                messages=context_window(self.context, rt.max_context_messages),
                system_prompt=rt.system_prompt,
                tools=schemas,
            )
            try:
                result = await rt.providers.complete(request)
            except InferenceFailed as exc:
                text = f"Inference failed: {exc}"
                await self._fail(item, sent, text)
                return TurnOutcome(text, failed=True)
            calls = result.tool_calls
            text = result.text
            if calls and iteration == rt.max_tool_iterations:
                # Out of rounds: the calls are not run, and the user is told why it stopped.
                calls = ()
                text = (text + "\n\n" if text else "") + TOOL_LIMIT_NOTICE.format(
                    rounds=rt.max_tool_iterations
                )
            outgoing: str | None = f"{item.id}#{sent}" if text else None
            await self._append_durable(
                assistant_message_record(
                    rt.now_ms(),
                    text,
                    item.id,
                    tool_calls=calls,
                    usage=result.usage,
                    provider=result.provider_id,
                    model=result.model,
                    final=not calls,
                    outgoing_id=outgoing,
                )
            )
            self._count_usage(result.usage, result.provider_id, result.model)
            if outgoing is not None:
                sent += 1
                # The last message of a turn needs no `sent` record: `done` follows at once.
                await self._deliver(item, outgoing, text, final=not calls, record_sent=bool(calls))
            if not calls:
                return TurnOutcome(text)
            for call in calls:
                output = await self._run_tool(call, item.id)
                self._append(
                    tool_result_record(
                        rt.now_ms(), item.id, call, output.text, is_error=output.is_error
                    )
                )
        raise AssertionError("the last iteration never has tool calls")  # pragma: no cover

    def _trim_context(self) -> None:
        """Keep memory bounded: what is beyond the window lives only in history."""
        limit = self.runtime.max_context_messages
        if len(self.context) > 2 * limit:
            self.context = context_window(self.context, limit)

    async def _fail(self, item: InboxItem, sent: int, text: str, *, error: bool = True) -> None:
        outgoing_id = f"{item.id}#{sent}"
        await self._append_durable(
            assistant_message_record(
                self.runtime.now_ms(),
                text,
                item.id,
                final=True,
                outgoing_id=outgoing_id,
                error=error,
            )
        )
        if error:
            self.runtime.events.emit(
                "agent.error", {"agentId": self.id, "messageId": item.id, "error": text}
            )
        await self._deliver(item, outgoing_id, text, final=True, record_sent=False)

    async def _run_tool(self, call: ToolCall, message_id: str) -> ToolResult:
        rt = self.runtime
        tool = rt.tools.get(call.name)
        if tool is None or self.kind not in tool.visible_to:
            return ToolResult(f"Unknown tool {call.name!r}.", is_error=True)
        try:
            arguments = tool.parameters.model_validate(call.arguments)
        except ValidationError as exc:
            return ToolResult(f"Invalid arguments for {call.name!r}: {exc}", is_error=True)
        try:
            context = ToolContext(self.id, self.kind, message_id, self.state.permissions)
            output = await tool.run(arguments, context)
        except Exception as exc:  # a failing tool is a result the model reads, never a dead agent
            log.warning(
                "tool raised",
                extra={"action": "tool.error", "tool": call.name, "agentId": self.id},
                exc_info=True,
            )
            return ToolResult(f"{call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
        result = output if isinstance(output, ToolResult) else ToolResult(str(output))
        return ToolResult(truncate(result.text, rt.tool_output_limit), result.is_error)

    async def _deliver(
        self,
        item: InboxItem,
        outgoing_id: str,
        text: str,
        *,
        final: bool,
        record_sent: bool = True,
    ) -> None:
        rt = self.runtime
        message = outgoing_message(self.descriptor, self.id, item.id, outgoing_id, text, final)
        item.turn.replied(message)
        if rt.inbox_log.already_sent(item, outgoing_id):
            return
        rt.events.emit("agent.outgoing", {"agentId": self.id, "message": message.to_dict()})
        await rt.outbox.deliver(message)
        if record_sent:
            rt.inbox_log.mark_sent(item, outgoing_id)

    def _count_usage(self, usage: TokenUsage, provider: str, model: str) -> None:
        totals = self.state.tokens
        self.state.tokens = TokenTotals(
            input=totals.input + usage.input,
            output=totals.output + usage.output,
            cacheRead=totals.cacheRead + usage.cache_read,
            cacheWrite=totals.cacheWrite + usage.cache_write,
            total=totals.total + usage.total,
        )
        if provider:
            self.state.provider = ProviderSelection(providerId=provider, model=model or None)


def outcome_of(progress: TurnProgress) -> TurnOutcome:
    """How a finished turn ended, from what history says about it."""
    finals = [text for _, text, final in progress.outgoing if final]
    return TurnOutcome(finals[-1] if finals else "", progress.failed)


def outgoing_message(
    descriptor: AgentDescriptor,
    agent_id: str,
    item_id: str,
    outgoing_id: str,
    text: str,
    final: bool,
) -> OutgoingMessage:
    """A reply of the turn of ``item_id``: to the conversation a user agent belongs to;
    a background agent's has no connector (its clients follow the events)."""
    if isinstance(descriptor, UserDescriptor):
        return OutgoingMessage(
            id=outgoing_id,
            agent_id=agent_id,
            connector=descriptor.connector,
            user_id=descriptor.userId,
            channel_id=descriptor.channelId,
            text=text,
            in_reply_to=item_id,
            final=final,
        )
    return OutgoingMessage(outgoing_id, agent_id, "", "", "", text, item_id, final)

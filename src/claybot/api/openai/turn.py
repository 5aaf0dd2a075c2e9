"""One request's turn, answered as OpenAI does: a ChatCompletion, or a stream of chunks.

The turn runs in the agent like any connector's (``Turn``, the runtime's front door,
says when it ends and holds its replies); what the client sees of it besides the
text comes from two places:

- **Live**, from the event bus (a synchronous listener, registered before the message
  is posted so nothing is missed): ``agent.delta`` (the text as the model writes it),
  ``agent.tool_call`` and ``agent.tool_result``, ``provider.fallback`` (what was
  streamed of the reply is void, the next provider starts again), and
  ``agent.outgoing`` (a reply's final text: whatever of it was not streamed yet is
  sent then, so a turn that emits no deltas streams each reply whole).
- **Afterwards**, from the agent's history: every tool call with its arguments and
  result, and the token usage of the turn's model calls. These go in the
  ``claybot`` extension of the answer (the SDKs keep unknown fields: ``model_extra``),
  never as OpenAI ``tool_calls``, which a client would try to run itself.

A reply is one OpenAI message: a turn's replies (text written before its tool calls,
then the answer) are joined by a blank line, in a completion and in a stream alike.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from claybot.agents.system import AgentSystem
from claybot.agents.turn import Turn, TurnOutcome
from claybot.api.openai.conversation import TURN_SEPARATOR
from claybot.api.openai_errors import openai_error
from claybot.kernel.errors import ClayError
from claybot.kernel.event_types import EventType
from claybot.kernel.events import Event, EventBus
from claybot.kernel.sse import LF, sse_comment, sse_frame
from claybot.wire.openai import (
    AssistantMessage,
    ChatCompletion,
    Choice,
    CompletionUsage,
    TurnExtension,
)

PING_S = 15.0  # a comment line on a quiet stream, so proxies keep it open
# Said in the content where a provider failed mid-reply: what it streamed is void,
# and the next provider's reply follows (the stream cannot take text back).
FALLBACK_MARK = "\n\n[The model failed mid-answer; another one answers:]\n\n"
HISTORY_LIMIT = 1_000_000  # the whole history: the engine reads the file whole anyway
DONE = sse_frame(b"[DONE]", eol=LF)
PING = sse_comment("ping", eol=LF)

_WATCHED = frozenset(
    {
        EventType.AGENT_DELTA,
        EventType.AGENT_TOOL_CALL,
        EventType.AGENT_TOOL_RESULT,
        EventType.PROVIDER_FALLBACK,
    }
)


class ReplyTimeout(ClayError):
    code = "reply_timeout"
    status = 504

    def __init__(self, agent_id: str, timeout_s: float) -> None:
        super().__init__(
            f"agent {agent_id} has not answered within {timeout_s:g} s (settings: "
            "chat.replyTimeoutS). It goes on working and its reply will be in its history; "
            "resending this conversation unchanged gets that reply once it is there, "
            "without saying the message again (a conversation's first message: only with "
            "the same Idempotency-Key)"
        )


class TurnWatch:
    """The live events of one turn (its message id), kept as they are emitted.

    The stream that reads it closes it; should that stream never run (a client gone
    before the response started), the watch closes itself with the turn's last reply.
    """

    def __init__(self, events: EventBus, message_id: str) -> None:
        self._message_id = message_id
        self._seen: list[Event] = []
        self._news = asyncio.Event()
        self._remove = events.add_listener(self._on_event)
        self._closed = False

    def _on_event(self, event: Event) -> None:
        payload = event.payload
        if event.type == EventType.AGENT_OUTGOING:
            message = payload.get("message")
            about = message.get("inReplyTo") if isinstance(message, Mapping) else None
        elif event.type in _WATCHED:
            about = payload.get("messageId")
        else:
            return
        if about == self._message_id:
            self._seen.append(event)
            self._news.set()
            if event.type == EventType.AGENT_OUTGOING and payload["message"].get("final"):
                # Not now: the bus is iterating its listeners.
                asyncio.get_running_loop().call_soon(self.close)

    def take(self) -> list[Event]:
        taken, self._seen = self._seen, []
        self._news.clear()
        return taken

    async def news(self) -> None:
        await self._news.wait()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._remove()


class StreamedText:
    """What a stream has sent of each reply (by outgoing id), so that a reply's final
    text completes it rather than repeating it."""

    def __init__(self) -> None:
        self._sent: dict[str, str] = {}
        self._final: set[str] = set()
        self._any = False

    def _opening(self, outgoing_id: str) -> str:
        """The separator before a reply's first text, if an earlier reply said something."""
        if outgoing_id in self._sent:
            return ""
        self._sent[outgoing_id] = ""
        return TURN_SEPARATOR if self._any else ""

    def delta(self, outgoing_id: str, text: str) -> str:
        if outgoing_id in self._final or not text:
            return ""
        content = self._opening(outgoing_id) + text
        self._sent[outgoing_id] += text
        self._any = True
        return content

    def void(self) -> str:
        """A provider failed: what was streamed of the unfinished reply does not count."""
        voided = False
        for outgoing_id, sent in self._sent.items():
            if outgoing_id not in self._final and sent:
                self._sent[outgoing_id] = ""
                voided = True
        return FALLBACK_MARK if voided else ""

    def final(self, outgoing_id: str, text: str) -> str:
        if outgoing_id in self._final:
            return ""
        self._final.add(outgoing_id)
        opening = self._opening(outgoing_id)
        sent = self._sent[outgoing_id]
        self._sent[outgoing_id] = text
        # A streamed text that is not the reply's start (a provider changed): say it whole.
        rest = text[len(sent) :] if text.startswith(sent) else TURN_SEPARATOR + text
        if not rest:
            return ""
        self._any = True
        return opening + rest


@dataclass(frozen=True)
class Usage:
    prompt: int = 0
    completion: int = 0

    def to_openai(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
        }


@dataclass(frozen=True)
class TurnFacts:
    """What the agent's history says a finished turn did besides its text."""

    tool_calls: list[dict[str, Any]]
    usage: Usage


def turn_facts(records: Sequence[Mapping[str, Any]], message_id: str) -> TurnFacts:
    """The turn's tool calls (with their results) and token usage, from its records."""
    calls: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    prompt = completion = 0
    for record in records:
        if record.get("messageId") != message_id:
            continue
        if record.get("type") == "assistant_message":
            tokens = record.get("tokens")
            size = tokens.get("size") if isinstance(tokens, Mapping) else None
            if isinstance(size, Mapping):
                prompt += sum(int(size.get(k) or 0) for k in ("input", "cacheRead", "cacheWrite"))
                completion += int(size.get("output") or 0)
            for call in record.get("toolCalls") or []:
                entry: dict[str, Any] = {
                    "id": str(call.get("id", "")),
                    "name": str(call.get("name", "")),
                    "arguments": json.dumps(call.get("arguments") or {}),
                }
                calls.append(entry)
                by_id[entry["id"]] = entry
        elif record.get("type") == "tool_result":
            called = by_id.get(str(record.get("toolCallId")))
            output = record.get("output")
            if called is not None and isinstance(output, Mapping):
                called["result"] = {
                    "text": str(output.get("text", "")),
                    "isError": bool(output.get("isError")),
                }
    return TurnFacts(calls, Usage(prompt, completion))


def sse(data: Mapping[str, Any]) -> bytes:
    return sse_frame(json.dumps(data, separators=(",", ":")).encode(), eol=LF)


class ChatTurn:
    """The turn one request waits for: posted by it (``new_message``), or one ClayBot
    already held that the request repeats."""

    def __init__(
        self,
        agents: AgentSystem,
        turn: Turn,
        *,
        model: str,
        new_message: bool,
        watch: TurnWatch | None,
    ) -> None:
        self.agents = agents
        self.turn = turn
        self.model = model
        self.new_message = new_message
        # Only a turn this request posted is followed live: one that was already
        # under way has said things no listener saw, and its replies come in order
        # from the turn itself once it ends.
        self.watch = watch
        self.id = f"chatcmpl-{turn.id}"
        self.created = int(time.time())

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()

    # -- the whole answer ----------------------------------------------------------------

    async def complete(self, timeout_s: float) -> ChatCompletion:
        try:
            outcome = await self.turn.outcome(timeout_s)
        except TimeoutError:
            raise ReplyTimeout(self.turn.agent_id, timeout_s) from None
        finally:
            self.close()
        texts = [reply.text async for reply in self.turn.replies() if reply.text]
        content = TURN_SEPARATOR.join(texts) if texts else outcome.text
        facts = await self._facts()
        return ChatCompletion(
            id=self.id,
            object="chat.completion",
            created=self.created,
            model=self.model,
            choices=[
                Choice(
                    index=0,
                    message=AssistantMessage(role="assistant", content=content),
                    finish_reason="stop",
                )
            ],
            usage=CompletionUsage(**facts.usage.to_openai()),
            claybot=TurnExtension.model_validate(self._extension(outcome, facts)),
        )

    # -- the stream ---------------------------------------------------------------------

    async def stream(self, timeout_s: float, include_usage: bool) -> AsyncIterator[bytes]:
        """Chunks as the turn goes, the last with the extension, then ``[DONE]``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        text = StreamedText()
        ended = asyncio.ensure_future(self.turn.outcome())
        try:
            yield self._chunk({"role": "assistant", "content": ""})
            while not ended.done():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    late = ReplyTimeout(self.turn.agent_id, timeout_s)
                    _, body = openai_error(late.status, late.code, late.message, None)
                    yield sse_frame(body, eol=LF)
                    return
                if await self._news(ended, min(PING_S, remaining)):
                    for chunk in self._live(text):
                        yield chunk
                elif not ended.done() and deadline > loop.time():
                    yield PING
            for chunk in self._live(text):  # what came with the end
                yield chunk
            outcome = ended.result()
            async for reply in self.turn.replies():
                content = text.final(reply.id, reply.text)
                if content:
                    yield self._chunk({"content": content})
            facts = await self._facts()
            yield self._chunk({}, finish_reason="stop", claybot=self._extension(outcome, facts))
            if include_usage:
                yield sse({**self._frame(), "choices": [], "usage": facts.usage.to_openai()})
            yield DONE
        finally:
            ended.cancel()
            self.close()

    async def _news(self, ended: asyncio.Future[TurnOutcome], timeout_s: float) -> bool:
        """Until the watch has events or the turn ended (True), or ``timeout_s`` (False)."""
        if self.watch is None:
            await asyncio.wait({ended}, timeout=timeout_s)
            return ended.done()
        news: asyncio.Future[Any] = asyncio.ensure_future(self.watch.news())
        try:
            await asyncio.wait({news, ended}, timeout=timeout_s, return_when="FIRST_COMPLETED")
        finally:
            news.cancel()
        return news.done() or ended.done()

    def _live(self, text: StreamedText) -> list[bytes]:
        if self.watch is None:
            return []
        chunks: list[bytes] = []
        for event in self.watch.take():
            payload = event.payload
            if event.type == EventType.AGENT_DELTA:
                content = text.delta(str(payload["outgoingId"]), str(payload["text"]))
                if content:
                    chunks.append(self._chunk({"content": content}))
            elif event.type == EventType.AGENT_OUTGOING:
                message = payload["message"]
                content = text.final(str(message["id"]), str(message["text"]))
                if content:
                    chunks.append(self._chunk({"content": content}))
            elif event.type == EventType.AGENT_TOOL_CALL:
                call = {
                    "id": payload["callId"],
                    "name": payload["name"],
                    "arguments": payload["arguments"],
                }
                chunks.append(self._chunk({}, claybot={"toolCall": call}))
            elif event.type == EventType.AGENT_TOOL_RESULT:
                result = {
                    "id": payload["callId"],
                    "name": payload["name"],
                    "isError": payload["isError"],
                    "text": payload["text"],
                }
                chunks.append(self._chunk({}, claybot={"toolResult": result}))
            elif event.type == EventType.PROVIDER_FALLBACK:
                fallback = {key: payload.get(key) for key in ("from", "to", "reason")}
                delta = {"content": mark} if (mark := text.void()) else {}
                chunks.append(self._chunk(delta, claybot={"fallback": fallback}))
        return chunks

    # -- shapes -------------------------------------------------------------------------

    def _frame(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
        }

    def _chunk(
        self,
        delta: dict[str, Any],
        *,
        finish_reason: str | None = None,
        claybot: dict[str, Any] | None = None,
    ) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        chunk: dict[str, Any] = {**self._frame(), "choices": [choice]}
        if claybot is not None:
            chunk["claybot"] = claybot
        return sse(chunk)

    def _extension(self, outcome: TurnOutcome, facts: TurnFacts) -> dict[str, Any]:
        return {
            "agentId": self.turn.agent_id,
            "messageId": self.turn.id,
            "newMessage": self.new_message,
            "failed": outcome.failed,
            "toolCalls": facts.tool_calls,
        }

    async def _facts(self) -> TurnFacts:
        page = await self.agents.histories.page(
            self.turn.agent_id, after=None, before=None, limit=HISTORY_LIMIT
        )
        return turn_facts(page.records, self.turn.id)

"""A ``Turn``: one accepted inbox item and how its turn goes.

``AgentSystem.submit`` (and ``submit_many``, ``reset``) hand one back. Whoever
posted the item (a route, the cron or heartbeat scheduler, the subagent relay,
proactive's engine runner) waits on it instead of on events or callbacks:

- ``accepted()``: the item is durable (it raises if the write failed, and then
  nothing was accepted);
- ``replies()``: the turn's outgoing messages as they are produced (also those
  re-delivered when a turn resumes after a crash), ending with the turn;
- ``outcome(timeout)``: the last text and whether the turn failed.

A turn that already ended before anyone asked (a duplicate post of a finished
message, a run looked up after a restart) is answered from history: the
records hold every reply and the final answer, so no outcome is kept in memory
for callers that may never come.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from claybot.connectors.base import OutgoingMessage
from claybot.tools.base import TurnEnd


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended: its last text, and whether that was a failure."""

    text: str
    failed: bool = False
    # A tool ended the turn (a job's final answer or question). After "finish" the
    # turn's last records wait for the owner's own checkpoint, made with its ending.
    ended_by: TurnEnd | None = None
    # ``/stop`` cancelled the turn while it ran (known live only: history does not say).
    stopped: bool = False


# Reads what history says about a finished turn: its replies and its outcome.
TurnFromHistory = Callable[[], Awaitable[tuple[list[OutgoingMessage], TurnOutcome]]]


class Turn:
    """The handle of one inbox item; the agent runtime alone feeds it."""

    __slots__ = (
        "_durable",
        "_ended",
        "_history",
        "_outcome",
        "_replies",
        "_wakeup",
        "agent_id",
        "duplicate",
        "id",
    )

    def __init__(
        self,
        agent_id: str,
        item_id: str,
        *,
        durable: asyncio.Future[None] | None = None,
        duplicate: bool = False,
        history: TurnFromHistory | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.id = item_id
        # True when the message id was accepted before: this handle follows that item.
        self.duplicate = duplicate
        self._durable = durable
        self._history = history
        # The future exists only once someone waits: most turns end unobserved.
        self._ended: asyncio.Future[TurnOutcome] | None = None
        self._outcome: TurnOutcome | None = None
        self._replies: list[OutgoingMessage] = []
        self._wakeup: asyncio.Event | None = None

    # -- what posters use -----------------------------------------------------------

    async def accepted(self) -> None:
        """Until the item is on disk; raises what the write raised."""
        if self._durable is not None:
            await asyncio.shield(self._durable)

    # A timeout argument rather than asyncio.timeout() around the call: waiting a
    # while and then reporting "still running" is what every caller does.
    async def outcome(self, timeout: float | None = None) -> TurnOutcome:  # noqa: ASYNC109
        """Until the turn ends (``TimeoutError`` after ``timeout`` seconds)."""
        if self._history is not None:
            await self._load_history()
        ended = self._ended_future()
        async with asyncio.timeout(timeout):
            return await asyncio.shield(ended)

    async def replies(self) -> AsyncIterator[OutgoingMessage]:
        """Every outgoing message of the turn, from its first, as it is produced."""
        if self._history is not None:
            await self._load_history()
        ended = self._ended_future()
        seen = 0
        while True:
            while seen < len(self._replies):
                seen += 1
                yield self._replies[seen - 1]
            if ended.done():
                return
            if self._wakeup is None:
                self._wakeup = asyncio.Event()
            wakeup = self._wakeup
            waiter: asyncio.Future[Any] = asyncio.ensure_future(wakeup.wait())
            try:
                await asyncio.wait({waiter, ended}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
            if wakeup.is_set():
                wakeup.clear()

    # -- what the runtime does --------------------------------------------------------

    def bind(self, durable: asyncio.Future[None]) -> None:
        self._durable = durable

    def replied(self, message: OutgoingMessage) -> None:
        self._replies.append(message)
        if self._wakeup is not None:
            self._wakeup.set()

    def ended(self, outcome: TurnOutcome) -> None:
        if self._outcome is not None:
            return
        self._outcome = outcome
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(outcome)

    def follower(self) -> Turn:
        """Another handle on this item, for a poster whose message id was seen before."""
        twin = Turn(self.agent_id, self.id, durable=self._durable, duplicate=True)
        twin._ended = self._ended_future()
        twin._replies = self._replies  # the same list: both see every reply
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        twin._wakeup = self._wakeup
        return twin

    def _ended_future(self) -> asyncio.Future[TurnOutcome]:
        if self._ended is None:
            self._ended = asyncio.get_running_loop().create_future()
            if self._outcome is not None:
                self._ended.set_result(self._outcome)
        return self._ended

    async def _load_history(self) -> None:
        history, self._history = self._history, None
        assert history is not None
        replies, outcome = await history()
        for message in replies:
            self.replied(message)
        self.ended(outcome)

""" "typing…" in a chat while messages posted from it wait for their answer.

Telegram shows a chat action for about five seconds, so it is repeated until
the turn's last message goes out. A turn that ends without a message never
says so to the connector, so the indicator also gives up after ``max_s``.
Failures to send the action are ignored: it is decoration.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

TYPING_INTERVAL_S = 4.0
TYPING_MAX_S = 120.0


@dataclass
class _Chat:
    waiting: set[str] = field(default_factory=set)  # inbound message ids not answered yet
    until: float = 0.0
    task: asyncio.Task[None] | None = None


class TypingStatus:
    def __init__(
        self,
        send_typing: Callable[[int], Awaitable[object]],
        *,
        interval_s: float = TYPING_INTERVAL_S,
        max_s: float = TYPING_MAX_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send_typing = send_typing
        self._interval_s = interval_s
        self._max_s = max_s
        self._clock = clock
        self._chats: dict[int, _Chat] = {}

    def waiting(self, chat_id: int, message_id: str) -> None:
        chat = self._chats.setdefault(chat_id, _Chat())
        chat.waiting.add(message_id)
        chat.until = self._clock() + self._max_s
        if chat.task is None:
            chat.task = asyncio.create_task(self._run(chat_id, chat), name=f"typing-{chat_id}")

    def answered(self, chat_id: int, message_id: str | None) -> None:
        """The turn for ``message_id`` sent its last message (``None``: every turn ended)."""
        chat = self._chats.get(chat_id)
        if chat is None:
            return
        if message_id is None:
            chat.waiting.clear()
        else:
            chat.waiting.discard(message_id)
        if not chat.waiting:
            self._end(chat_id)

    async def close(self) -> None:
        tasks = [chat.task for chat in self._chats.values() if chat.task is not None]
        self._chats.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _end(self, chat_id: int) -> None:
        chat = self._chats.pop(chat_id, None)
        if chat is not None and chat.task is not None:
            chat.task.cancel()

    async def _run(self, chat_id: int, chat: _Chat) -> None:
        try:
            while chat.waiting and self._clock() < chat.until:
                with contextlib.suppress(Exception):
                    await self._send_typing(chat_id)
                await asyncio.sleep(self._interval_s)
        finally:
            if self._chats.get(chat_id) is chat:
                del self._chats[chat_id]

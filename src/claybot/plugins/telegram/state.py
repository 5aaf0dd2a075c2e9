"""What the Telegram connector keeps across restarts, in its plugin data folder.

``state.json``: the polling offset (the first update not yet handled); per
open permission prompt, the message that shows it (so it can be edited once
decided, also after a restart); and the parts of outgoing messages with files
sent lately (so a message the engine delivers again after a restart uploads
nothing twice). Written atomically.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from claybot.plugin_api import atomic_write_json

log = logging.getLogger(__name__)

MAX_PROMPTS = 1000  # open prompts remembered; older ones are only not edited
MAX_PARTS = 1000  # sent parts remembered; a redelivery comes right after a restart


class TelegramState:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._prompts: dict[str, tuple[int, int]] = {}
        self._parts: dict[str, None] = {}  # insertion-ordered: the oldest goes first
        self._lock = asyncio.Lock()

    def load(self) -> None:
        try:
            data: Any = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            # Written atomically, so this is damage from outside; Telegram re-sends what
            # is not confirmed and the engine drops messages it already has.
            log.warning(
                "unreadable telegram state; polling starts over",
                extra={"action": "telegram.state_unreadable", "error": type(exc).__name__},
            )
            return
        if not isinstance(data, dict):
            return
        offset = data.get("offset")
        self.offset = offset if isinstance(offset, int) and offset >= 0 else 0
        prompts = data.get("prompts")
        if isinstance(prompts, dict):
            for request_id, where in prompts.items():
                if (
                    isinstance(where, list)
                    and len(where) == 2
                    and all(isinstance(n, int) for n in where)
                ):
                    self._prompts[str(request_id)] = (where[0], where[1])
        parts = data.get("sentParts")
        if isinstance(parts, list):
            self._parts = {str(key): None for key in parts[-MAX_PARTS:]}

    async def _save(self) -> None:
        # The snapshot is taken under the lock: a write may never put back an older one.
        async with self._lock:
            data = {
                "offset": self.offset,
                "prompts": {key: list(value) for key, value in self._prompts.items()},
                "sentParts": list(self._parts),
            }
            await asyncio.to_thread(atomic_write_json, self.path, data, mode=0o600)

    async def set_offset(self, offset: int) -> None:
        if offset > self.offset:
            self.offset = offset
            await self._save()

    async def remember_prompt(self, request_id: str, chat_id: int, message_id: int) -> None:
        self._prompts[request_id] = (chat_id, message_id)
        while len(self._prompts) > MAX_PROMPTS:
            self._prompts.pop(next(iter(self._prompts)))
        await self._save()

    def prompt_message(self, request_id: str) -> tuple[int, int] | None:
        return self._prompts.get(request_id)

    async def forget_prompt(self, request_id: str) -> None:
        if self._prompts.pop(request_id, None) is not None:
            await self._save()

    def part_sent(self, key: str) -> bool:
        return key in self._parts

    async def remember_part(self, key: str) -> None:
        self._parts[key] = None
        while len(self._parts) > MAX_PARTS:
            self._parts.pop(next(iter(self._parts)))
        await self._save()

"""The Telegram connector: long polling in, HTML messages and approval buttons out.

Inbound: private chats of allowlisted users only. Each message is posted with
the id ``<chat>:<message>``, so an update delivered twice (or re-read after a
crash, before the saved offset moved past it) is accepted once by the engine.
The offset is saved only after the engine accepted the update. ``/reset`` and
``/stop`` are handled here; the engine never parses slash commands.

Outbound: markdown rendered to Telegram HTML, cut to Telegram's limit, with a
plain-text retry when Telegram rejects the markup. Permission prompts carry
Allow/Deny buttons and are edited in place once decided.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Message, Update
from telegram.constants import ParseMode
from telegram.error import BadRequest, Conflict, Forbidden, RetryAfter, TelegramError

from claybot.connectors.base import (
    InboundMessage,
    OutgoingMessage,
    PermissionAlreadyDecided,
    PermissionOutcome,
    PermissionPrompt,
)
from claybot.connectors.telegram.format import markdown_to_html
from claybot.connectors.telegram.split import split_markdown
from claybot.connectors.telegram.state import TelegramState
from claybot.engine.plugins.api import PluginApi

log = logging.getLogger(__name__)

CALLBACK_PREFIX = "perm"
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
RESET_TEXT = "Conversation reset. I have forgotten what we talked about."
STOPPED_TEXT = "Stopped."
NOTHING_RUNNING_TEXT = "Nothing is running."


def callback_data(approved: bool, request_id: str) -> str:
    return f"{CALLBACK_PREFIX}:{'allow' if approved else 'deny'}:{request_id}"


def parse_callback(data: str) -> tuple[bool, str] | None:
    parts = data.split(":", 2)
    if len(parts) != 3 or parts[0] != CALLBACK_PREFIX or parts[1] not in ("allow", "deny"):
        return None
    return parts[1] == "allow", parts[2]


def _is_parse_error(error: BadRequest) -> bool:
    return "parse entities" in str(error).lower() or "can't parse" in str(error).lower()


class TelegramConnector:
    def __init__(
        self,
        api: PluginApi[Any],
        bot: Bot,
        *,
        allowed_user_ids: frozenset[int],
        poll_timeout_s: int,
        state: TelegramState,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._api = api
        self._bot = bot
        self._allowed = allowed_user_ids
        self._poll_timeout_s = poll_timeout_s
        self._state = state
        self._sleep = sleep
        self._poller: asyncio.Task[None] | None = None
        self._webhook_cleared = False

    @property
    def id(self) -> str:
        return self._api.instance_id

    # -- lifecycle ------------------------------------------------------------------

    def start_polling(self) -> None:
        self._poller = asyncio.create_task(self._poll(), name=f"telegram-poll-{self.id}")

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None

    # -- inbound --------------------------------------------------------------------

    async def _poll(self) -> None:
        delay = BACKOFF_FIRST_S
        while True:
            try:
                updates = await self._bot.get_updates(
                    offset=self._state.offset,
                    timeout=self._poll_timeout_s,
                    allowed_updates=["message", "callback_query"],
                )
            except asyncio.CancelledError:
                raise
            except RetryAfter as exc:
                await self._sleep(
                    float(
                        exc.retry_after
                        if isinstance(exc.retry_after, int)
                        else exc.retry_after.total_seconds()
                    )
                )
                continue
            except Conflict:
                # Another consumer: a webhook (cleared once) or a second poller.
                if not self._webhook_cleared:
                    self._webhook_cleared = True
                    await self._try(self._bot.delete_webhook())
                    continue
                log.warning("telegram polling conflict", extra={"action": "telegram.conflict"})
                await self._sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)
                continue
            except TelegramError as exc:  # network trouble, timeouts, 5xx
                log.warning(
                    "telegram polling failed; retrying",
                    extra={"action": "telegram.poll_failed", "error": type(exc).__name__},
                )
                await self._sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)
                continue
            delay = BACKOFF_FIRST_S
            for update in updates:
                if update.update_id < self._state.offset:
                    continue  # delivered twice: already handled
                try:
                    await self._handle(update)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    # Not acknowledged: the update is read again after a back-off.
                    log.exception(
                        "handling a telegram update failed",
                        extra={"action": "telegram.update_failed", "updateId": update.update_id},
                    )
                    await self._sleep(delay)
                    break
                await self._state.set_offset(update.update_id + 1)

    async def _handle(self, update: Update) -> None:
        if update.callback_query is not None:
            await self._on_button(update)
            return
        message = update.message
        if message is None or message.text is None or message.from_user is None:
            return
        if message.chat.type != "private":
            return  # private chats only
        if message.from_user.id not in self._allowed:
            log.info(
                "ignoring a telegram user not on the allowlist",
                extra={"action": "telegram.not_allowed", "telegramUserId": message.from_user.id},
            )
            return
        user_id, chat_id = str(message.from_user.id), str(message.chat.id)
        command = message.text.strip().split(maxsplit=1)[0].split("@")[0].lower()
        if command == "/reset":
            await self._api.reset_conversation(user_id, chat_id)
            await self._send_text(message.chat.id, RESET_TEXT)
            return
        if command == "/stop":
            stopped = await self._api.stop_conversation(user_id, chat_id)
            if not stopped:
                await self._send_text(message.chat.id, NOTHING_RUNNING_TEXT)
            return  # a stopped turn answers "Stopped." itself
        await self._api.post_message(
            InboundMessage(
                connector=self.id,
                user_id=user_id,
                channel_id=chat_id,
                text=message.text,
                message_id=f"{chat_id}:{message.message_id}",
            )
        )

    async def _on_button(self, update: Update) -> None:
        query = update.callback_query
        assert query is not None
        if query.from_user.id not in self._allowed:
            await self._try(query.answer("Not allowed."))
            return
        parsed = parse_callback(query.data or "")
        if parsed is None:
            await self._try(query.answer())
            return
        approved, request_id = parsed
        try:
            outcome = await self._api.decide_permission(request_id, approved)
            answer = "Allowed." if outcome.approved else "Denied."
        except PermissionAlreadyDecided as exc:
            answer = f"Already {'allowed' if exc.outcome.approved else 'denied'}."
        except LookupError:
            answer = "This request is no longer known."
        await self._try(query.answer(answer))

    # -- outbound -------------------------------------------------------------------

    async def send(self, message: OutgoingMessage) -> None:
        if not message.text.strip():
            return
        await self._send_text(int(message.channel_id), message.text)

    async def _send_text(
        self, chat_id: int, text: str, reply_markup: InlineKeyboardMarkup | None = None
    ) -> Message | None:
        chunks = split_markdown(text, markdown_to_html)
        sent: Message | None = None
        for index, chunk in enumerate(chunks):
            markup = reply_markup if index == len(chunks) - 1 else None
            try:
                sent = await self._bot.send_message(
                    chat_id, markdown_to_html(chunk), parse_mode=ParseMode.HTML, reply_markup=markup
                )
            except BadRequest as exc:
                if not _is_parse_error(exc):
                    raise
                # Telegram rejected the markup: the same words, as plain text.
                sent = await self._bot.send_message(chat_id, chunk, reply_markup=markup)
        return sent

    # -- permission prompts -----------------------------------------------------------

    async def request_permission(self, prompt: PermissionPrompt) -> None:
        keyboard = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton(
                        "Allow", callback_data=callback_data(True, prompt.request_id)
                    ),
                    InlineKeyboardButton(
                        "Deny", callback_data=callback_data(False, prompt.request_id)
                    ),
                ]
            ]
        )
        sent = await self._send_text(int(prompt.channel_id), prompt.text(), keyboard)
        if sent is not None:
            await self._state.remember_prompt(prompt.request_id, sent.chat_id, sent.message_id)

    async def permission_decided(
        self, prompt: PermissionPrompt, outcome: PermissionOutcome
    ) -> None:
        where = self._state.prompt_message(prompt.request_id)
        if where is None:
            return
        if outcome.approved:
            verdict = "✅ Allowed"
        elif outcome.decided_by == "timeout":
            verdict = "⌛ No answer in time: denied"
        else:
            verdict = "❌ Denied"
        chat_id, message_id = where
        await self._try(
            self._bot.edit_message_text(
                f"{prompt.text()}\n\n{verdict}", chat_id=chat_id, message_id=message_id
            )
        )
        await self._state.forget_prompt(prompt.request_id)

    async def _try(self, call: Awaitable[Any]) -> None:
        """A cosmetic call (an answer, an edit): its failure must not stop anything."""
        try:
            await call
        except (BadRequest, Forbidden, TelegramError) as exc:
            log.info(
                "telegram call failed", extra={"action": "telegram.call_failed", "error": str(exc)}
            )

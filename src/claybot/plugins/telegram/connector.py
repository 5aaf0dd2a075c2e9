"""The Telegram connector: long polling in, HTML messages and approval buttons out.

Inbound: private chats of allowlisted users only. Each message is posted with
the id ``<chat>:<message>``, so an update delivered twice (or re-read after a
crash, before the saved offset moved past it) is accepted once by the engine;
a ``/reset`` is keyed the same way, so it resets once. The offset is saved only
after the engine accepted the update. ``/reset`` and ``/stop`` are handled here;
the engine never parses slash commands. A photo, document, voice note or audio
file is downloaded (``getFile``), stored through the plugin API and carried on the
message, its caption as the text; one too large is not downloaded, and the user
is told why.

Outbound: markdown rendered to Telegram HTML, cut to Telegram's limit, with a
plain-text retry when Telegram rejects the markup. A message with files uploads
each (a photo or a document, ``attachments.py``), the text as the first one's
caption, once per outgoing message also across a restart. Permission prompts
carry Allow/Deny buttons and are edited in place once decided.

It is longer than most modules because it is one connector contract (poll, send,
ask permission) over one Bot API session: the polling loop, its back-off and the
saved offset, files in and out, and the retries on Telegram's limits share the
same client and error rules; the rendering and attachments are split out already.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, InputFile, Message, Update
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    Conflict,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.warnings import PTBDeprecationWarning

from claybot.plugin_api import (
    Backoff,
    FileMissing,
    FileReference,
    FileRefused,
    InboundMessage,
    OutgoingMessage,
    PermissionAlreadyDecided,
    PermissionOutcome,
    PermissionPrompt,
    PluginApi,
)
from claybot.plugins.telegram.attachments import (
    TELEGRAM_DOWNLOAD_LIMIT_BYTES,
    Attachment,
    attachment_of,
    caption_and_rest,
    size_text,
    upload_kind,
)
from claybot.plugins.telegram.buttons import (
    CALLBACK_DATA_MAX_BYTES,
    callback_data,
    parse_callback,
    verdict_text,
)
from claybot.plugins.telegram.format import markdown_to_html
from claybot.plugins.telegram.split import TELEGRAM_LIMIT, split_markdown
from claybot.plugins.telegram.state import TelegramState
from claybot.plugins.telegram.typing_status import TYPING_INTERVAL_S, TypingStatus

log = logging.getLogger(__name__)

T = TypeVar("T")

BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
SEND_ATTEMPTS = 4  # a network blip must not lose a reply; the engine does not resend
RESET_TEXT = "Conversation reset. I have forgotten what we talked about."
NOTHING_RUNNING_TEXT = "Nothing is running."
TEXT_ONLY_TEXT = "I can only read text, photos, documents, voice notes and audio files for now."
REFUSED_TEXT = "The engine refused this message: {reason}"
TOO_LARGE_TEXT = "I could not take “{name}”: it is {size}, and the limit is {limit}."
FILE_REFUSED_TEXT = "I could not keep “{name}”: {reason}"
FILE_UNREADABLE_TEXT = "I could not download “{name}” from Telegram: {reason}"
FILE_GONE_TEXT = "A file I meant to send you (“{name}”) is no longer stored."
DOWNLOAD_TIMEOUT_S = 120.0  # reading a 20 MB file on a slow link
UPLOAD_TIMEOUT_S = 120.0


def _is_parse_error(error: BadRequest) -> bool:
    text = str(error).lower()
    return "parse entities" in text or "can't parse" in text


def _retry_after_s(error: RetryAfter) -> float:
    # PTB 22 warns on every read of ``retry_after`` while it moves to timedelta.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = error.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


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
        typing_interval_s: float = TYPING_INTERVAL_S,
    ) -> None:
        self._api = api
        self._bot = bot
        self._allowed = allowed_user_ids
        self._poll_timeout_s = poll_timeout_s
        self._state = state
        self._sleep = sleep
        self._poller: asyncio.Task[None] | None = None
        self._webhook_cleared = False
        self._typing = TypingStatus(self._send_typing, interval_s=typing_interval_s)

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
        await self._typing.close()

    # -- inbound --------------------------------------------------------------------

    async def _poll(self) -> None:
        # Two back-offs: a failing getUpdates, and an update the engine keeps refusing
        # (which must slow down too, although getUpdates succeeds in between).
        polling, handling = self._backoff(), self._backoff()
        while True:
            try:
                updates = await self._bot.get_updates(
                    offset=self._state.offset,
                    timeout=self._poll_timeout_s,
                    allowed_updates=["message", "callback_query"],
                )
            except RetryAfter as exc:
                await self._sleep(_retry_after_s(exc))
                continue
            except Conflict:
                # Another consumer: a webhook (cleared once) or a second poller.
                if not self._webhook_cleared:
                    self._webhook_cleared = True
                    log.info("clearing the webhook", extra={"action": "telegram.clear_webhook"})
                    await self._try(self._bot.delete_webhook())
                    continue
                log.warning(
                    "another client is polling this bot; stop it or use another token",
                    extra={"action": "telegram.conflict", "instanceId": self.id},
                )
                await self._sleep(polling.next_s())
                continue
            except InvalidToken:
                log.error(
                    "Telegram no longer accepts the bot token; set a new one with "
                    "`claybot auth set` and reload the plugin",
                    extra={"action": "telegram.token_rejected", "instanceId": self.id},
                )
                await self._sleep(polling.next_s())
                continue
            except Exception as exc:  # network trouble, timeouts, 5xx, an odd answer
                log.warning(
                    "telegram polling failed; retrying",
                    extra={"action": "telegram.poll_failed", "error": type(exc).__name__},
                )
                await self._sleep(polling.next_s())
                continue
            polling.reset()
            for update in updates:
                if update.update_id < self._state.offset:
                    continue  # delivered twice: already handled
                try:
                    await self._handle(update)
                except Exception:
                    # Not acknowledged: the update is read again after a back-off.
                    log.exception(
                        "handling a telegram update failed; it will be read again",
                        extra={"action": "telegram.update_failed", "updateId": update.update_id},
                    )
                    await self._sleep(handling.next_s())
                    break
                await self._state.set_offset(update.update_id + 1)
                handling.reset()

    def _backoff(self) -> Backoff:
        return Backoff(BACKOFF_FIRST_S, BACKOFF_MAX_S)

    async def _handle(self, update: Update) -> None:
        if update.callback_query is not None:
            await self._on_button(update)
            return
        message = update.message
        if message is None or message.from_user is None:
            return
        if message.chat.type != "private":
            return  # private chats only
        if message.from_user.id not in self._allowed:
            log.info(
                "ignoring a telegram user not on the allowlist",
                extra={"action": "telegram.not_allowed", "telegramUserId": message.from_user.id},
            )
            return
        chat_id = message.chat.id
        text = message.text or message.caption or ""
        attachment = attachment_of(message)
        if not text and attachment is None:
            await self._send_text(chat_id, TEXT_ONLY_TEXT)
            return
        user_id, channel_id = str(message.from_user.id), str(chat_id)
        command = text.strip().split(maxsplit=1)[0].split("@")[0].lower() if text.strip() else ""
        inbound_id = f"{chat_id}:{message.message_id}"
        if command == "/reset":
            # The confirmation goes out again on a repeat: the first may have been lost.
            await self._api.reset_conversation(user_id, channel_id, inbound_id)
            await self._send_text(chat_id, RESET_TEXT)
            return
        if command == "/stop":
            if not await self._api.stop_conversation(user_id, channel_id):
                await self._send_text(chat_id, NOTHING_RUNNING_TEXT)
            return  # a stopped turn answers "Stopped." itself
        files: tuple[FileReference, ...] = ()
        if attachment is not None:
            stored = await self._download(chat_id, attachment)
            if stored is None and not text.strip():
                return  # the user was told; nothing is left to pass on
            files = (stored,) if stored is not None else ()
        try:
            posted = await self._api.post_message(
                InboundMessage(
                    connector=self.id,
                    user_id=user_id,
                    channel_id=channel_id,
                    text=text,
                    message_id=inbound_id,
                    files=files,
                )
            )
        except ValueError as exc:
            # Refused for what it is (too large, say): it never will be accepted.
            await self._send_text(chat_id, REFUSED_TEXT.format(reason=exc))
            return
        if not posted.duplicate:
            self._typing.waiting(chat_id, posted.message_id)

    async def _download(self, chat_id: int, attachment: Attachment) -> FileReference | None:
        """The attachment, stored; None (the user told why) when it cannot be taken.

        A network failure is raised: the update is read again after a back-off.
        """
        limit = min(self._api.file_limit_bytes(), TELEGRAM_DOWNLOAD_LIMIT_BYTES)
        if attachment.size is not None and attachment.size > limit:
            await self._too_large(chat_id, attachment.name, attachment.size, limit)
            return None
        try:
            file = await self._retrying(lambda: self._bot.get_file(attachment.file_id))
        except BadRequest as exc:
            # Telegram's final word: "file is too big" past its own 20 MB, or a file
            # it no longer has. Waiting will not change it.
            await self._send_plain(
                chat_id, FILE_UNREADABLE_TEXT.format(name=attachment.name, reason=exc.message)
            )
            return None
        if file.file_size is not None and file.file_size > limit:
            await self._too_large(chat_id, attachment.name, file.file_size, limit)
            return None
        data = bytes(
            await self._retrying(
                lambda: file.download_as_bytearray(read_timeout=DOWNLOAD_TIMEOUT_S)
            )
        )
        if len(data) > limit:  # Telegram said nothing of its size, or said less
            await self._too_large(chat_id, attachment.name, len(data), limit)
            return None
        try:
            return await self._api.store_file(data, attachment.name)
        except FileRefused as exc:  # the store's quota is full
            await self._send_plain(
                chat_id, FILE_REFUSED_TEXT.format(name=attachment.name, reason=exc.message)
            )
            return None

    async def _too_large(self, chat_id: int, name: str, size: int, limit: int) -> None:
        log.info(
            "a telegram file is past the size limit; not downloaded",
            extra={"action": "telegram.file_too_large", "size": size, "limit": limit},
        )
        await self._send_plain(
            chat_id, TOO_LARGE_TEXT.format(name=name, size=size_text(size), limit=size_text(limit))
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
        shown = self._state.prompt_message(request_id)
        pressed_in = query.message.chat.id if query.message is not None else query.from_user.id
        if shown is not None and shown[0] != pressed_in:
            # Only the chat the prompt was shown in decides it.
            await self._try(query.answer("Not allowed."))
            return
        try:
            outcome = await self._api.decide_permission(request_id, approved)
        except PermissionAlreadyDecided as exc:
            answer = f"Already {'allowed' if exc.outcome.approved else 'denied'}."
        except LookupError:
            answer = "This request is no longer known."
        else:
            # The prompt itself is edited by permission_decided, which the engine calls.
            await self._try(query.answer("Allowed." if outcome.approved else "Denied."))
            return
        await self._try(query.answer(answer))
        # Buttons left on a prompt nobody can answer any more: take them away.
        if query.message is not None:
            await self._try(
                self._bot.edit_message_reply_markup(
                    chat_id=query.message.chat.id, message_id=query.message.message_id
                )
            )

    # -- outbound -------------------------------------------------------------------

    async def send(self, message: OutgoingMessage) -> None:
        chat_id = int(message.channel_id)
        if message.final:
            self._typing.answered(chat_id, message.in_reply_to)
        if message.files:
            await self._send_files(chat_id, message)
        elif message.text.strip():
            await self._send_text(chat_id, message.text)

    async def _send_files(self, chat_id: int, message: OutgoingMessage) -> None:
        caption, rest = caption_and_rest(message.text, markdown_to_html)
        # Each part is remembered once sent: a message the engine delivers again (a
        # restart before it marked the delivery) sends only what is missing.
        prefix = f"{message.agent_id}/{message.id}"
        captioned = False  # the caption goes with the first file that goes out
        for index, file in enumerate(message.files):
            key = f"{prefix}/{index}"
            if self._state.part_sent(key):
                captioned = True
                continue
            try:
                data = await self._api.read_file(file.id)
            except FileMissing:
                await self._send_plain(chat_id, FILE_GONE_TEXT.format(name=file.name))
                continue
            await self._upload(chat_id, file, data, None if captioned else caption)
            await self._state.remember_part(key)
            captioned = True
        if not captioned and caption is not None:  # no file went out: the words still do
            rest = f"{caption}\n\n{rest}" if rest.strip() else caption
        if rest.strip() and not self._state.part_sent(f"{prefix}/text"):
            await self._send_text(chat_id, rest)
            await self._state.remember_part(f"{prefix}/text")

    async def _upload(
        self, chat_id: int, file: FileReference, data: bytes, caption: str | None
    ) -> Message:
        if upload_kind(file.mimeType, len(data)) == "photo":
            try:
                return await self._upload_as(self._bot.send_photo, chat_id, file, data, caption)
            except BadRequest as exc:
                # Dimensions or a format sendPhoto refuses: the same file as a document.
                log.info(
                    "telegram refused a photo; sending it as a document",
                    extra={"action": "telegram.photo_refused", "error": exc.message},
                )
        return await self._upload_as(self._bot.send_document, chat_id, file, data, caption)

    async def _upload_as(
        self,
        method: Callable[..., Awaitable[Message]],
        chat_id: int,
        file: FileReference,
        data: bytes,
        caption: str | None,
    ) -> Message:
        def call(html: bool) -> Callable[[], Awaitable[Message]]:
            text = markdown_to_html(caption) if html and caption is not None else caption
            return lambda: method(
                chat_id,
                InputFile(data, filename=file.name),
                caption=text,
                parse_mode=ParseMode.HTML if html and caption is not None else None,
                write_timeout=UPLOAD_TIMEOUT_S,
            )

        try:
            return await self._retrying(call(html=True))
        except BadRequest as exc:
            if caption is None or not _is_parse_error(exc):
                raise
        # Telegram rejected the caption's markup: the same words, as plain text.
        return await self._retrying(call(html=False))

    async def _send_plain(self, chat_id: int, text: str) -> None:
        """A notice of ours, sent as it is written (a file name is no markdown)."""
        await self._retrying(lambda: self._bot.send_message(chat_id, text))

    async def _send_text(
        self, chat_id: int, text: str, reply_markup: InlineKeyboardMarkup | None = None
    ) -> Message | None:
        chunks = split_markdown(text, markdown_to_html)
        sent: Message | None = None
        for index, chunk in enumerate(chunks):
            markup = reply_markup if index == len(chunks) - 1 else None
            sent = await self._send_chunk(chat_id, chunk, markup)
        return sent

    async def _send_chunk(
        self, chat_id: int, chunk: str, markup: InlineKeyboardMarkup | None
    ) -> Message:
        try:
            return await self._retrying(
                lambda: self._bot.send_message(
                    chat_id, markdown_to_html(chunk), parse_mode=ParseMode.HTML, reply_markup=markup
                )
            )
        except BadRequest as exc:
            if not _is_parse_error(exc):
                raise
        # Telegram rejected the markup: the same words, as plain text.
        return await self._retrying(
            lambda: self._bot.send_message(chat_id, chunk, reply_markup=markup)
        )

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, again after a flood wait or a network error, a few times."""
        backoff = self._backoff()
        for _ in range(SEND_ATTEMPTS - 1):
            try:
                return await call()
            except BadRequest:
                raise  # a NetworkError subclass, but Telegram's final word
            except RetryAfter as exc:
                await self._sleep(_retry_after_s(exc))
            except NetworkError as exc:
                log.info(
                    "telegram send failed; retrying",
                    extra={"action": "telegram.send_retry", "error": type(exc).__name__},
                )
                await self._sleep(backoff.next_s())
        return await call()

    async def _send_typing(self, chat_id: int) -> None:
        await self._bot.send_chat_action(chat_id, ChatAction.TYPING)

    # -- permission prompts -----------------------------------------------------------

    async def request_permission(self, prompt: PermissionPrompt) -> None:
        allow, deny = (
            callback_data(True, prompt.request_id),
            callback_data(False, prompt.request_id),
        )
        if len(allow.encode()) > CALLBACK_DATA_MAX_BYTES:
            # No button can carry this id; the other ways to answer still work.
            await self._send_text(
                int(prompt.channel_id),
                f"{prompt.text()}\n\nAnswer with `claybot permissions allow "
                f"{prompt.request_id}` (or deny).",
            )
            return
        keyboard = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton("Allow", callback_data=allow),
                    InlineKeyboardButton("Deny", callback_data=deny),
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
        verdict = verdict_text(outcome)
        body = prompt.text()[: TELEGRAM_LIMIT - len(verdict) - 2]
        chat_id, message_id = where
        # Edited without reply_markup: the buttons disappear with the new text.
        await self._try(
            self._bot.edit_message_text(
                f"{body}\n\n{verdict}", chat_id=chat_id, message_id=message_id
            )
        )
        await self._state.forget_prompt(prompt.request_id)

    async def _try(self, call: Awaitable[Any]) -> None:
        """A cosmetic call (an answer, an edit): its failure must not stop anything."""
        try:
            await call
        except TelegramError as exc:
            log.info(
                "telegram call failed", extra={"action": "telegram.call_failed", "error": str(exc)}
            )

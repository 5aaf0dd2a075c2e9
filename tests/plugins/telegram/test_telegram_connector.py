"""The Telegram connector against a fake Bot API, with a fake engine behind its PluginApi.

The engine side is a small twin of ``ConversationControl`` and ``post_message``
that records what the connector asked; Telegram is the loopback fake, so the
real python-telegram-bot code path runs. Sleeps are recorded (and shortened),
so back-offs are checked without waiting for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from telegram import Bot
from telegram.error import BadRequest

from claybot.config.settings import FileSettings
from claybot.connectors.base import InboundMessage, OutgoingMessage, PostedMessage
from claybot.files.reference import FileReference
from claybot.files.store import FileStore
from claybot.kernel.events import EventBus
from claybot.permissions.prompts import (
    PermissionAlreadyDecided,
    PermissionOutcome,
    PermissionPrompt,
)
from claybot.plugin_api import PluginApi, PluginRegistrar
from claybot.plugins import Registries
from claybot.plugins.telegram.connector import (
    NOTHING_RUNNING_TEXT,
    RESET_TEXT,
    TEXT_ONLY_TEXT,
    TelegramConnector,
)
from claybot.plugins.telegram.plugin import TelegramSettings, file_url
from claybot.plugins.telegram.state import TelegramState
from claybot.plugins.telegram.typing_status import TypingStatus
from tests.plugins.telegram.fake_bot_api import FakeBotApi, Upload

ANN, BOB, STRANGER = 111, 222, 999

# PTB itself warns when it builds a RetryAfter (its move to timedelta), not our code.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@dataclass
class FakeEngine:
    """What the connector reaches through its PluginApi, recorded."""

    accepted: dict[str, InboundMessage] = field(default_factory=dict)
    attempts: list[tuple[str | None, int]] = field(default_factory=list)  # (id, saved offset)
    refuse: int = 0  # this many posts fail, as a full disk would
    state: TelegramState | None = None
    controls: list[tuple[str, str, str, str]] = field(default_factory=list)
    pending: set[str] = field(default_factory=set)
    decided: dict[str, PermissionOutcome] = field(default_factory=dict)
    running: bool = False

    async def post_message(self, message: InboundMessage) -> PostedMessage:
        saved = self.state.offset if self.state is not None else -1
        self.attempts.append((message.message_id, saved))
        if self.refuse:
            self.refuse -= 1
            raise OSError("No space left on device")
        assert message.message_id is not None
        duplicate = message.message_id in self.accepted
        self.accepted.setdefault(message.message_id, message)
        return PostedMessage("agent-1", message.message_id, duplicate=duplicate)

    async def reset_conversation(
        self, connector: str, user_id: str, channel_id: str, command_id: str | None = None
    ) -> bool:
        self.controls.append(("reset", connector, user_id, channel_id, command_id))
        return True

    async def stop_conversation(self, connector: str, user_id: str, channel_id: str) -> bool:
        self.controls.append(("stop", connector, user_id, channel_id))
        return self.running

    async def decide_permission(
        self, connector: str, request_id: str, approved: bool
    ) -> PermissionOutcome:
        self.controls.append(("decide", connector, request_id, "allow" if approved else "deny"))
        if request_id in self.decided:
            raise PermissionAlreadyDecided(self.decided[request_id])
        if request_id not in self.pending:
            raise LookupError(request_id)
        self.pending.discard(request_id)
        outcome = PermissionOutcome(request_id, approved, f"user:{connector}")
        self.decided[request_id] = outcome
        return outcome


@dataclass
class Sleeps:
    delays: list[float] = field(default_factory=list)

    async def __call__(self, delay_s: float) -> None:
        self.delays.append(delay_s)
        await asyncio.sleep(0.01)


@dataclass
class Rig:
    bot_api: FakeBotApi
    engine: FakeEngine
    data_dir: Path
    sleeps: Sleeps = field(default_factory=Sleeps)
    file_settings: FileSettings = field(default_factory=FileSettings)

    @property
    def store(self) -> FileStore:
        return FileStore(self.data_dir / "store", self.file_settings)

    @contextlib.asynccontextmanager
    async def connector(
        self, *, poll_timeout_s: int = 1, polling: bool = True
    ) -> AsyncIterator[TelegramConnector]:
        """A connector as the plugin builds it, on the state in ``data_dir`` (a restart)."""
        settings = TelegramSettings(allowed_user_ids=[ANN, BOB], base_url=self.bot_api.base_url)
        api = PluginApi(
            instance_id="tg",
            plugin_id="telegram",
            settings=settings,
            data_dir=self.data_dir,
            registrar=PluginRegistrar(
                Registries(), instance_id="tg", plugin_id="telegram", plugin_name="Telegram"
            ),
            events=EventBus(),
            post_message=self.engine.post_message,
            auth_lookup=lambda _: None,
            control=self.engine,
            files=self.store,
        )
        bot = Bot(
            self.bot_api.token,
            base_url=self.bot_api.base_url,
            base_file_url=file_url(self.bot_api.base_url),
        )
        await bot.initialize()
        state = TelegramState(self.data_dir / "state.json")
        state.load()
        self.engine.state = state
        connector = TelegramConnector(
            api,
            bot,
            allowed_user_ids=frozenset({ANN, BOB}),
            poll_timeout_s=poll_timeout_s,
            state=state,
            sleep=self.sleeps,
            typing_interval_s=0.05,
        )
        if polling:
            connector.start_polling()
        try:
            yield connector
        finally:
            await connector.stop()
            await bot.shutdown()

    def saved_offset(self) -> int | None:
        path = self.data_dir / "state.json"
        return json.loads(path.read_text())["offset"] if path.exists() else None


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with FakeBotApi().running() as bot_api:
        yield Rig(bot_api, FakeEngine(), tmp_path)


async def wait_until(condition: Callable[[], bool], timeout_s: float = 10) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)


def prompt_for(request_id: str, reason: str = "to fetch headlines") -> PermissionPrompt:
    return PermissionPrompt(
        request_id=request_id,
        agent_id="agent-2",
        agent_label='background agent "news"',
        permission="@network",
        reason=reason,
        connector="tg",
        user_id=str(ANN),
        channel_id=str(ANN),
        expires_at=int(time.time() * 1000) + 60_000,
    )


JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x01" * 200
STICKER = {
    "file_id": "s1",
    "file_unique_id": "us1",
    "type": "regular",
    "width": 512,
    "height": 512,
    "is_animated": False,
    "is_video": False,
}


def outgoing(text: str, *, final: bool = True, in_reply_to: str | None = None) -> OutgoingMessage:
    return OutgoingMessage("out-1", "agent-1", "tg", str(ANN), str(ANN), text, in_reply_to, final)


# -- polling ----------------------------------------------------------------------------


async def test_the_offset_is_saved_only_once_the_engine_accepted_the_update(rig: Rig) -> None:
    rig.engine.refuse = 2
    async with rig.connector():
        update = rig.bot_api.message(ANN, "hello")
        await wait_until(lambda: len(rig.engine.accepted) == 1)
        await wait_until(lambda: rig.saved_offset() == update["update_id"] + 1)
    # Refused twice (not acknowledged, read again after a growing pause), then accepted.
    assert rig.engine.attempts == [("111:10", 0)] * 3
    assert rig.sleeps.delays == [1.0, 2.0]
    [message] = rig.engine.accepted.values()
    assert (message.connector, message.user_id, message.channel_id, message.text) == (
        "tg",
        str(ANN),
        str(ANN),
        "hello",
    )

    # A crash after the engine accepted but before the offset was saved: the update
    # comes again after the restart, under the same id, so the engine drops it.
    (rig.data_dir / "state.json").write_text(json.dumps({"offset": 0, "prompts": {}}))
    polls_before = len(rig.bot_api.sent("getUpdates"))
    async with rig.connector():
        await wait_until(lambda: len(rig.bot_api.sent("getUpdates")) > polls_before)
        rig.bot_api.redeliver(update)
        await wait_until(lambda: rig.saved_offset() == update["update_id"] + 1)
    assert [attempt[0] for attempt in rig.engine.attempts] == ["111:10"] * 4
    assert len(rig.engine.accepted) == 1

    # After a clean restart the saved offset is where polling resumes.
    polls_before = len(rig.bot_api.sent("getUpdates"))
    async with rig.connector():
        await wait_until(lambda: len(rig.bot_api.sent("getUpdates")) >= 1)
        rig.bot_api.redeliver(update)  # a stale delivery below the offset is skipped
        later = rig.bot_api.message(ANN, "later")
        await wait_until(lambda: rig.saved_offset() == later["update_id"] + 1)
    assert rig.bot_api.sent("getUpdates")[polls_before]["offset"] == update["update_id"] + 1
    assert [attempt[0] for attempt in rig.engine.attempts][4:] == ["111:20"]


async def test_a_conflict_clears_the_webhook_once_then_backs_off(rig: Rig) -> None:
    conflict = "Conflict: terminated by other getUpdates request"
    rig.bot_api.fail("getUpdates", 409, conflict, times=5)
    async with rig.connector():
        rig.bot_api.message(ANN, "still there?")
        await wait_until(lambda: len(rig.engine.accepted) == 1)
    assert rig.bot_api.methods().count("deleteWebhook") == 1
    assert rig.sleeps.delays == [1.0, 2.0, 4.0, 8.0]


async def test_network_errors_and_flood_waits_are_retried_with_pauses(rig: Rig) -> None:
    rig.bot_api.fail("getUpdates", 502, "Bad Gateway", times=3)
    rig.bot_api.fail("getUpdates", 429, "Too Many Requests: retry after 7", retry_after=7)
    async with rig.connector():
        rig.bot_api.message(ANN, "one")
        await wait_until(lambda: len(rig.engine.accepted) == 1)
        rig.bot_api.fail("getUpdates", 500, "Internal Server Error")
        rig.bot_api.message(ANN, "two")
        await wait_until(lambda: len(rig.engine.accepted) == 2 and len(rig.sleeps.delays) == 5)
    # The pause grows while failures last and starts over once polling worked again.
    assert rig.sleeps.delays == [1.0, 2.0, 4.0, 7.0, 1.0]
    assert "deleteWebhook" not in rig.bot_api.methods()


async def test_stop_ends_a_long_poll_at_once(rig: Rig) -> None:
    async with rig.connector(poll_timeout_s=20) as connector:
        await wait_until(lambda: len(rig.bot_api.sent("getUpdates")) == 1)
        started = time.monotonic()
        await connector.stop()
        assert time.monotonic() - started < 1


async def test_commands_strangers_groups_and_what_cannot_be_read(rig: Rig) -> None:
    rig.bot_api.serve("p1", JPEG)
    async with rig.connector():
        rig.bot_api.message(STRANGER, "/reset")
        rig.bot_api.message(ANN, "/reset@clay_test_bot", chat_type="group")
        reset = rig.bot_api.message(ANN, "/reset")
        rig.bot_api.message(ANN, "/stop")
        rig.bot_api.message(ANN, "/help me")  # not ours: passed through as text
        rig.bot_api.media(ANN, "sticker", STICKER)  # not read: said so
        last = rig.bot_api.message(ANN, None, photo_caption="what is this?")
        await wait_until(lambda: rig.saved_offset() == last["update_id"] + 1)
    reset_id = f"{ANN}:{reset['message']['message_id']}"  # keyed like a message: resets once
    assert rig.engine.controls == [
        ("reset", "tg", str(ANN), str(ANN), reset_id),
        ("stop", "tg", str(ANN), str(ANN)),
    ]
    assert [m.text for m in rig.engine.accepted.values()] == ["/help me", "what is this?"]
    assert [len(m.files) for m in rig.engine.accepted.values()] == [0, 1]
    sent = rig.bot_api.sent()
    assert [(p["chat_id"], p["text"]) for p in sent] == [
        (ANN, RESET_TEXT),
        (ANN, NOTHING_RUNNING_TEXT),
        (ANN, TEXT_ONLY_TEXT),
    ]


# -- sending ----------------------------------------------------------------------------


async def test_sending_retries_network_errors_and_flood_waits_but_not_bad_requests(
    rig: Rig,
) -> None:
    rig.bot_api.fail("sendMessage", 502, "Bad Gateway")
    rig.bot_api.fail("sendMessage", 429, "Too Many Requests: retry after 3", retry_after=3)
    async with rig.connector(polling=False) as connector:
        await connector.send(outgoing("**made** it"))
        rig.bot_api.fail("sendMessage", 400, "Bad Request: chat not found")
        with pytest.raises(BadRequest, match=r"(?i)chat not found"):
            await connector.send(outgoing("lost"))
        await connector.send(outgoing("   "))  # nothing to say: nothing sent
    assert [p["text"] for p in rig.bot_api.sent()] == [
        "<b>made</b> it",
        "<b>made</b> it",
        "<b>made</b> it",
        "lost",
    ]
    assert rig.sleeps.delays == [1.0, 3.0]


async def test_typing_shows_until_the_turn_sends_its_last_message(rig: Rig) -> None:
    def actions() -> int:
        return len(rig.bot_api.sent("sendChatAction"))

    async with rig.connector() as connector:
        rig.bot_api.message(ANN, "think hard")
        await wait_until(lambda: actions() >= 3)
        assert rig.bot_api.sent("sendChatAction")[0] == {"chat_id": ANN, "action": "typing"}
        await connector.send(outgoing("Step one…", final=False, in_reply_to="111:10"))
        shown = actions()
        await wait_until(lambda: actions() > shown)  # not done yet: still typing
        await connector.send(outgoing("Done.", in_reply_to="111:10"))
        shown = actions()
        await asyncio.sleep(0.2)
        assert actions() == shown


async def test_typing_gives_up_after_its_limit() -> None:
    sent: list[int] = []
    now = [0.0]

    async def send_typing(chat_id: int) -> None:
        sent.append(chat_id)
        now[0] += 1

    typing = TypingStatus(send_typing, interval_s=0.001, max_s=3, clock=lambda: now[0])
    typing.waiting(7, "m1")
    await wait_until(lambda: len(sent) == 3)
    await asyncio.sleep(0.05)
    assert sent == [7, 7, 7]
    await typing.close()


# -- permission buttons ---------------------------------------------------------------


async def test_buttons_decide_the_request_and_the_prompt_is_edited_in_place(rig: Rig) -> None:
    rig.engine.pending.add("req1")
    prompt = prompt_for("req1")
    async with rig.connector() as connector:
        await connector.request_permission(prompt)
        [shown] = rig.bot_api.sent()
        buttons = shown["reply_markup"]["inline_keyboard"][0]
        assert [(b["text"], b["callback_data"]) for b in buttons] == [
            ("Allow", "perm:allow:req1"),
            ("Deny", "perm:deny:req1"),
        ]
        message_id = 500  # the fake's first message id
        rig.bot_api.press(STRANGER, "perm:allow:req1", message_id)
        rig.bot_api.press(BOB, "perm:allow:req1", message_id)  # allowed, but not his prompt
        rig.bot_api.press(ANN, "perm:allow:req1", message_id)
        await wait_until(lambda: len(rig.bot_api.sent("answerCallbackQuery")) == 3)
        await connector.permission_decided(prompt, rig.engine.decided["req1"])
        rig.bot_api.press(ANN, "perm:deny:req1", message_id)  # a stale second press
        rig.bot_api.press(ANN, "perm:deny:gone", message_id)
        await wait_until(lambda: len(rig.bot_api.sent("editMessageReplyMarkup")) == 2)
    assert shown["text"] == (
        'Permission request from background agent "news": @network\nReason: to fetch headlines'
    )
    assert [c for c in rig.engine.controls if c[0] == "decide"] == [
        ("decide", "tg", "req1", "allow"),
        ("decide", "tg", "req1", "deny"),
        ("decide", "tg", "gone", "deny"),
    ]
    answers = [p["text"] for p in rig.bot_api.sent("answerCallbackQuery")]
    assert answers == [
        "Not allowed.",
        "Not allowed.",
        "Allowed.",
        "Already allowed.",
        "This request is no longer known.",
    ]
    [edit] = rig.bot_api.sent("editMessageText")
    assert (edit["chat_id"], edit["message_id"]) == (ANN, message_id)
    assert edit["text"] == f"{prompt.text()}\n\n✅ Allowed" and "reply_markup" not in edit
    # Buttons still showing on a request that cannot be answered any more are removed.
    assert [
        (p["chat_id"], p["message_id"]) for p in rig.bot_api.sent("editMessageReplyMarkup")
    ] == [
        (ANN, message_id),
        (ANN, message_id),
    ]


async def test_a_prompt_shown_before_a_restart_is_still_edited_after_it(rig: Rig) -> None:
    prompt = prompt_for("req2")
    async with rig.connector(polling=False) as connector:
        await connector.request_permission(prompt)
    async with rig.connector(polling=False) as connector:
        await connector.permission_decided(prompt, PermissionOutcome("req2", False, "timeout"))
        await connector.permission_decided(prompt, PermissionOutcome("req2", False, "timeout"))
    [edit] = rig.bot_api.sent("editMessageText")  # once: the prompt is then forgotten
    assert edit["message_id"] == 500
    assert edit["text"].endswith("⌛ Expired (no answer in time): denied")
    assert json.loads((rig.data_dir / "state.json").read_text())["prompts"] == {}


async def test_a_request_id_too_long_for_a_button_is_asked_in_words(rig: Rig) -> None:
    async with rig.connector(polling=False) as connector:
        await connector.request_permission(prompt_for("r" * 60))
    [shown] = rig.bot_api.sent()
    assert "reply_markup" not in shown
    assert f"claybot permissions allow {'r' * 60}" in shown["text"]


# -- files ------------------------------------------------------------------------------

OGG = b"OggS\x00\x02" + b"\x02" * 300
PDF = b"%PDF-1.4\n" + b"pdf body " * 40
MP3 = b"ID3\x03\x00" + b"\x03" * 300
PNG = b"\x89PNG\r\n\x1a\n" + b"\x04" * 300
GIF = b"GIF89a" + b"\x05" * 300


def photo_sizes(*sides: int) -> list[dict[str, object]]:
    return [
        {"file_id": f"photo-{side}", "file_unique_id": f"u{side}", "width": side, "height": side}
        for side in sides
    ]


async def test_photos_documents_voice_notes_and_audio_reach_the_engine_as_files(rig: Rig) -> None:
    for side in (90, 320, 1280):
        rig.bot_api.serve(f"photo-{side}", JPEG + bytes([side % 251]) * side)
    rig.bot_api.serve("doc", PDF)
    rig.bot_api.serve("voice", OGG)
    rig.bot_api.serve("audio", MP3)
    async with rig.connector():
        # Telegram lists the sizes smallest first; the order must not matter.
        rig.bot_api.media(ANN, "photo", photo_sizes(320, 1280, 90), caption="what is this?")
        document = {"file_id": "doc", "file_unique_id": "ud", "file_name": "report.pdf"}
        rig.bot_api.media(ANN, "document", document)
        rig.bot_api.media(ANN, "voice", {"file_id": "voice", "file_unique_id": "uv", "duration": 2})
        audio = {"file_id": "audio", "file_unique_id": "ua", "duration": 9, "file_name": "s.mp3"}
        last = rig.bot_api.media(ANN, "audio", audio)
        await wait_until(lambda: rig.saved_offset() == last["update_id"] + 1)
    photo, pdf, voice, song = rig.engine.accepted.values()
    assert [m.text for m in (photo, pdf, voice, song)] == ["what is this?", "", "", ""]
    store = rig.store
    served = [JPEG + bytes([1280 % 251]) * 1280, PDF, OGG, MP3]
    for message, data in zip((photo, pdf, voice, song), served, strict=True):
        [file] = message.files
        assert store.read(file.id) == data and file.size == len(data)
    assert [(m.files[0].name, m.files[0].mimeType) for m in (photo, pdf, voice, song)] == [
        ("photo-u1280.jpg", "image/jpeg"),
        ("report.pdf", "application/pdf"),
        ("voice-uv.ogg", "audio/ogg"),
        ("s.mp3", "audio/mpeg"),
    ]
    # Only the largest photo was fetched, and nothing was said back.
    assert [p["file_id"] for p in rig.bot_api.sent("getFile")] == [
        "photo-1280",
        "doc",
        "voice",
        "audio",
    ]
    assert rig.bot_api.sent() == []


async def test_a_file_too_large_is_not_downloaded_and_the_user_is_told(rig: Rig) -> None:
    rig.file_settings = FileSettings(max_file_bytes=4096)
    rig.bot_api.serve("big", PDF * 20)  # 7 KB, its size unreported in the message
    async with rig.connector():
        reported = {"file_id": "huge", "file_unique_id": "uh", "file_name": "huge.zip",
                    "file_size": 30 * 1024**2}  # fmt: skip
        rig.bot_api.media(ANN, "document", reported, caption="the logs")
        unreported = {"file_id": "big", "file_unique_id": "ub", "file_name": "big.pdf"}
        last = rig.bot_api.media(ANN, "document", unreported)
        await wait_until(lambda: rig.saved_offset() == last["update_id"] + 1)
    # The caption still goes on; a message that was only the file does not.
    [message] = rig.engine.accepted.values()
    assert (message.text, message.files) == ("the logs", ())
    assert [p["text"] for p in rig.bot_api.sent()] == [
        "I could not take “huge.zip”: it is 30.0 MB, and the limit is 4.0 KB.",
        "I could not take “big.pdf”: it is 7.2 KB, and the limit is 4.0 KB.",
    ]
    assert [p["file_id"] for p in rig.bot_api.sent("getFile")] == ["big"]  # never "huge"
    assert "download" not in rig.bot_api.methods()
    assert not (rig.data_dir / "store").exists()


async def test_telegrams_own_download_limit_holds_whatever_ours_says(rig: Rig) -> None:
    rig.file_settings = FileSettings(max_file_bytes=100 * 1024**2, max_message_bytes=100 * 1024**2)
    async with rig.connector():
        huge = {"file_id": "huge", "file_unique_id": "uh", "file_size": 25 * 1024**2}
        last = rig.bot_api.media(ANN, "voice", {**huge, "duration": 600})
        await wait_until(lambda: rig.saved_offset() == last["update_id"] + 1)
    assert rig.engine.accepted == {}
    assert [p["text"] for p in rig.bot_api.sent()] == [
        "I could not take “voice-uh.ogg”: it is 25.0 MB, and the limit is 20.0 MB."
    ]


async def test_an_outgoing_message_uploads_its_files_once_with_the_text_as_caption(
    rig: Rig,
) -> None:
    store = rig.store
    png, pdf, gif = (
        store.put(PNG, "chart.png"),
        store.put(PDF, "report.pdf"),
        store.put(GIF, "a.gif"),
    )
    long_text = "**Here** it is.\n\n" + "word " * 400  # past the 1024-character caption
    message = OutgoingMessage(
        "item-1#0", "agent-1", "tg", str(ANN), str(ANN), long_text, files=(png, pdf, gif)
    )
    async with rig.connector(polling=False) as connector:
        await connector.send(message)
        await connector.send(message)  # delivered again: nothing new goes out
    async with rig.connector(polling=False) as connector:
        await connector.send(message)  # and after a restart neither
    [photo] = rig.bot_api.sent("sendPhoto")
    documents = rig.bot_api.sent("sendDocument")
    assert photo["photo"] == Upload("chart.png", PNG) and photo["chat_id"] == ANN
    assert photo["caption"] == "<b>Here</b> it is." and photo["parse_mode"] == "HTML"
    # The GIF goes as a document (Telegram animates it); only the first file has a caption.
    assert [d["document"] for d in documents] == [Upload("report.pdf", PDF), Upload("a.gif", GIF)]
    assert all("caption" not in d for d in documents)
    # The rest of the text follows as a message of its own.
    [rest] = rig.bot_api.sent()
    assert rest["text"].count("word") == 400


async def test_a_photo_telegram_refuses_goes_as_a_document(rig: Rig) -> None:
    png = rig.store.put(PNG, "wide.png")
    rig.bot_api.fail("sendPhoto", 400, "Bad Request: PHOTO_INVALID_DIMENSIONS")
    message = OutgoingMessage("item-2#0", "agent-1", "tg", str(ANN), str(ANN), "", files=(png,))
    async with rig.connector(polling=False) as connector:
        await connector.send(message)
    assert len(rig.bot_api.sent("sendPhoto")) == 1
    [document] = rig.bot_api.sent("sendDocument")
    assert document["document"] == Upload("wide.png", PNG) and "caption" not in document
    assert rig.bot_api.sent() == []


async def test_a_file_no_longer_stored_is_named_and_the_caption_moves_on(rig: Rig) -> None:
    gone = FileReference("0" * 64, "old.pdf", "application/pdf", 10)
    pdf = rig.store.put(PDF, "report.pdf")
    both = OutgoingMessage(
        "item-3#0", "agent-1", "tg", str(ANN), str(ANN), "Both.", files=(gone, pdf)
    )
    alone = OutgoingMessage(
        "item-4#0", "agent-1", "tg", str(ANN), str(ANN), "Alone.", files=(gone,)
    )
    async with rig.connector(polling=False) as connector:
        await connector.send(both)
        await connector.send(alone)
    [document] = rig.bot_api.sent("sendDocument")
    assert document["caption"] == "Both."
    assert [p["text"] for p in rig.bot_api.sent()] == [
        "A file I meant to send you (“old.pdf”) is no longer stored.",
        "A file I meant to send you (“old.pdf”) is no longer stored.",
        "Alone.",
    ]

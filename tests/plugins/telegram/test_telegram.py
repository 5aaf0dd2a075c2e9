"""The Telegram connector in a real engine against a fake Bot API on loopback."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from claybot.config.home import HomePaths
from claybot.connectors.base import OutgoingMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from claybot.plugins.telegram.connector import RESET_TEXT
from claybot.plugins.telegram.format import markdown_to_html
from claybot.plugins.telegram.split import split_markdown, telegram_length
from claybot.providers.scripted import ScriptedProvider
from tests.agents.test_agents import record_events
from tests.agents.test_subagents import call, history, rules_settings
from tests.plugins.telegram.fake_bot_api import FakeBotApi, Upload

ANN, STRANGER = 111, 999

RULES: list[dict[str, Any]] = [
    {"match": "hello", "response": "Hi **there**!"},
    {
        "match": "get the news",
        "response": call("start_background_agent", prompt="fetch headlines", name="news"),
    },
    {"match": "Background agent started", "response": "A helper is on it."},
    {
        "match": "fetch headlines",
        "response": call(
            "request_permission_via_parent", permission="@network", reason="to fetch headlines"
        ),
    },
    {"match": "was sent to the user", "response": "Waiting for the network."},
    {"match": "Permission granted: @network", "response": "Headlines: all quiet."},
    {"match": "Waiting for the network", "response": "The helper needs your permission."},
    {"match": "Headlines: all quiet", "response": "Here is the news: all quiet."},
    {"match": "take your time", "response": "slow"},
    {"match": "[Attached file:", "response": "Got your file."},
    {"match": "<unsafe>", "response": "Use <b>this</b> & that."},
    {
        "match": "long please",
        "response": "\n\n".join(f"Paragraph {n}: " + "lorem ipsum " * 60 for n in range(12)),
    },
]


async def wait_until(condition: Callable[[], bool], timeout_s: float = 15) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.02)


@pytest.fixture
async def bot_api() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi().running() as api:
        yield api


async def start_engine(
    paths: HomePaths, bot_api: FakeBotApi, *, delay_s: float = 0.0, **extra: Any
) -> tuple[Engine, list[Event]]:
    settings = rules_settings(RULES, delayS=delay_s, **extra)
    settings["plugins"] = [
        {
            "instanceId": "tg",
            "pluginId": "telegram",
            "settings": {"allowedUserIds": [ANN], "baseUrl": bot_api.base_url, "pollTimeoutS": 1},
        }
    ]
    paths.home.mkdir(parents=True, exist_ok=True)
    paths.settings.write_text(json.dumps(settings))
    paths.auth.write_text(json.dumps({"tg": {"type": "token", "token": bot_api.token}}))
    engine = Engine(paths, EngineOptions(port=0))
    events = record_events(engine)
    await engine.start()
    assert engine.plugins.failure_summaries() == []
    return engine, events


def texts(bot_api: FakeBotApi) -> list[str]:
    return [str(params["text"]) for params in bot_api.sent()]


async def test_messages_duplicates_strangers_reset_and_a_permission_button(
    paths: HomePaths, bot_api: FakeBotApi
) -> None:
    engine, events = await start_engine(paths, bot_api)
    try:
        hello = bot_api.message(ANN, "hello")
        await wait_until(lambda: len(bot_api.sent()) == 1)
        bot_api.redeliver(hello)  # Telegram delivers it again
        bot_api.message(STRANGER, "hello from a stranger")
        bot_api.message(ANN, "hello from a group", chat_type="group")
        bot_api.message(ANN, "/reset")
        await wait_until(lambda: len(bot_api.sent()) == 2)

        bot_api.message(ANN, "get the news")
        await wait_until(lambda: any("reply_markup" in p for p in bot_api.sent()))
        prompt = next(p for p in bot_api.sent() if "reply_markup" in p)
        buttons = prompt["reply_markup"]["inline_keyboard"][0]
        allow = next(b["callback_data"] for b in buttons if b["text"] == "Allow")
        bot_api.press(STRANGER, allow, message_id=1)  # not on the allowlist: refused
        bot_api.press(ANN, allow, message_id=1)
        await wait_until(lambda: "Here is the news: all quiet." in texts(bot_api))
        await wait_until(lambda: len(bot_api.sent("editMessageText")) == 1)
        bot_api.press(ANN, allow, message_id=1)  # pressed again: already decided
        await wait_until(lambda: len(bot_api.sent("editMessageReplyMarkup")) == 1)
        granted = [e for e in events if e.type == "permission.granted"]
        child = granted[0].payload["agentId"]
        child_state = await engine.agents.permissions_of(child)
        agents = engine.agents.listings.agents()
        user_agents = [a for a in agents if a["type"] == "user"]
        records = await history(engine, user_agents[0]["agentId"])
    finally:
        await engine.stop()
    # Exactly these messages went out, each once.
    assert Counter(texts(bot_api)) == Counter(
        {
            "Hi <b>there</b>!": 1,
            "Conversation reset. I have forgotten what we talked about.": 1,
            "A helper is on it.": 1,
            prompt["text"]: 1,
            "The helper needs your permission.": 1,
            "Here is the news: all quiet.": 1,
        }
    )
    assert all(p["parse_mode"] == "HTML" and p["chat_id"] == ANN for p in bot_api.sent())
    assert 'background agent "news"' in prompt["text"] and "@network" in prompt["text"]
    answers = [p["text"] for p in bot_api.sent("answerCallbackQuery")]
    assert answers == ["Not allowed.", "Allowed.", "Already allowed."]
    [edit] = bot_api.sent("editMessageText")
    assert edit["text"].endswith("✅ Allowed") and edit["chat_id"] == ANN
    assert "reply_markup" not in edit  # the buttons are gone
    methods = Counter(m for m in bot_api.methods() if m != "sendChatAction")  # timing-bound
    assert methods - Counter({"sendMessage": 6}) == Counter(
        {
            "getMe": 1,
            "setMyCommands": 1,
            "answerCallbackQuery": 3,
            "editMessageText": 1,
            "editMessageReplyMarkup": 1,  # the stale press: its buttons are taken away
        }
    )
    # The grant reached the agent that asked, and only it.
    assert child_state.network is True
    assert [a["descriptor"]["userId"] for a in user_agents] == [str(ANN)]
    assert sum(r.get("text") == "hello" for r in records) == 1  # the duplicate was dropped
    assert any(r["type"] == "reset" for r in records)


async def test_a_reset_read_again_after_a_crash_resets_once(
    paths: HomePaths, bot_api: FakeBotApi
) -> None:
    engine, events = await start_engine(paths, bot_api)
    try:
        bot_api.message(ANN, "hello")
        await wait_until(lambda: len(bot_api.sent()) == 1)
        reset = bot_api.message(ANN, "/reset")
        await wait_until(lambda: len(bot_api.sent()) == 2)
    finally:
        await engine.stop()
    # The engine died after accepting the reset and before saving the offset past it.
    state = paths.plugins / "tg" / "state.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "offset": reset["update_id"]}))
    engine, restarted_events = await start_engine(paths, bot_api)
    try:
        bot_api.redeliver(reset)  # Telegram sends it again: the offset never confirmed it
        await wait_until(lambda: len(bot_api.sent()) == 3)
        bot_api.message(ANN, "hello again")
        await wait_until(lambda: len(bot_api.sent()) == 4)
        [agent] = [a for a in engine.agents.listings.agents() if a["type"] == "user"]
        records = await history(engine, agent["agentId"])
    finally:
        await engine.stop()
    # The confirmation is repeated (the first may never have arrived); the reset is not.
    assert texts(bot_api)[1] == texts(bot_api)[2] == RESET_TEXT
    assert [e.type for e in [*events, *restarted_events]].count("agent.reset") == 1
    kinds = [(r["type"], r.get("text")) for r in records if r["type"] in ("reset", "user_message")]
    assert kinds == [("user_message", "hello"), ("reset", None), ("user_message", "hello again")]


async def test_stop_interrupts_a_slow_answer(paths: HomePaths, bot_api: FakeBotApi) -> None:
    engine, _ = await start_engine(paths, bot_api, delay_s=30)
    try:
        bot_api.message(ANN, "/stop")
        await wait_until(lambda: texts(bot_api) == ["Nothing is running."])
        bot_api.message(ANN, "take your time")
        model = engine.router.providers[0]
        assert isinstance(model, ScriptedProvider)
        await wait_until(lambda: bool(model.requests))  # the slow answer has begun
        bot_api.message(ANN, "/stop")
        await wait_until(lambda: len(texts(bot_api)) == 2)
    finally:
        await engine.stop()
    assert texts(bot_api) == ["Nothing is running.", "Stopped."]


async def test_markup_telegram_rejects_is_resent_as_plain_text_and_long_replies_are_split(
    paths: HomePaths, bot_api: FakeBotApi
) -> None:
    bot_api.fail_parse.add("Use &lt;b&gt;this&lt;/b&gt; &amp; that.")
    engine, _ = await start_engine(paths, bot_api)
    try:
        bot_api.message(ANN, "<unsafe>")
        await wait_until(lambda: len(bot_api.sent()) == 2)
        bot_api.message(ANN, "long please")
        await wait_until(lambda: len(bot_api.sent()) >= 4)
        await asyncio.sleep(0.3)
    finally:
        await engine.stop()
    rejected, plain, *long_parts = bot_api.sent()
    assert rejected["parse_mode"] == "HTML"
    assert plain["text"] == "Use <b>this</b> & that." and "parse_mode" not in plain
    assert len(long_parts) >= 2 and all(len(p["text"]) <= 4096 for p in long_parts)
    joined = " ".join(p["text"] for p in long_parts)
    assert all(f"Paragraph {n}:" in joined for n in range(12))


JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"
PDF = b"%PDF-1.4\n" + b"pdf body " * 40
OGG = b"OggS\x00\x02" + b"\x02" * 300


async def test_a_photo_a_document_and_a_voice_note_reach_the_agent_and_a_file_goes_back(
    paths: HomePaths, bot_api: FakeBotApi
) -> None:
    for side in (90, 800):
        bot_api.serve(f"photo-{side}", JPEG + bytes([side % 251]) * side)
    bot_api.serve("doc", PDF)
    bot_api.serve("voice", OGG)
    engine, _ = await start_engine(paths, bot_api, files={"maxFileBytes": 4096})
    try:
        sizes = [{"file_id": f"photo-{side}", "file_unique_id": f"u{side}", "width": side,
                  "height": side} for side in (90, 800)]  # fmt: skip
        bot_api.media(ANN, "photo", sizes, caption="what is this?")
        await wait_until(lambda: len(bot_api.sent()) == 1)  # one at a time: one order
        document = {"file_id": "doc", "file_unique_id": "ud", "file_name": "report.pdf"}
        bot_api.media(ANN, "document", document)
        await wait_until(lambda: len(bot_api.sent()) == 2)
        bot_api.media(ANN, "voice", {"file_id": "voice", "file_unique_id": "uv", "duration": 1})
        await wait_until(lambda: len(bot_api.sent()) == 3)
        too_large = {"file_id": "big", "file_unique_id": "ub", "file_size": 10_000}
        bot_api.media(ANN, "document", too_large)
        await wait_until(lambda: len(bot_api.sent()) == 4)
        [agent] = [a for a in engine.agents.listings.agents() if a["type"] == "user"]
        records = await history(engine, agent["agentId"])
        messages = [r for r in records if r["type"] == "user_message"]
        stored = [await asyncio.to_thread(engine.files.read, m["files"][0]["id"]) for m in messages]
        placed = [await asyncio.to_thread(Path(m["files"][0]["path"]).read_bytes) for m in messages]

        # The agent sends the document back (as send_file will): one upload, captioned.
        reference = engine.files.reference(messages[1]["files"][0]["id"], "report.pdf")
        connector = engine.registries.connectors.get("tg")
        assert connector is not None
        back = OutgoingMessage("item#9", agent["agentId"], "tg", str(ANN), str(ANN),
                               "Your **report**.", files=(reference,))  # fmt: skip
        await connector.send(back)
        await connector.send(back)  # delivered again: not uploaded again
    finally:
        await engine.stop()
    served = [JPEG + bytes([800 % 251]) * 800, PDF, OGG]
    assert [m["text"] for m in messages] == ["what is this?", "", ""]
    assert [(m["files"][0]["name"], m["files"][0]["mimeType"]) for m in messages] == [
        ("photo-u800.jpg", "image/jpeg"),
        ("report.pdf", "application/pdf"),
        ("voice-uv.ogg", "audio/ogg"),
    ]
    assert stored == placed == served  # in the store, and where the agent reads it
    assert texts(bot_api) == [
        "Got your file.",
        "Got your file.",
        "Got your file.",
        "I could not take “document-ub”: it is 9.8 KB, and the limit is 4.0 KB.",
    ]
    [upload] = bot_api.sent("sendDocument")
    assert upload["document"] == Upload("report.pdf", PDF)
    assert (upload["caption"], upload["parse_mode"]) == ("Your <b>report</b>.", "HTML")
    assert bot_api.sent("sendPhoto") == []


async def test_a_missing_or_rejected_token_fails_the_load_clearly(
    paths: HomePaths, bot_api: FakeBotApi
) -> None:
    settings = rules_settings(RULES)
    settings["plugins"] = [
        {
            "instanceId": "tg",
            "pluginId": "telegram",
            "settings": {"allowedUserIds": [ANN], "baseUrl": bot_api.base_url},
        }
    ]
    paths.home.mkdir(parents=True, exist_ok=True)
    paths.settings.write_text(json.dumps(settings))
    for auth, problem in (({}, "no bot token"), ({"tg": {"token": "999:wrong"}}, "rejected")):
        paths.auth.write_text(json.dumps(auth))
        engine = Engine(paths, EngineOptions(port=0))
        await engine.start()
        try:
            [failure] = engine.plugins.failure_summaries()
        finally:
            await engine.stop()
        assert failure["id"] == "tg" and problem in failure["message"]
        assert "999:wrong" not in json.dumps(failure)


def test_markdown_becomes_telegram_html() -> None:
    html = markdown_to_html(
        "# Plan\n\n**Bold** _it_ ~~gone~~ `x<y` [site](https://e.com/?a=1&b=2) "
        "[bad](javascript:alert(1)) <script>\n\n- one\n- two\n\n1. first\n\n"
        "```py\nif a < b:\n    pass\n```\n\n> quoted & kept"
    )
    assert html == (
        "<b>Plan</b>\n\n"
        "<b>Bold</b> <i>it</i> <s>gone</s> <code>x&lt;y</code> "
        '<a href="https://e.com/?a=1&amp;b=2">site</a> '
        "[bad](javascript:alert(1)) &lt;script&gt;\n\n"
        "• one\n• two\n\n"
        "1. first\n\n"
        '<pre><code class="language-py">if a &lt; b:\n    pass</code></pre>\n\n'
        "<blockquote>quoted &amp; kept</blockquote>"
    )


def test_splitting_keeps_code_blocks_whole_and_fits_the_limit() -> None:
    code = "\n".join(f"line {n} <tag>" for n in range(700))
    text = "Intro **bold** paragraph.\n\n```\n" + code + "\n```\n\n" + "word " * 3000
    chunks = split_markdown(text, markdown_to_html)
    rendered = [markdown_to_html(chunk) for chunk in chunks]
    assert all(len(part) <= 4096 for part in rendered)
    code_parts = [part for part in rendered if "line 1" in part or "line 6" in part]
    assert all(part.startswith("<pre>") and part.endswith("</pre>") for part in code_parts)
    assert "".join(chunks).count("line ") == 700
    assert " ".join(chunks).count("word") == 3000


def test_a_single_enormous_word_is_cut_hard() -> None:
    chunks = split_markdown("x" * 10_000, markdown_to_html)
    assert [len(chunk) for chunk in chunks] == [4096, 4096, 1808]


def test_emoji_count_twice_towards_the_limit() -> None:
    text = "😀" * 5000  # 10,000 UTF-16 code units
    chunks = split_markdown(text, markdown_to_html)
    assert "".join(chunks) == text
    assert all(telegram_length(chunk) <= 4096 for chunk in chunks)


def test_every_piece_of_a_long_formatted_reply_is_balanced_html() -> None:
    paragraph = "Some **bold words** and _a little_ `code` with <angles> & [a link](https://e.com)."
    chunks = split_markdown("\n\n".join([paragraph] * 200), markdown_to_html)
    assert len(chunks) > 1
    for chunk in chunks:
        html = markdown_to_html(chunk)
        assert telegram_length(html) <= 4096
        for tag in ("b", "i", "code", "a"):
            assert html.count(f"<{tag}>") + html.count(f"<{tag} ") == html.count(f"</{tag}>")

"""The Chat page in a real browser: a reply streams in, tool calls show as cards, a
permission prompt is answered inline, and a dead engine is said plainly."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page

from tests.agents.test_subagents import call, rules_settings
from tests.browser.conftest import logged_in_page, serious_violations
from tests.conftest import EngineProcess, write_settings

pytestmark = pytest.mark.slow

STORY = "Once upon a time there was a small engine that never lost a message."


def streaming(rules: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted provider, writing its replies four characters at a time."""
    settings = rules_settings(rules)
    settings["providers"][0]["options"].update(streamChunkChars=4, streamDelayS=0.1)
    return settings


async def open_conversation(page: Page, base: str, name: str) -> None:
    await page.goto(base + "/chat")
    await page.get_by_label("New conversation").fill(name)
    await page.get_by_role("button", name="Start").click()
    await page.wait_for_url(f"{base}/chat/dashboard/{name}")


async def send(page: Page, text: str) -> None:
    await page.get_by_label("Message").fill(text)
    await page.get_by_role("button", name="Send").click()


async def test_a_reply_streams_into_the_page(
    engine_process: EngineProcess, browser: Browser, shots: Path
) -> None:
    write_settings(engine_process.paths, streaming([{"match": "a story", "response": STORY}]))
    page, base = await logged_in_page(engine_process, browser)
    await open_conversation(page, base, "story")
    await page.evaluate("window.notReloaded = true")
    await send(page, "tell me a story")
    # Part of the reply shows before the whole of it: it streams in.
    await page.wait_for_function(
        """length => {
            const text = document.querySelector('.card.assistant_message.live p.text');
            return text !== null && text.textContent.length > 0 && text.textContent.length < length;
        }""",
        arg=len(STORY),
    )
    done = page.locator(".card.assistant_message:not(.live) p.text", has_text=STORY)
    await done.wait_for()
    assert await done.inner_text() == STORY
    assert await page.locator(".card.user_message p.text").inner_text() == "tell me a story"
    assert await page.evaluate("window.notReloaded") is True  # all of it without a reload
    assert await page.get_by_label("Message").input_value() == ""
    await page.screenshot(path=shots / "chat-conversation.png", full_page=True)
    assert await serious_violations(page) == []

    # Read again later, the conversation is its history.
    await page.reload()
    assert await page.locator("#history .card.assistant_message p.text").inner_text() == STORY
    await page.goto(base + "/chat")
    await page.screenshot(path=shots / "chat.png", full_page=True)
    assert await page.locator("td a", has_text="story").count() == 1
    assert await serious_violations(page) == []


async def test_a_permission_is_allowed_from_the_chat_and_tool_calls_show_as_cards(
    engine_process: EngineProcess, browser: Browser, shots: Path
) -> None:
    rules = [
        {
            "match": "read my notes",
            "response": call("request_permission", permission="@read:/etc", reason="notes"),
        },
        {"match": "was sent to the user", "response": "Asked."},
        {"match": "Permission granted: @read:/etc", "response": "Thanks, reading."},
    ]
    write_settings(engine_process.paths, streaming(rules))
    page, base = await logged_in_page(engine_process, browser)
    await open_conversation(page, base, "notes")
    await send(page, "read my notes")
    tool = page.locator(".card.tool_call")
    await tool.locator("summary", has_text="request_permission").wait_for()
    await tool.locator("summary").click()  # the card opens: its arguments and its result
    assert "@read:/etc" in await tool.locator("pre").first.inner_text()
    await tool.locator("pre.result").wait_for()
    prompt = page.locator("#prompts .card.prompt")
    await prompt.wait_for()
    assert await prompt.locator(".what").inner_text() == "@read:/etc"
    await page.screenshot(path=shots / "chat-permission.png", full_page=True)
    assert await serious_violations(page) == []
    await prompt.get_by_role("button", name="Allow").click()
    await prompt.locator(".decided", has_text="Allowed.").wait_for()
    thanks = page.locator(".card.assistant_message:not(.live) p.text", has_text="Thanks, reading.")
    await thanks.wait_for()  # the agent was told, and its answer streamed in
    assert await prompt.get_by_role("button", name="Allow").is_hidden()


async def test_a_dead_engine_is_said_plainly(
    engine_process: EngineProcess, browser: Browser
) -> None:
    page, base = await logged_in_page(engine_process, browser)
    await open_conversation(page, base, "desk")
    status = page.locator("#live-status")
    assert await status.is_hidden()
    await asyncio.to_thread(engine_process.kill)
    await status.filter(has_text="The engine is unreachable").wait_for()
    # It comes back on the same port; sessions lived in the old process.
    port = int(base.rsplit(":", 1)[1])
    await asyncio.to_thread(engine_process.start, 30.0, port)
    await status.filter(has_text="Your session has ended").wait_for(timeout=60_000)

"""Files on the Chat page in a real browser: an image attached in the composer shows in
the conversation at once and in its history after a reload, loaded from /files/{id};
another file is a download link with its size; axe finds nothing serious."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser

from tests.browser.conftest import logged_in_page, serious_violations
from tests.browser.test_dashboard_chat import open_conversation, send
from tests.conftest import EngineProcess
from tests.providers.test_request_bodies import PNG

pytestmark = pytest.mark.slow

LOADED = "image => image.complete && image.naturalWidth > 0"


async def test_an_attached_image_shows_in_the_conversation(
    engine_process: EngineProcess, browser: Browser, shots: Path
) -> None:
    page, base = await logged_in_page(engine_process, browser)
    await open_conversation(page, base, "files")
    await page.evaluate("window.notReloaded = true")
    await page.get_by_label("Files").set_input_files(
        [
            {"name": "map.png", "mimeType": "image/png", "buffer": PNG},
            {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"remember the milk"},
        ]
    )
    await page.get_by_label("Message").fill("what is this?")
    await page.get_by_role("button", name="Send").click()

    sent = page.locator(".card.user_message").last
    image = sent.locator('img[alt="map.png"]')
    await image.wait_for()
    await page.wait_for_function(
        f"() => ({LOADED})(document.querySelector('.card.user_message img[alt=\"map.png\"]'))"
    )
    link = sent.get_by_role("link", name="notes.txt")
    assert await link.get_attribute("download") == "notes.txt"
    assert "(17 B)" in await sent.inner_text()
    assert await sent.locator("p.text").inner_text() == "what is this?"
    assert await page.evaluate("window.notReloaded") is True
    assert await page.get_by_label("Files").evaluate("input => input.files.length") == 0
    await page.locator(".card.assistant_message p.text", has_text="echo:").wait_for()
    assert await serious_violations(page) == []

    # The history card, after a reload, is the same: the image is served behind the session.
    await page.reload()
    card = page.locator("#history .card.user_message").last
    await page.wait_for_function(
        f"() => ({LOADED})(document.querySelector('#history .card.user_message img'))"
    )
    assert await card.locator("img").get_attribute("alt") == "map.png"
    assert await card.get_by_role("link", name="notes.txt").count() == 1
    await page.screenshot(path=shots / "chat-files.png", full_page=True)
    assert await serious_violations(page) == []

    # A file alone is a message too.
    await page.get_by_label("Files").set_input_files(
        {"name": "alone.png", "mimeType": "image/png", "buffer": PNG}
    )
    await page.get_by_role("button", name="Send").click()
    await page.locator('.card.user_message img[alt="alone.png"]').wait_for()


async def test_a_text_message_carries_no_file(
    engine_process: EngineProcess, browser: Browser
) -> None:
    """The composer's file field left empty adds nothing: no file is sent, shown,
    recorded in the history, or told to the model (whose echo repeats what it was told)."""
    page, base = await logged_in_page(engine_process, browser)
    await open_conversation(page, base, "words")
    async with page.expect_request(
        lambda request: request.method == "POST" and request.url.endswith("/chat/dashboard/words")
    ) as posted:
        await send(page, "just words")
    body = (await posted.value).post_data_buffer or b""
    assert b'name="text"' in body and b'name="file"' not in body  # the browser sent no file part
    reply = page.locator(".card.assistant_message:not(.live) p.text")
    await reply.wait_for()
    assert await reply.inner_text() == "echo: just words"
    sent = page.locator(".card.user_message").last
    assert await sent.locator("p.text").inner_text() == "just words"
    assert await sent.locator("ul.files").count() == 0
    await page.reload()
    card = page.locator("#history .card.user_message").last
    assert await card.locator("p.text").inner_text() == "just words"
    assert await card.locator("ul.files").count() == 0
    assert await page.locator("#history .card.assistant_message p.text").inner_text() == (
        "echo: just words"
    )

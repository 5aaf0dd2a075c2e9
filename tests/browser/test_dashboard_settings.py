"""The Settings pages in a real browser against a real engine: a plugin loaded through the
form made from its schema and unloaded, a credential set and shown by name only, and
every Settings page checked by axe-core and at 375 px in dark mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from playwright.async_api import Browser

from tests.browser.conftest import logged_in_page, login_link, serious_violations
from tests.conftest import EngineProcess

pytestmark = pytest.mark.slow

PAGES = {
    "plugins": "/settings",
    "load-plugin": "/settings/plugins/shell",
    "providers": "/settings/providers",
    "credentials": "/settings/credentials",
    "keys": "/settings/keys",
    "log": "/settings/log",
}


async def test_a_plugin_is_loaded_through_its_generated_form_and_unloaded(
    engine_process: EngineProcess, browser: Browser, shots: Path
) -> None:
    page, base = await logged_in_page(engine_process, browser)
    await page.goto(base + "/settings")
    await page.get_by_role("link", name="Load Clock…").click()
    await page.wait_for_url(base + "/settings/plugins/clock")
    assert await page.get_by_label("Timezone").input_value() == "UTC"  # the schema's default
    await page.get_by_label("Instance id").fill("paris")
    await page.get_by_label("Timezone").fill("Mars/Olympus")
    await page.get_by_label("Tool name").fill("paris_time")
    await page.get_by_role("button", name="Load").click()
    # Refused by the plugin's own model: said, with everything typed still there.
    assert "unknown time zone" in await page.get_by_role("alert").inner_text()
    assert await page.get_by_label("Timezone").get_attribute("aria-invalid") == "true"
    assert await page.get_by_label("Instance id").input_value() == "paris"
    assert await page.get_by_label("Tool name").input_value() == "paris_time"
    await page.screenshot(path=shots / "settings-load-plugin-refused.png", full_page=True)
    assert await serious_violations(page) == []
    await page.get_by_label("Timezone").fill("Europe/Paris")
    await page.get_by_role("button", name="Load").click()
    await page.wait_for_url(base + "/settings")
    row = page.locator("tr", has_text="paris")
    assert "loaded" in await row.inner_text()
    assert "Europe/Paris" in await row.inner_text()
    async with engine_process.async_client() as client:
        listing = (await client.get("/v1/engine/plugins")).json()
    assert [item["id"] for item in listing["loaded"]] == ["paris"]

    await page.get_by_role("button", name="Unload paris").click()
    await page.wait_for_url(base + "/settings")
    assert "unloaded" in await page.locator("tr", has_text="paris").inner_text()
    async with engine_process.async_client() as client:
        assert (await client.get("/v1/engine/plugins")).json()["loaded"] == []


async def test_a_credential_is_set_and_only_its_name_shows(
    engine_process: EngineProcess, browser: Browser
) -> None:
    secret = "sk-browser-secret-98765"
    page, base = await logged_in_page(engine_process, browser)
    await page.goto(base + "/settings/credentials")
    await page.get_by_label("Entry (").fill("scripted")
    await page.get_by_label("Field").fill("apiKey")
    await page.get_by_label("Value").fill(secret)
    await page.get_by_role("button", name="Set").click()
    await page.wait_for_url(base + "/settings/credentials")
    row = page.locator("tr", has_text="scripted")
    assert "apiKey" in await row.inner_text()
    assert await page.get_by_label("Value").input_value() == ""
    for path in PAGES.values():
        await page.goto(base + path)
        assert secret not in await page.content(), path
    async with engine_process.async_client() as client:
        entries = (await client.get("/v1/engine/auth")).json()["entries"]
    assert entries == {"scripted": {"type": "apiKey", "fields": ["apiKey"]}}
    await page.goto(base + "/settings/credentials")
    await page.get_by_role("button", name="Delete the entry scripted").click()
    await page.wait_for_url(base + "/settings/credentials")
    assert "No credential yet." in await page.content()


async def test_every_settings_page_is_accessible_and_fits_a_phone_in_dark_mode(
    engine_process: EngineProcess, browser: Browser, shots: Path
) -> None:
    page, base = await logged_in_page(engine_process, browser)
    # Something in every table: a plugin instance, a second provider, a credential.
    async with engine_process.async_client() as client:
        for method, path, body in [
            ("POST", "/v1/engine/plugins/load",
             {"pluginId": "web", "instanceId": "web", "settings": {"maxRedirects": 2}}),
            ("POST", "/v1/engine/providers",
             {"id": "backup-model-with-a-long-name", "type": "scripted", "model": "echo"}),
            ("POST", "/v1/engine/auth", {"id": "scripted", "key": "apiKey", "value": "x"}),
        ]:  # fmt: skip
            answer = await client.request(method, path, json=body)
            assert answer.is_success, answer.text
    findings: list[str] = []
    for name, path in PAGES.items():
        await page.goto(base + path)
        assert page.url == base + path
        assert await page.locator("h1").inner_text()
        current = page.locator('nav[aria-label="Settings"] a[aria-current="page"]')
        assert await current.count() == 1
        await page.screenshot(path=shots / f"settings-{name}.png", full_page=True)
        findings += await serious_violations(page)
    assert findings == []
    # The log page has lines from the engine that runs now.
    await page.goto(base + "/settings/log?level=INFO")
    assert await page.locator("table.log-table tbody tr").count() > 0

    link = await asyncio.to_thread(login_link, engine_process)  # a session of its own
    context = await browser.new_context(viewport={"width": 375, "height": 800}, color_scheme="dark")
    phone_page = await context.new_page()
    await phone_page.goto(link)
    for name, path in PAGES.items():
        await phone_page.goto(base + path)
        overflow = await phone_page.evaluate(
            "document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth"
        )
        assert overflow <= 0, f"{path} is {overflow} px wider than a 375 px screen"
        background = await phone_page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(20, 20, 20)", background  # the dark palette
        await phone_page.screenshot(path=shots / f"settings-{name}-phone-dark.png", full_page=True)
        assert await serious_violations(phone_page) == [], path  # contrast in the dark palette
    # Keyboard: the settings sub-navigation is reached with Tab and followed with Enter.
    await phone_page.goto(base + "/settings")
    for _ in range(30):
        await phone_page.keyboard.press("Tab")
        focused = await phone_page.evaluate("document.activeElement.textContent")
        if focused == "Providers":
            break
    await phone_page.keyboard.press("Enter")
    await phone_page.wait_for_url(base + "/settings/providers")

    await context.close()

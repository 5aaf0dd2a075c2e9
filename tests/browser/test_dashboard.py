"""The dashboard in a real browser (Debian's chromium, driven by Playwright) against a real
engine: the login link, every page, a screenshot of each under the test run's output."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from playwright.async_api import Browser

from tests.agents.test_subagents import call, rules_settings
from tests.browser.conftest import logged_in_page, login_link, serious_violations
from tests.conftest import EngineProcess, write_settings

pytestmark = pytest.mark.slow

PAGES = [
    "/",
    "/chat",
    "/chat/dashboard/web",
    "/agents",
    "/permissions",
    "/automations",
    "/proactive",
    "/settings/keys",
]


async def test_a_browser_logs_in_once_and_sees_every_page(
    engine_process: EngineProcess, browser: Browser, shots: Path
) -> None:
    await asyncio.to_thread(engine_process.start)
    link = await asyncio.to_thread(login_link, engine_process)
    base = link.split("/login", 1)[0]

    stranger = await browser.new_page()
    await stranger.goto(base + "/agents")
    assert stranger.url == base + "/login"  # no session: to the login page
    assert await stranger.locator("h1").inner_text() == "Log in to the dashboard"
    await stranger.screenshot(path=shots / "login.png", full_page=True)
    findings = await serious_violations(stranger)

    page = await browser.new_page()
    await page.goto(link)
    assert page.url == base + "/"
    assert await page.locator("h1").inner_text() == "Overview"
    for path in PAGES:
        await page.goto(base + path)
        assert page.url == base + path
        heading = await page.locator("h1").inner_text()
        name = path.strip("/").replace("/", "-") or "overview"
        await page.screenshot(path=shots / f"{name}.png", full_page=True)
        assert heading  # every page says what it is
        findings += await serious_violations(page)
    assert findings == []
    # The same link in another browser: spent.
    again = await browser.new_page()
    response = await again.goto(link)
    assert response is not None and response.status == 403
    assert "used already" in await again.locator(".alert").inner_text()

    # Logging out ends the session in this browser.
    await page.goto(base + "/")
    await page.get_by_role("button", name="Log out").click()
    await page.wait_for_url(base + "/login")
    await page.goto(base + "/")
    assert page.url == base + "/login"


async def test_every_page_fits_a_phone_and_follows_dark_mode(
    engine_process: EngineProcess, browser: Browser, shots: Path
) -> None:
    """375 px wide, dark: no page scrolls sideways (tables scroll inside themselves)."""
    await asyncio.to_thread(engine_process.start)
    link = await asyncio.to_thread(login_link, engine_process)
    base = link.split("/login", 1)[0]
    context = await browser.new_context(viewport={"width": 375, "height": 800}, color_scheme="dark")
    page = await context.new_page()
    await page.goto(link)
    for path in PAGES:
        await page.goto(base + path)
        overflow = await page.evaluate(
            "document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth"
        )
        assert overflow <= 0, f"{path} is {overflow} px wider than a 375 px screen"
        background = await page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(20, 20, 20)", background  # the dark palette
        name = path.strip("/").replace("/", "-") or "overview"
        await page.screenshot(path=shots / f"{name}-phone-dark.png", full_page=True)
    await context.close()


async def test_a_cron_task_is_previewed_created_and_run_now(
    engine_process: EngineProcess, browser: Browser, shots: Path
) -> None:
    page, base = await logged_in_page(engine_process, browser)
    await page.goto(base + "/automations")
    await page.get_by_label("Name").fill("Morning report")
    await page.get_by_label("Schedule").fill("0 9 * * 1-5")
    await page.get_by_label("Time zone").fill("Europe/Berlin")
    await page.get_by_label("Prompt").fill("Summarise the night.")
    await page.get_by_role("button", name="Preview the next runs").click()
    await page.wait_for_selector("#preview")
    assert await page.locator("#preview + ol li").count() == 5
    assert await page.get_by_label("Name").input_value() == "Morning report"  # kept
    await page.screenshot(path=shots / "automations-preview.png", full_page=True)
    await page.get_by_role("button", name="Create").click()
    await page.wait_for_url(base + "/automations")
    row = page.locator("tr", has_text="Morning report")
    assert await row.count() == 1
    await page.get_by_role("button", name="Run Morning report now").click()
    await page.wait_for_url(base + "/automations")
    async with asyncio.timeout(30):  # the run's agent answers and the ledger says so
        while "never" in await page.locator("tr", has_text="Morning report").inner_text():
            await asyncio.sleep(0.2)
            await page.reload()
    assert "ran, " in await page.locator("tr", has_text="Morning report").inner_text()
    # Its own page: the run from the ledger, and the edit form.
    await page.get_by_role("link", name="Morning report").click()
    await page.wait_for_url(re.compile(re.escape(base) + r"/automations/cron/[\w-]+"))
    assert "ran" in await page.locator("table").inner_text()
    await page.screenshot(path=shots / "automation-task.png", full_page=True)
    assert await serious_violations(page) == []


async def test_an_api_key_is_created_shown_once_and_revoked(
    engine_process: EngineProcess, browser: Browser
) -> None:
    page, base = await logged_in_page(engine_process, browser)
    await page.goto(base + "/settings/keys")
    await page.get_by_label("Name").fill("scraper")
    await page.get_by_label("metrics").check()
    await page.get_by_role("button", name="Create").click()
    shown = await page.locator(".created code").inner_text()
    assert shown.startswith("cb_")
    await page.goto(base + "/settings/keys")
    assert shown not in await page.content()  # shown once
    await page.get_by_role("button", name="Revoke scraper").click()
    await page.wait_for_url(base + "/settings/keys")
    assert "revoked" in await page.locator("tr", has_text="scraper").inner_text()


async def test_a_permission_request_is_allowed_from_the_permissions_page(
    engine_process: EngineProcess, browser: Browser, shots: Path
) -> None:
    """An agent asks (the scripted model calls request_permission); a person allows it in
    the browser; the agent is told and goes on."""
    rules = [
        {
            "match": "read my notes",
            "response": call("request_permission", permission="@read:/etc", reason="notes"),
        },
        {"match": "was sent to the user", "response": "Asked."},
        {"match": "Permission granted: @read:/etc", "response": "Thanks, reading."},
    ]
    write_settings(engine_process.paths, rules_settings(rules))
    page, base = await logged_in_page(engine_process, browser)
    async with engine_process.async_client() as client:
        posted = await client.post(
            "/v1/engine/messages", json={"userId": "ann", "channelId": "c", "text": "read my notes"}
        )
    assert posted.status_code == 202, posted.text
    await page.goto(base + "/permissions")
    async with asyncio.timeout(30):  # the request shows once the agent has asked
        while await page.get_by_role("button", name="Allow").count() == 0:
            await asyncio.sleep(0.2)
            await page.reload()
    assert "@read:/etc" in await page.locator(".card").inner_text()
    await page.get_by_role("button", name="Allow").click()
    await page.wait_for_url(base + "/permissions")
    assert "No request is waiting." in await page.content()
    assert "granted" in await page.locator("table").inner_text()
    agent_id = posted.json()["agentId"]
    async with asyncio.timeout(30), engine_process.async_client() as client:
        while True:  # the agent was told, and answered
            page_of = await client.get(f"/v1/engine/agents/{agent_id}/history", params={"limit": 5})
            if any(r.get("text") == "Thanks, reading." for r in page_of.json()["records"]):
                break
            await asyncio.sleep(0.1)
    # The agent's page shows the grant, which can be taken back there.
    await page.goto(f"{base}/agents/{agent_id}")
    assert "@read:/etc" in await page.locator(".grants").inner_text()
    await page.screenshot(path=shots / "agent.png", full_page=True)
    assert await serious_violations(page) == []
    await page.get_by_role("button", name="Revoke @read:/etc").click()
    await page.wait_for_url(f"{base}/agents/{agent_id}")
    assert await page.get_by_role("button", name="Revoke @read:/etc").count() == 0


async def test_a_proactive_agent_is_created_and_its_output_shows_live(
    engine_process: EngineProcess, browser: Browser, shots: Path
) -> None:
    """The run says something, works a while, then answers: what it said shows while
    it still runs, on the page as it was loaded."""
    rules = [
        {
            "match": "Write the digest.",
            "response": {
                "text": "Gathering the news.",
                "toolCalls": [{"name": "list_agents", "arguments": {}}],
            },
        },
        {"match": "", "response": "The digest is done."},
    ]
    write_settings(engine_process.paths, rules_settings(rules, delayS=2.0))
    page, base = await logged_in_page(engine_process, browser)
    await page.goto(base + "/proactive")
    await page.get_by_label("Name").fill("Digest")
    await page.get_by_label("Objective").fill("Write the digest.")
    await page.get_by_label("Schedule").fill("0 7 * * *")
    await page.get_by_label("Runner").select_option("engine")
    await page.get_by_role("button", name="Create").click()
    await page.wait_for_url(re.compile(re.escape(base) + r"/proactive/\w+"))
    assert await page.locator("h1").inner_text() == "Digest"
    await page.get_by_role("button", name="Run now").click()
    await page.wait_for_load_state()
    loaded = await page.evaluate("performance.timeOrigin")
    assert await page.locator("#output").is_hidden()  # nothing written yet
    await page.locator("#output", has_text="Gathering the news.").wait_for()
    assert "running" in await page.locator("#state").inner_text()
    assert await page.evaluate("performance.timeOrigin") == loaded  # live, not reloaded
    await page.screenshot(path=shots / "proactive-agent.png", full_page=True)
    # When the run ends the page shows its row.
    await page.locator("table", has_text="success").wait_for(timeout=30_000)
    assert "The digest is done." in await page.locator("#output").inner_text()
    assert await serious_violations(page) == []


async def test_the_overview_feed_shows_events_as_they_happen(
    engine_process: EngineProcess, browser: Browser
) -> None:
    page, base = await logged_in_page(engine_process, browser)
    assert page.url == base + "/"
    async with engine_process.async_client() as client:
        posted = await client.post(
            "/v1/engine/messages", json={"userId": "ann", "channelId": "c", "text": "hello"}
        )
    assert posted.status_code == 202, posted.text
    agent_id = posted.json()["agentId"]
    reply = page.locator("#feed li", has_text="agent.outgoing").filter(has_text=agent_id)
    await reply.wait_for()
    assert await page.locator("#feed-empty").is_hidden()

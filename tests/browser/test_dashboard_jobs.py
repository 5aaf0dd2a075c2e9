"""The Jobs pages in chromium against a real engine whose workers run jobs with a scripted
model: a job made from the form goes through plan approval (the plan shown, edited in its
box, approved), completes, and its artifact downloads; the list and the log follow on
their own; every page passes axe-core and fits a phone; a dead engine is said plainly."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page

from tests.browser.conftest import logged_in_page, login_link, serious_violations
from tests.conftest import EngineProcess, write_settings
from tests.web.test_job_pages import RULES

pytestmark = pytest.mark.slow

SETTINGS = {"providers": [{"id": "scripted", "model": "rules", "options": {"rules": RULES}}]}
LIVE_S = 30  # the live parts refresh every 3 s; a job takes a few model calls


async def snap(page: Page, shots: Path, name: str) -> None:
    await page.screenshot(path=shots / f"{name}.png", full_page=True)
    assert await serious_violations(page) == [], name


async def test_a_job_is_planned_edited_approved_and_its_artifact_downloaded(
    engine_process: EngineProcess, browser: Browser, shots: Path
) -> None:
    write_settings(engine_process.paths, SETTINGS)
    page, base = await logged_in_page(engine_process, browser)
    await page.goto(base + "/jobs")
    assert await page.locator("h1").inner_text() == "Jobs"
    assert "No job yet." in await page.content()
    await snap(page, shots, "jobs-empty")

    await page.get_by_label("Task").fill("plan a report")
    await page.get_by_label("Asking you").select_option("plan_approval")
    await page.get_by_label("Files for the job").set_input_files(
        {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"the notes"}
    )
    await page.get_by_role("button", name="Queue the job").click()
    await page.wait_for_url(re.compile(re.escape(base) + r"/jobs/[0-9a-f-]{36}"))
    job_url = page.url

    # The plan card appears by itself (the page's live part), with the plan rendered.
    card = page.locator("section.waiting")
    await card.get_by_role("heading", name="Plan to approve").wait_for(timeout=LIVE_S * 1000)
    assert await card.locator(".plan ol li").inner_text() == "Write report.md"
    await snap(page, shots, "job-plan")

    box = page.get_by_label("The plan (edit it, then send your version)")
    assert await box.input_value() == "## Plan\n\n1. Write report.md"
    await box.fill("## Plan v2\n\n1. Write report.md, briefly")
    await page.get_by_role("button", name="Send my edited plan").click()
    await page.wait_for_url(job_url)
    # The log says so as it happens (its stream), and the job asks again.
    await page.locator(".log li", has_text="User responded (edit)").wait_for(timeout=LIVE_S * 1000)
    await card.get_by_role("heading", name="Plan to approve").wait_for(timeout=LIVE_S * 1000)
    await page.get_by_role("button", name="Approve the plan").click()
    await page.wait_for_url(job_url)

    await page.get_by_text("Report written.").wait_for(timeout=LIVE_S * 1000)
    assert "completed" in await page.locator(".facts").inner_text()
    await page.locator(".log li", has_text="Job completed").wait_for(timeout=LIVE_S * 1000)
    assert await page.get_by_role("button", name="Cancel the job").count() == 0
    async with page.expect_download() as downloading:
        await page.get_by_role("link", name="report.md").click()
    download = await downloading.value
    assert download.suggested_filename == "report.md"
    saved = await download.path()
    assert await asyncio.to_thread(saved.read_bytes) == b"# R\n"
    await snap(page, shots, "job-completed")

    # The list shows it, completed, without a reload.
    await page.goto(base + "/jobs")
    row = page.locator("table.jobs tr", has_text="plan a report")
    assert "completed" in await row.inner_text()
    await snap(page, shots, "jobs")
    async with engine_process.async_client() as client:
        made = await client.post("/api/v1/jobs", json={"task": "ask me which"})
    assert made.status_code == 201, made.text
    await page.locator("table.jobs tr", has_text="ask me which").wait_for(timeout=LIVE_S * 1000)

    await page.goto(base + "/jobs/workers")
    assert await page.locator("h1").inner_text() == "Workers and metrics"
    await snap(page, shots, "job-workers")

    # A phone, dark: no page is wider than the screen.
    link = await asyncio.to_thread(login_link, engine_process)
    phone = await browser.new_context(
        viewport={"width": 375, "height": 800}, color_scheme="dark", accept_downloads=False
    )
    small = await phone.new_page()
    await small.goto(link)
    for path, name in (
        ("/jobs", "jobs"),
        (job_url[len(base) :], "job"),
        ("/jobs/workers", "job-workers"),
    ):
        await small.goto(base + path)
        overflow = await small.evaluate(
            "document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth"
        )
        assert overflow <= 0, f"{path} is {overflow} px wider than a 375 px screen"
        await snap(small, shots, f"{name}-phone-dark")
    await phone.close()


async def test_a_dead_engine_is_said_on_the_list_and_the_log(
    engine_process: EngineProcess, browser: Browser, shots: Path
) -> None:
    write_settings(engine_process.paths, SETTINGS)
    page, base = await logged_in_page(engine_process, browser)
    async with engine_process.async_client() as client:
        made = await client.post("/api/v1/jobs", json={"task": "ask me which"})
    job_id = made.json()["id"]
    await page.goto(f"{base}/jobs/{job_id}")
    await page.get_by_role("heading", name="The job asks you").wait_for(timeout=LIVE_S * 1000)
    listing = await browser.new_page()
    await listing.goto(await asyncio.to_thread(login_link, engine_process))
    await listing.goto(base + "/jobs")
    offline = listing.locator("[data-offline]")
    assert await offline.is_hidden()

    await asyncio.to_thread(engine_process.kill)
    await offline.wait_for(state="visible", timeout=LIVE_S * 1000)
    assert "Engine unreachable" in await offline.inner_text()
    await page.locator("[data-offline]").wait_for(state="visible", timeout=LIVE_S * 1000)
    state = page.locator("[data-log-state]")
    await page.wait_for_function(
        "document.querySelector('[data-log-state]').textContent.includes('reconnecting')"
    )
    assert await state.inner_text() == "Live log disconnected, reconnecting…"
    await listing.screenshot(path=shots / "jobs-engine-unreachable.png", full_page=True)

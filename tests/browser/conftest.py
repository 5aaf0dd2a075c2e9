"""What every browser test shares: Debian's chromium under Playwright, a folder for
screenshots, axe-core's findings, and a session through a login link."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Browser, Page, async_playwright

from tests.cli.test_cli import cli
from tests.conftest import EngineProcess

CHROMIUM = os.environ.get("CLAYBOT_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Screenshots for people to look at: one per page, kept after the run.
SHOTS = Path(os.environ.get("CLAYBOT_SCREENSHOTS", "test-output/screenshots"))


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"no chromium at {CHROMIUM}: `apt-get install chromium` (.ci/run does)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        await launched.close()


@pytest.fixture
def shots() -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS


async def serious_violations(page: Page) -> list[str]:
    """axe-core's serious and critical findings on the page as it is."""
    results = await Axe().run(page)
    return [
        f"{page.url}: {violation['id']} ({violation['impact']}): {violation['help']}"
        for violation in results.response["violations"]
        if violation["impact"] in ("serious", "critical")
    ]


def login_link(engine: EngineProcess) -> str:
    answer = cli(engine.paths, "dashboard", "--json")
    assert answer.returncode == 0, answer.stderr
    return str(json.loads(answer.stdout)["url"])


async def logged_in_page(engine: EngineProcess, browser: Browser) -> tuple[Page, str]:
    await asyncio.to_thread(engine.start)
    link = await asyncio.to_thread(login_link, engine)
    page = await browser.new_page()
    await page.goto(link)
    return page, link.split("/login", 1)[0]

"""``claybot dashboard`` through a running engine, and its link on the real TCP listener."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.cli.test_cli import cli
from tests.conftest import EngineProcess

pytestmark = pytest.mark.slow


def test_the_printed_link_logs_a_browser_in_once(engine_process: EngineProcess) -> None:
    engine_process.start()
    printed = cli(engine_process.paths, "dashboard", "--no-open")
    assert printed.returncode == 0, printed.stderr
    assert "works once, for 5 minutes" in printed.stdout
    answer = cli(engine_process.paths, "dashboard", "--json")
    assert answer.returncode == 0, answer.stderr
    url = json.loads(answer.stdout)["url"]
    base = url.split("/login", 1)[0]
    with httpx.Client(base_url=base) as browser:
        assert browser.get("/").headers["location"] == "/login"  # no session yet
        logged_in = browser.get(url)
        assert logged_in.status_code == 303, logged_in.text
        overview = browser.get("/")
        assert overview.status_code == 200 and "<h1>Overview</h1>" in overview.text
        assert browser.get("/v1/engine/status").status_code == 401  # the API still needs a key
    with httpx.Client(base_url=base) as other:
        assert other.get(url).status_code == 403  # the link was spent


def test_without_an_engine_it_says_so(engine_process: EngineProcess) -> None:
    answer = cli(engine_process.paths, "dashboard", "--no-open")
    assert answer.returncode != 0
    assert "no engine answers" in answer.stderr and "claybot" in answer.stderr

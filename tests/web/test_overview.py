"""The Overview: the engine's state in numbers, its recent errors, its live feed's door."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert

from claybot.connectors.base import InboundMessage
from claybot.db.tables import workers
from claybot.engine.engine import Engine
from claybot.jobs.model import NewJob
from claybot.jobs.worker import default_worker_id
from claybot.kernel.event_types import EventType
from tests.web.conftest import Dashboard


def fact(page: str, name: str) -> str:
    """The value of one ``<dt>name</dt><dd>value</dd>`` pair, tags removed."""
    found = re.search(rf"<dt>{name}</dt><dd>(.*?)</dd>", page, re.S)
    assert found is not None, name
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


async def test_the_overview_counts_agents_turns_and_jobs(
    engine: Engine, dashboard: Dashboard
) -> None:
    for user in ("ann", "bob"):
        turn = await engine.agents.submit_inbound(InboundMessage("local", user, "c", "hi"))
        await turn.outcome(10)
    database = await engine.jobs.database()
    for number in range(3):
        await database.jobs.create(NewJob(task=f"task {number}"))
    await dashboard.log_in()
    page = (await dashboard.tcp.get("/")).text
    assert fact(page, "Agents") == "2 (2 user)"
    assert fact(page, "Turns") == "0 running, 0 queued"
    jobs = fact(page, "Jobs")  # by status: where they are depends on the engine's worker
    assert sum(int(count) for count in re.findall(r"(\d+) \w+", jobs)) == 3, jobs
    assert 'data-events="/activity?after=' in page


async def test_the_overview_counts_the_workers_that_matter(
    engine: Engine, dashboard: Dashboard
) -> None:
    """Stopped workers are not dead ones, and the rows of those long gone are left out."""
    database = await engine.jobs.database()
    async with asyncio.timeout(20):  # the engine's own worker starts in the background
        while default_worker_id() not in {row.id for row in await database.workers.listing()}:
            await asyncio.sleep(0.05)
    now = datetime.now(UTC)
    gone = [
        ("restarted-now", "stopped", timedelta(minutes=5)),
        ("restarted-earlier", "stopped", timedelta(hours=2)),  # past its hour
        ("killed-now", "active", timedelta(minutes=10)),  # silent: dead, though not swept
        ("killed-last-week", "dead", timedelta(days=7)),  # past its day
    ]
    async with database.tables.engine.begin() as connection:
        for worker_id, status, ago in gone:
            await connection.execute(
                insert(workers).values(
                    id=worker_id,
                    hostname="h",
                    pid=1,
                    version="1",
                    status=status,
                    active_jobs=1,
                    last_heartbeat=now - ago,
                    created_at=now - ago,
                )
            )
    await dashboard.log_in()
    page = (await dashboard.tcp.get("/")).text
    assert fact(page, "Workers") == "1 active, 1 dead, 1 stopped"


async def test_recent_errors_show_as_text(engine: Engine, dashboard: Dashboard) -> None:
    engine.events.emit(
        EventType.AGENT_ERROR,
        {"agentId": "a1", "messageId": "m1", "error": "<script>alert(1)</script> failed"},
    )
    await dashboard.log_in()
    page = (await dashboard.tcp.get("/")).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; failed" in page
    assert "<script>alert(1)" not in page
    assert 'href="/agents/a1"' in page


async def test_the_feed_needs_a_session(dashboard: Dashboard) -> None:
    answer = await dashboard.tcp.get("/activity")
    assert answer.status_code == 303 and answer.headers["location"] == "/login"

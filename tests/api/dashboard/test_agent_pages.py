"""The Agents pages: the table, an agent's history as cards, and reset."""

from __future__ import annotations

import asyncio
import re

from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine
from tests.api.dashboard.conftest import Dashboard, csrf_of

HOSTILE = '<script>alert("x")</script> and **bold** <img src=x onerror=alert(1)>'


async def test_every_agent_is_listed_and_found(engine: Engine, dashboard: Dashboard) -> None:
    agents = engine.agents
    for user in ("ann", "bob", "cleo"):
        turn = await agents.submit_inbound(InboundMessage("local", user, "desk", "hi", user))
        await turn.outcome(10)
    await dashboard.log_in()
    listed = await dashboard.tcp.get("/agents")
    assert listed.status_code == 200 and "3 agents." in listed.text
    found = await dashboard.tcp.get("/agents", params={"q": "bob", "kind": "user"})
    assert "1 agent match." in found.text
    links = re.findall(r'href="/agents/(\w+)"', found.text)
    assert len(links) == 1
    none = await dashboard.tcp.get("/agents", params={"kind": "cron"})
    assert "0 agents match." in none.text


async def test_an_agents_history_shows_text_as_text(engine: Engine, dashboard: Dashboard) -> None:
    turn = await engine.agents.submit_inbound(InboundMessage("local", "eve", "desk", HOSTILE, "m1"))
    await turn.outcome(10)
    await dashboard.log_in()
    page = await dashboard.tcp.get(f"/agents/{turn.agent_id}")
    assert page.status_code == 200
    assert "<script>" not in page.text and "<img" not in page.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page.text
    assert page.text.count('class="card ') == 3  # start, the message, its echo


async def test_history_pages_go_back_fifty_records_at_a_time(
    engine: Engine, dashboard: Dashboard
) -> None:
    agents = engine.agents
    for n in range(30):
        turn = await agents.submit_inbound(InboundMessage("local", "fay", "desk", f"n{n}", f"m{n}"))
    await turn.outcome(10)
    await dashboard.log_in()
    newest = await dashboard.tcp.get(f"/agents/{turn.agent_id}")
    seqs = [int(n) for n in re.findall(r'id="r(\d+)"', newest.text)]
    assert seqs == list(range(11, 61))  # 61 records: start, then 30 messages and replies
    older = re.search(r'href="/agents/\w+\?before=(\d+)"', newest.text)
    assert older is not None and older.group(1) == "11"
    back = await dashboard.tcp.get(f"/agents/{turn.agent_id}", params={"before": 11})
    assert [int(n) for n in re.findall(r'id="r(\d+)"', back.text)] == list(range(11))


async def test_reset_from_the_page_needs_the_forms_token(
    engine: Engine, dashboard: Dashboard
) -> None:
    turn = await engine.agents.submit_inbound(InboundMessage("local", "gus", "desk", "hi", "m1"))
    await turn.outcome(10)
    await dashboard.log_in()
    page = await dashboard.tcp.get(f"/agents/{turn.agent_id}")
    csrf = csrf_of(page.text)
    refused = await dashboard.tcp.post(f"/agents/{turn.agent_id}/reset")
    assert refused.status_code == 403
    done = await dashboard.tcp.post(f"/agents/{turn.agent_id}/reset", data={"csrf": csrf})
    assert done.status_code == 303

    async def newest_type() -> str:
        page = await engine.agents.history(turn.agent_id, after=None, before=None, limit=1)
        return str(page.records[-1]["type"])

    async with asyncio.timeout(10):  # the reset is queued: wait for its record
        while await newest_type() != "reset":
            await asyncio.sleep(0.01)


async def test_an_unknown_agent_is_a_404_page_and_no_session_goes_to_login(
    dashboard: Dashboard,
) -> None:
    assert (await dashboard.tcp.get("/agents")).status_code == 303
    await dashboard.log_in()
    missing = await dashboard.tcp.get("/agents/nobody")
    assert missing.status_code == 404 and "Not found" in missing.text

"""The Agents pages: the table, an agent's history as cards, its grants and subagents,
and reset."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine
from claybot.permissions.requests import Conversation
from tests.web.conftest import Dashboard, csrf_of

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
        page = await engine.agents.histories.page(turn.agent_id, after=None, before=None, limit=1)
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


async def test_a_grant_is_shown_and_revoked_in_inbox_order(
    engine: Engine, dashboard: Dashboard, tmp_path: Path
) -> None:
    turn = await engine.agents.submit_inbound(InboundMessage("local", "hal", "desk", "hi", "m1"))
    await turn.outcome(10)
    agent_id = turn.agent_id
    notes = (tmp_path / "notes").resolve()
    notes.mkdir()
    for permission in (f"@write:{notes}", "@network"):
        asked = await engine.permissions.request(
            agent_id=agent_id,
            agent_label="hal",
            permission=permission,
            reason="work",
            where=Conversation("local", "hal", "desk"),
        )
        await engine.permissions.decide(asked.id, True, "test")
    async with asyncio.timeout(10):  # each decision is applied by the agent, in turn
        while not (await engine.agents.permissions_of(agent_id)).network:
            await asyncio.sleep(0.02)
    await dashboard.log_in()
    page = await dashboard.tcp.get(f"/agents/{agent_id}")
    assert f"<code>@write:{notes}</code>" in page.text and "<code>@network</code>" in page.text
    assert f"<code>@read:{notes}</code>" not in page.text  # write implies it: shown once
    csrf = csrf_of(page.text)

    form = {"csrf": csrf, "permission": f"@write:{notes}"}
    assert (await dashboard.tcp.post(f"/agents/{agent_id}/revoke", data={})).status_code == 403
    revoked = await dashboard.tcp.post(f"/agents/{agent_id}/revoke", data=form)
    assert revoked.status_code == 303
    held = await engine.agents.permissions_of(agent_id)
    assert str(notes) not in held.writeDirs and str(notes) in held.readDirs and held.network
    page = await dashboard.tcp.get(f"/agents/{agent_id}")
    assert f"<code>@read:{notes}</code>" in page.text  # read stays
    network = {"csrf": csrf, "permission": "@network"}
    assert (await dashboard.tcp.post(f"/agents/{agent_id}/revoke", data=network)).status_code == 303
    assert not (await engine.agents.permissions_of(agent_id)).network

    bad = await dashboard.tcp.post(
        f"/agents/{agent_id}/revoke", data={"csrf": csrf, "permission": "@read:relative"}
    )
    assert bad.status_code == 422 and "absolute" in bad.text
    unknown = await dashboard.tcp.post("/agents/nobody/revoke", data=network)
    assert unknown.status_code == 404


async def test_an_agents_subagents_show_as_a_tree(engine: Engine, dashboard: Dashboard) -> None:
    turn = await engine.agents.submit_inbound(InboundMessage("local", "ann", "desk", "hi", "m1"))
    await turn.outcome(10)
    system = engine.agents
    child = await system.subagents.start(turn.agent_id, "researcher", "look things up")
    grandchild = await system.subagents.start(child, "reader", "read one page")
    await dashboard.log_in()
    page = (await dashboard.tcp.get(f"/agents/{turn.agent_id}")).text
    assert "Subagents (2)" in page
    tree = page[page.index('<ul class="tree">') :]
    # The grandchild is inside the child's item: a tree, not a list.
    child_at = tree.index(f'href="/agents/{child}"')
    assert child_at < tree.index(f'href="/agents/{grandchild}"') < tree.index("</li>", child_at)
    below = (await dashboard.tcp.get(f"/agents/{grandchild}")).text
    assert f'A subagent of <a href="/agents/{child}">' in below
    assert "Subagents (" not in below

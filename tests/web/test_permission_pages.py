"""The Permissions page: pending requests answered, decisions listed."""

from __future__ import annotations

from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine
from claybot.permissions.requests import Conversation
from tests.web.conftest import Dashboard, csrf_of


async def test_a_permission_request_is_allowed_from_the_permissions_page(
    engine: Engine, dashboard: Dashboard
) -> None:
    turn = await engine.agents.submit_inbound(InboundMessage("local", "hal", "desk", "hi", "m1"))
    await turn.outcome(10)
    asked = await engine.permissions.request(
        agent_id=turn.agent_id,
        agent_label="hal's chat",
        permission="@read:/etc",
        reason="<b>my notes</b> live there",
        where=Conversation("local", "hal", "desk"),
    )
    await dashboard.log_in()
    page = await dashboard.tcp.get("/permissions")
    assert page.status_code == 200 and "@read:/etc" in page.text
    assert "&lt;b&gt;my notes&lt;/b&gt;" in page.text
    csrf = csrf_of(page.text)
    form = {"csrf": csrf, "decision": "allow"}
    refused = await dashboard.tcp.post(f"/permissions/{asked.id}", data={"decision": "allow"})
    assert refused.status_code == 403 and engine.permissions.get(asked.id).status == "pending"
    allowed = await dashboard.tcp.post(f"/permissions/{asked.id}", data=form)
    assert allowed.status_code == 303
    decided = engine.permissions.get(asked.id)
    assert (decided.status, decided.decided_by) == ("granted", "dashboard")
    again = await dashboard.tcp.post(f"/permissions/{asked.id}", data=form)
    assert again.status_code == 409 and "already" in again.text
    listed = await dashboard.tcp.get("/permissions")
    assert "No request is waiting." in listed.text and "granted" in listed.text

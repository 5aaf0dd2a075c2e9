"""The Chat page: webchat conversations, read and written in the dashboard."""

from __future__ import annotations

import asyncio

from claybot.agents.descriptors import UserDescriptor
from claybot.engine.engine import Engine
from claybot.kernel.events import Event
from claybot.permissions.requests import Conversation
from tests.web.conftest import Dashboard, csrf_of

FETCHED = {"X-Claybot-Fetch": "1"}


async def reply_to(engine: Engine, text: str) -> str:
    """Wait for the webchat reply to ``text`` (the echo provider's), and return it."""
    said = asyncio.get_running_loop().create_future()

    def heard(event: Event) -> None:
        message = event.payload.get("message") or {}
        if message.get("text") == f"echo: {text}" and not said.done():
            said.set_result(message["text"])

    remove = engine.events.add_listener(heard)
    try:
        async with asyncio.timeout(10):
            return str(await said)
    finally:
        remove()


async def test_a_conversation_is_started_written_and_read_back(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    tcp = dashboard.tcp
    empty = await tcp.get("/chat")
    assert empty.status_code == 200 and "No webchat conversation yet" in empty.text
    started = await tcp.get("/chat/new", params={"channel": "desk"})
    assert started.status_code == 303 and started.headers["location"] == "/chat/dashboard/desk"
    page = await tcp.get("/chat/dashboard/desk")
    assert page.status_code == 200 and 'id="composer"' in page.text
    assert 'data-events="/chat/dashboard/desk/events?after=' in page.text
    csrf = csrf_of(page.text)

    refused = await tcp.post("/chat/dashboard/desk", data={"text": "hello"})
    assert refused.status_code == 403  # no form token
    replied = asyncio.create_task(reply_to(engine, "hello"))
    await asyncio.sleep(0)
    sent = await tcp.post("/chat/dashboard/desk", data={"text": "hello", "csrf": csrf})
    assert sent.status_code == 303 and sent.headers["location"] == "/chat/dashboard/desk"
    assert await replied == "echo: hello"

    page = await tcp.get("/chat/dashboard/desk")
    assert '<p class="text">hello</p>' in page.text
    assert '<p class="text">echo: hello</p>' in page.text
    listed = await tcp.get("/chat")
    assert 'href="/chat/dashboard/desk"' in listed.text


async def test_the_pages_script_posts_and_gets_no_page_back(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/chat/dashboard/desk")).text)
    replied = asyncio.create_task(reply_to(engine, "hi"))
    await asyncio.sleep(0)
    sent = await dashboard.tcp.post(
        "/chat/dashboard/desk", data={"text": "hi", "csrf": csrf}, headers=FETCHED
    )
    assert sent.status_code == 204 and sent.content == b""
    assert await replied == "echo: hi"
    empty = await dashboard.tcp.post(
        "/chat/dashboard/desk", data={"text": "  ", "csrf": csrf}, headers=FETCHED
    )
    assert empty.status_code == 422 and "empty message" in empty.text


async def test_a_message_with_markup_shows_as_text(engine: Engine, dashboard: Dashboard) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/chat/dashboard/desk")).text)
    text = '<script>alert("x")</script> and <img src=x onerror=alert(1)>'
    replied = asyncio.create_task(reply_to(engine, text))
    await asyncio.sleep(0)
    await dashboard.tcp.post("/chat/dashboard/desk", data={"text": text, "csrf": csrf})
    await replied
    page = (await dashboard.tcp.get("/chat/dashboard/desk")).text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


async def test_reset_and_stop(engine: Engine, dashboard: Dashboard) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/chat/dashboard/desk")).text)
    # Before the first message there is no agent: both are no-ops, not errors.
    nothing = await dashboard.tcp.post("/chat/dashboard/desk/reset", data={"csrf": csrf})
    assert nothing.status_code == 303
    replied = asyncio.create_task(reply_to(engine, "one"))
    await asyncio.sleep(0)
    await dashboard.tcp.post("/chat/dashboard/desk", data={"text": "one", "csrf": csrf})
    await replied
    reset = await dashboard.tcp.post("/chat/dashboard/desk/reset", data={"csrf": csrf})
    assert reset.status_code == 303
    descriptor = UserDescriptor(connector="webchat", userId="dashboard", channelId="desk")
    agent_id = engine.agents.agent_id_for(descriptor)
    assert agent_id is not None
    async with asyncio.timeout(10):
        while True:  # the reset is a turn of its own: it is recorded when it has run
            page = await engine.agents.histories.page(agent_id, after=None, before=None, limit=10)
            if any(record["type"] == "reset" for record in page.records):
                break
            await asyncio.sleep(0.02)
    stopped = await dashboard.tcp.post(
        "/chat/dashboard/desk/stop", data={"csrf": csrf}, headers=FETCHED
    )
    assert stopped.status_code == 204
    unknown = await dashboard.tcp.post("/chat/dashboard/desk/explode", data={"csrf": csrf})
    assert unknown.status_code == 404


async def test_a_prompt_is_shown_in_its_conversation_and_answered_there(
    engine: Engine, dashboard: Dashboard
) -> None:
    replied = asyncio.create_task(reply_to(engine, "hi"))
    await asyncio.sleep(0)
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/chat/dashboard/desk")).text)
    await dashboard.tcp.post("/chat/dashboard/desk", data={"text": "hi", "csrf": csrf})
    await replied
    descriptor = UserDescriptor(connector="webchat", userId="dashboard", channelId="desk")
    agent_id = engine.agents.agent_id_for(descriptor)
    assert agent_id is not None
    asked = await engine.permissions.request(
        agent_id=agent_id,
        agent_label="desk chat",
        permission="@read:/etc",
        reason="notes",
        where=Conversation("webchat", "dashboard", "desk"),
    )
    page = await dashboard.tcp.get("/chat/dashboard/desk")
    assert f'id="p{asked.id}"' in page.text and "@read:/etc" in page.text
    elsewhere = await dashboard.tcp.get("/chat/dashboard/other")
    assert f'id="p{asked.id}"' not in elsewhere.text  # only in its own conversation

    # Decided from the chat, the answer leads back to it; never off the dashboard.
    form = {"csrf": csrf, "decision": "allow", "back": "/chat/dashboard/desk"}
    allowed = await dashboard.tcp.post(f"/permissions/{asked.id}", data=form)
    assert allowed.status_code == 303 and allowed.headers["location"] == "/chat/dashboard/desk"
    assert engine.permissions.get(asked.id).status == "granted"
    again = await engine.permissions.request(
        agent_id=agent_id,
        agent_label="desk chat",
        permission="@read:/var",
        reason="more notes",
        where=Conversation("webchat", "dashboard", "desk"),
    )
    form = {"csrf": csrf, "decision": "deny", "back": "https://evil.example/"}
    denied = await dashboard.tcp.post(f"/permissions/{again.id}", data=form)
    assert denied.status_code == 303 and denied.headers["location"] == "/permissions"


async def test_a_conversation_name_must_be_a_name(dashboard: Dashboard) -> None:
    await dashboard.log_in()
    for channel in ("", "a/b", "line\nbreak"):
        refused = await dashboard.tcp.get("/chat/new", params={"channel": channel})
        assert refused.status_code == 422, channel


async def test_chat_needs_a_session_and_more_than_a_jobs_key(
    engine: Engine, dashboard: Dashboard
) -> None:
    tcp = dashboard.tcp
    for path in ("/chat", "/chat/dashboard/desk", "/chat/dashboard/desk/events"):
        assert (await tcp.get(path)).headers["location"] == "/login", path
    _, reader = await engine.keys.create("jobs reader", ["jobs:read"])
    token = csrf_of((await tcp.get("/login")).text)
    assert (await tcp.post("/login", data={"csrf": token, "key": reader})).status_code == 303
    for path in ("/chat", "/chat/dashboard/desk", "/chat/dashboard/desk/events"):
        assert (await tcp.get(path)).status_code == 403, path

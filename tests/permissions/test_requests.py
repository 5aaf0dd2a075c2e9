"""Permission requests end to end: asked by an agent, shown by a connector, decided, delivered."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage, OutgoingMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.permissions.prompts import PermissionOutcome, PermissionPrompt
from claybot.plugin_api import PluginApi, PluginDefinition
from claybot.plugins import PluginCatalog
from claybot.server.app import create_app
from tests.agents.test_agents import next_event, record_events
from tests.agents.test_subagents import call, history, rules_settings, system_messages
from tests.conftest import write_settings


class ApproverSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: bool | None = True  # None: leave prompts unanswered


class ApproverConnector:
    """A connector with an approval UI whose user answers every prompt at once."""

    def __init__(self, api: PluginApi[ApproverSettings]) -> None:
        self.api = api
        self.prompts: list[PermissionPrompt] = []
        self.decided: list[PermissionOutcome] = []
        self.sent: list[OutgoingMessage] = []

    @property
    def id(self) -> str:
        return self.api.instance_id

    async def send(self, message: OutgoingMessage) -> None:
        self.sent.append(message)

    async def stop(self) -> None:
        return None

    async def request_permission(self, prompt: PermissionPrompt) -> None:
        self.prompts.append(prompt)
        if self.api.settings.answer is not None:
            # As if the user pressed the button a moment later.
            answer = self.api.settings.answer
            asyncio.get_running_loop().call_later(
                0.05,
                lambda: asyncio.ensure_future(
                    self.api.decide_permission(prompt.request_id, answer)
                ),
            )

    async def permission_decided(
        self, prompt: PermissionPrompt, outcome: PermissionOutcome
    ) -> None:
        self.decided.append(outcome)


class ApproverPlugin:
    def __init__(self, api: PluginApi[ApproverSettings], registry: dict[str, ApproverConnector]):
        self.connector = ApproverConnector(api)
        registry[api.instance_id] = self.connector
        self.api = api

    async def load(self) -> None:
        self.api.registrar.register_connector(self.connector)

    async def unload(self) -> None:
        return None


def approver_catalog(registry: dict[str, ApproverConnector]) -> PluginCatalog:
    definition: PluginDefinition[Any] = PluginDefinition(
        id="approver",
        name="Approver",
        description="answers permission prompts",
        settings_model=ApproverSettings,
        create=lambda api: ApproverPlugin(api, registry),
    )
    catalog = PluginCatalog.discover()
    catalog.add(definition, source="tests.permissions.test_requests")
    return catalog


# The user asks for news; the user agent delegates; the helper needs the network.
NEEDS_NETWORK = [
    {
        "match": "get the news",
        "response": call("start_background_agent", prompt="fetch headlines", name="news"),
    },
    {"match": "Background agent started", "response": "A helper is on it."},
    {
        "match": "fetch headlines",
        "response": call(
            "request_permission_via_parent", permission="@network", reason="to fetch headlines"
        ),
    },
    {"match": "was sent to the user", "response": "Waiting for the network."},
    {"match": "Permission granted: @network", "response": "Headlines: all quiet."},
    {"match": "Permission denied: @network", "response": "No network, no headlines."},
    {"match": "got no answer in time", "response": "Nobody answered."},
    {"match": "finished:", "response": "Here is the news."},
]


async def start(
    paths: HomePaths, settings: dict[str, Any], answer: bool | None
) -> tuple[Engine, dict[str, ApproverConnector]]:
    registry: dict[str, ApproverConnector] = {}
    settings["plugins"] = [
        {"instanceId": "chat", "pluginId": "approver", "settings": {"answer": answer}}
    ]
    write_settings(paths, settings)
    engine = Engine(paths, EngineOptions(port=0, catalog=approver_catalog(registry)))
    await engine.start()
    return engine, registry


async def test_a_background_request_is_answered_through_the_connector_and_reaches_the_asker(
    paths: HomePaths,
) -> None:
    registry: dict[str, ApproverConnector]
    engine, registry = await start(paths, rules_settings(NEEDS_NETWORK), answer=True)
    events = record_events(engine)
    try:
        posted = await engine.post_inbound(InboundMessage("chat", "ann", "ann", "get the news"))
        granted = await next_event(events, "permission.granted")
        # Each turn of the helper reports back: "waiting", then the headlines.
        await next_event(events, "agent.subagent.finished", count=2)
        async with asyncio.timeout(5):  # the prompt is updated after the decision is delivered
            while not registry["chat"].decided:
                await asyncio.sleep(0.01)
        child = granted[0].payload["agentId"]
        child_state = await engine.agents.permissions_of(child)
        parent_state = await engine.agents.permissions_of(posted.agent_id)
        child_records = await history(engine, child)
        listed = engine.permissions.list()
    finally:
        await engine.stop()
    connector = registry["chat"]
    [prompt] = connector.prompts
    assert prompt.agent_id == child and prompt.permission == "@network"
    assert prompt.user_id == "ann" and 'background agent "news"' in prompt.agent_label
    assert connector.decided == [PermissionOutcome(prompt.request_id, True, "user:chat")]
    # The grant went to the asking agent, was applied and persisted; the parent has none.
    assert child_state.network is True and parent_state.network is False
    decision = system_messages(child_records, origin="permissions")
    assert [r["text"] for r in decision] == [
        "Permission granted: @network. Continue with the previous request."
    ]
    assert any(r.get("text") == "Headlines: all quiet." for r in child_records)
    assert [(r.id, r.status, r.delivered) for r in listed] == [(prompt.request_id, "granted", True)]


async def test_unanswered_requests_are_denied_after_the_timeout(paths: HomePaths) -> None:
    settings = rules_settings(NEEDS_NETWORK)
    settings["permissions"] = {"requestTimeoutS": 0.3}
    engine, _ = await start(paths, settings, answer=None)
    events = record_events(engine)
    try:
        await engine.post_inbound(InboundMessage("chat", "ann", "ann", "get the news"))
        denied = await next_event(events, "permission.denied", timeout_s=10)
        await next_event(events, "agent.subagent.finished", count=2)
        child = denied[0].payload["agentId"]
        records = await history(engine, child)
        state = await engine.agents.permissions_of(child)
    finally:
        await engine.stop()
    assert denied[0].payload["decidedBy"] == "timeout" and state.network is False
    assert any(r.get("text") == "Nobody answered." for r in records)


async def test_a_request_that_expired_while_the_engine_was_down_is_denied_at_boot(
    paths: HomePaths,
) -> None:
    settings = rules_settings(NEEDS_NETWORK)
    settings["permissions"] = {"requestTimeoutS": 1.0}
    engine, _ = await start(paths, settings, answer=None)
    events = record_events(engine)
    await engine.post_inbound(InboundMessage("chat", "ann", "ann", "get the news"))
    requested = await next_event(events, "permission.requested")
    await engine.stop()
    await asyncio.sleep(1.2)
    engine, _ = await start(paths, settings, answer=None)
    agent_id = requested[0].payload["agentId"]
    try:
        # Waited for in what is durable, not in an event: the recovered turn can end
        # while the engine starts, before a listener added after start() would hear it.
        async with asyncio.timeout(30):  # "delivered" is recorded once the inbox holds it
            while not (
                engine.permissions.list()[0].delivered
                and any(
                    r.get("text") == "Nobody answered." for r in await history(engine, agent_id)
                )
            ):
                await asyncio.sleep(0.01)
        [request] = engine.permissions.list()
        records = await history(engine, agent_id)
    finally:
        await engine.stop()
    assert request.status == "denied" and request.decided_by == "timeout" and request.delivered
    assert sum(r.get("text") == "Nobody answered." for r in records) == 1


async def test_the_api_lists_and_decides_requests_once(paths: HomePaths) -> None:
    rules = [
        {
            "match": "read my notes",
            "response": call(
                "request_permission", permission="@read:/etc", reason="notes live there"
            ),
        },
        {"match": "was sent to the user", "response": "Asked."},
        {"match": "Permission granted: @read:/etc", "response": "Thanks, reading."},
    ]
    write_settings(paths, rules_settings(rules))
    engine = Engine(paths, EngineOptions(port=0))
    events = record_events(engine)
    await engine.start()
    transport = httpx.ASGITransport(app=create_app(engine))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://claybot") as api:
            posted = await engine.post_inbound(
                InboundMessage("local", "ann", "cli", "read my notes")
            )
            requested = await next_event(events, "permission.requested")
            request_id = requested[0].payload["requestId"]
            assert requested[0].payload["connector"] == "local"
            pending = (await api.get("/v1/engine/permissions", params={"status": "pending"})).json()
            assert [r["requestId"] for r in pending["requests"]] == [request_id]
            bad = [
                await api.post(f"/v1/engine/permissions/{request_id}", json={"decision": "maybe"}),
                await api.post(f"/v1/engine/permissions/{request_id}", content=b"{not json"),
                await api.post(
                    f"/v1/engine/permissions/{request_id}", json={"decision": "allow", "x": 1}
                ),
                await api.get("/v1/engine/permissions", params={"status": "whatever"}),
            ]
            assert [r.status_code for r in bad] == [422, 422, 422, 422]
            missing = await api.post("/v1/engine/permissions/nope", json={"decision": "allow"})
            assert missing.status_code == 404
            assert missing.json()["error"]["field"] == "requestId"
            assert engine.permissions.get(request_id).status == "pending"  # garbage changed nothing
            allowed = await api.post(
                f"/v1/engine/permissions/{request_id}", json={"decision": "allow", "by": "cli"}
            )
            again = await api.post(
                f"/v1/engine/permissions/{request_id}", json={"decision": "deny"}
            )
            await next_event(events, "agent.outgoing", count=2)
            decided = (await api.get("/v1/engine/permissions")).json()["requests"]
            state = await engine.agents.permissions_of(posted.agent_id)
    finally:
        await engine.stop()
    assert allowed.status_code == 200 and allowed.json()["request"]["status"] == "granted"
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_decided"
    assert decided[0]["status"] == "granted" and decided[0]["decidedBy"] == "cli"
    assert "/etc" in state.readDirs
    assert [e.payload["message"]["text"] for e in events if e.type == "agent.outgoing"] == [
        "Asked.",
        "Thanks, reading.",
    ]


async def test_tools_are_offered_by_agent_kind(engine: Engine) -> None:
    user_tools = {tool.name for tool in engine.tools.visible_to("user")}
    background_tools = {tool.name for tool in engine.tools.visible_to("subagent")}
    assert "request_permission" in user_tools and "request_permission_via_parent" not in user_tools
    assert "request_permission_via_parent" in background_tools
    assert "request_permission" not in background_tools
    shared = {"send_agent_message", "start_background_agent", "list_agents", "read_session_history"}
    assert shared <= user_tools and shared <= background_tools

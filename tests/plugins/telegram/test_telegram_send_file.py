"""An agent's ``send_file`` reaches the Telegram chat once, also when the engine is
SIGKILLed between the tool call and the upload (a real engine process, the fake Bot
API on loopback holding the upload until the engine is dead)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from claybot.config.home import HomePaths
from tests.agents.test_subagents import call, rules_settings
from tests.conftest import EngineProcess
from tests.plugins.telegram.fake_bot_api import FakeBotApi, Upload

pytestmark = pytest.mark.slow

ANN = 111
REPORT = b"%PDF-1.4\n% the quarterly report\n"


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    try:
        async with asyncio.timeout(timeout_s):
            while not condition():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def test_a_file_the_agent_sends_is_uploaded_once_across_a_sigkill(
    paths: HomePaths, engine_process: EngineProcess
) -> None:
    workspace = paths.workspace.resolve()
    workspace.mkdir(parents=True, exist_ok=True)
    report = workspace / "report.pdf"
    report.write_bytes(REPORT)
    rules = [
        {
            "match": "send me the report",
            "response": call("send_file", path=str(report), caption="Your report"),
        },
        {"match": "Sent report.pdf", "response": "There it is."},
    ]
    async with FakeBotApi().running() as bot_api:
        settings = rules_settings(rules)
        settings["plugins"] = [
            {
                "instanceId": "tg",
                "pluginId": "telegram",
                "settings": {
                    "allowedUserIds": [ANN],
                    "baseUrl": bot_api.base_url,
                    "pollTimeoutS": 1,
                },
            }
        ]
        paths.settings.write_text(json.dumps(settings))
        paths.auth.write_text(json.dumps({"tg": {"type": "token", "token": bot_api.token}}))
        bot_api.hold("sendDocument")
        await asyncio.to_thread(engine_process.start)
        bot_api.message(ANN, "send me the report")
        await until(lambda: bot_api.held == 1, "the upload to start")
        await asyncio.to_thread(engine_process.kill)  # the tool ran; Telegram has nothing
        bot_api.release("sendDocument")
        assert bot_api.sent("sendDocument") == []

        await asyncio.to_thread(engine_process.start)
        await until(
            lambda: "There it is." in [str(p.get("text")) for p in bot_api.sent()],
            f"the final reply after the restart: {engine_process.output()}",
        )
        async with engine_process.async_client() as client:
            (agent,) = (await client.get("/v1/engine/agents")).json()["agents"]
            history = await client.get(
                f"/v1/engine/agents/{agent['agentId']}/history", params={"limit": 1000}
            )
        records = history.json()["records"]
    uploads = bot_api.sent("sendDocument")
    assert len(uploads) == 1, uploads  # exactly once, across both runs
    (upload,) = uploads
    assert isinstance(upload["document"], Upload) and upload["document"].data == REPORT
    assert upload["caption"] == "Your report" and upload["chat_id"] == ANN
    results = [r for r in records if r["type"] == "tool_result"]
    assert [r["toolName"] for r in results] == ["send_file"]  # the tool ran once

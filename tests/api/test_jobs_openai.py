"""The plan-approval flow over HTTP once more, with the model behind a fake
OpenAI-compatible server on loopback configured as an ``openai`` provider: what the
job sends the vendor (its tools, the respond texts as ``ask_user``'s results) and
what it makes of the answers, through the real SDK."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from claybot.config.home import HomePaths
from claybot.server.app import create_app
from tests.conftest import engine_on_backend
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import LoopbackServer

PLAN = json.dumps({"type": "plan", "plan": "## Plan\n\n1. Write report.md", "question": "Go?"})
SEED_TOOLS = {
    "fetch_url", "run_python", "read_file", "write_file", "ask_user", "discover_tools",
    "final_answer",
}  # fmt: skip


@pytest.fixture
def vendor() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    with LoopbackServer(fake):
        yield fake


@pytest.fixture(params=["sqlite", "postgres"])
async def client(
    request: pytest.FixtureRequest, paths: HomePaths, vendor: FakeOpenAI
) -> AsyncIterator[httpx.AsyncClient]:
    settings = {
        "providers": [{"id": "openai", "model": "gpt-fake", "options": {"maxRetries": 0}}],
        "jobs": {"workers": 1},
    }
    # The vendor's own variables: the key goes to the URL they name (never to a baseUrl).
    env = {"OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": vendor.api_base}
    async with engine_on_backend(request, paths, settings, env) as engine:
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://claybot") as http:
            yield http


async def until(client: httpx.AsyncClient, job_id: str, *statuses: str) -> dict[str, Any]:
    async with asyncio.timeout(30):
        while True:
            job: dict[str, Any] = (await client.get(f"/api/v1/jobs/{job_id}")).json()
            if job["status"] in statuses:
                return job
            await asyncio.sleep(0.05)


def tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def test_plan_edit_approve_and_reject_through_an_openai_compatible_server(
    client: httpx.AsyncClient, vendor: FakeOpenAI
) -> None:
    vendor.reply_tool_calls(("c1", "ask_user", {"question": PLAN}))
    created = await client.post("/api/v1/jobs", json={"task": "plan a report"})
    job_id = created.json()["id"]
    waiting = await until(client, job_id, "waiting_for_user")
    assert waiting["agent_question"] == PLAN
    first = vendor.requests[0].body
    assert {tool["function"]["name"] for tool in first["tools"]} == SEED_TOOLS
    assert first["model"] == "gpt-fake"
    assert vendor.requests[0].headers["authorization"] == "Bearer sk-fake"

    vendor.reply_tool_calls(("c2", "ask_user", {"question": PLAN}))
    edited = await client.post(
        f"/api/v1/jobs/{job_id}/respond", json={"action": "edit", "editedPlan": "## v2"}
    )
    assert edited.status_code == 200, edited.text
    await until(client, job_id, "waiting_for_user")
    assert tool_results(vendor.requests[1].body) == [
        "[PLAN EDITED] User modified the plan:\n\n## v2\n\nAdditional feedback: None"
    ]

    vendor.reply_tool_calls(("c3", "write_file", {"filename": "report.md", "content": "# R\n"}))
    vendor.reply_tool_calls(("c4", "final_answer", {"answer": "Report written."}))
    approved = await client.post(f"/api/v1/jobs/{job_id}/respond", json={"action": "approve"})
    assert approved.json()["message"] == "[PLAN APPROVED] User approved the plan."
    done = await until(client, job_id, "completed", "failed")
    assert (done["status"], done["result"]) == ("completed", "Report written.")
    assert tool_results(vendor.requests[2].body)[-1] == "[PLAN APPROVED] User approved the plan."
    assert tool_results(vendor.requests[3].body)[-1] == "Wrote report.md (4 bytes)."
    [artifact] = done["artifacts"]
    assert artifact["filename"] == "report.md"
    download = await client.get(artifact["url"])
    assert download.content == b"# R\n"

    vendor.reply_tool_calls(("d1", "ask_user", {"question": PLAN}))
    vendor.reply_tool_calls(("d2", "final_answer", {"answer": "Not done, as asked."}))
    second = (await client.post("/api/v1/jobs", json={"task": "plan again"})).json()["id"]
    await until(client, second, "waiting_for_user")
    rejected = await client.post(
        f"/api/v1/jobs/{second}/respond", json={"action": "reject", "answer": "Too risky"}
    )
    assert rejected.json()["message"] == "[PLAN REJECTED] Too risky"
    ended = await until(client, second, "completed", "failed")
    assert (ended["status"], ended["result"]) == ("completed", "Not done, as asked.")
    assert tool_results(vendor.requests[-1].body)[-1] == "[PLAN REJECTED] Too risky"
    assert len(vendor.requests) == 6  # each step asked the model once

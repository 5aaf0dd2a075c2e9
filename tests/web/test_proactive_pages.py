"""The Proactive agents page: one is created, run now (its output and run listed), paused
and resumed; bad forms say what is wrong."""

from __future__ import annotations

import asyncio

from claybot.engine.engine import Engine
from tests.web.conftest import Dashboard, csrf_of


async def test_an_agent_is_created_run_paused_and_resumed(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    listing = await dashboard.tcp.get("/proactive")
    assert listing.status_code == 200 and "No proactive agent yet." in listing.text
    csrf = csrf_of(listing.text)
    form = {
        "csrf": csrf,
        "name": "Digest <daily>",
        "objective": "Write the digest.",
        "schedule": "0 7 * * *",
        "runner": "engine",
    }
    created = await dashboard.tcp.post("/proactive", data=form)
    assert created.status_code == 303
    path = created.headers["location"]
    agent_id = path.rsplit("/", 1)[1]
    page = await dashboard.tcp.get(path)
    assert "Digest &lt;daily&gt;" in page.text and "It has not run yet." in page.text
    ran = await dashboard.tcp.post(f"{path}/run", data={"csrf": csrf})
    assert ran.status_code == 303
    service = engine.proactive
    async with asyncio.timeout(30):  # the run ends and is recorded
        while service.detail(agent_id)["totalExecutions"] < 1:
            await asyncio.sleep(0.05)
    page = await dashboard.tcp.get(path)
    assert "<td>success</td>" in page.text  # the run's row
    assert '<p id="no-output" hidden>' in page.text  # and what it wrote, shown
    log = await dashboard.tcp.get(f"{path}/log")
    assert log.status_code == 200 and log.headers["content-type"].startswith("text/plain")
    assert log.text  # the run's clean log
    execution = (await service.executions(agent_id, 1))[0]["executionId"]
    assert f'log?execution={execution}"' in page.text
    assert (await dashboard.tcp.get(f"{path}/log", params={"execution": execution})).text
    missing = await dashboard.tcp.get(f"{path}/log", params={"execution": "nope"})
    assert missing.status_code == 404
    paused = await dashboard.tcp.post(f"{path}/pause", data={"csrf": csrf})
    assert paused.status_code == 303 and service.detail(agent_id)["status"] == "paused"
    resumed = await dashboard.tcp.post(f"{path}/resume", data={"csrf": csrf})
    assert resumed.status_code == 303 and service.detail(agent_id)["status"] == "active"


async def test_bad_proactive_forms_say_what_is_wrong(engine: Engine, dashboard: Dashboard) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/proactive")).text)
    base = {"csrf": csrf, "name": "x", "objective": "o", "schedule": "0 7 * * *"}
    cases = [
        ({**base, "schedule": "often"}, 422, "schedule"),
        ({**base, "cwd": "/workspace/my-project"}, 422, "proactive.workspace"),
        ({**base, "objective": "--flag"}, 422, "objective"),
        ({k: v for k, v in base.items() if k != "csrf"}, 403, "did not carry"),
    ]
    for form, status, said in cases:
        response = await dashboard.tcp.post("/proactive", data=form)
        assert response.status_code == status, (form, response.text)
        assert said in response.text, (form, said)
    assert engine.proactive.summaries() == []
    missing = await dashboard.tcp.post("/proactive/nope/run", data={"csrf": csrf})
    assert missing.status_code == 404


async def test_an_agent_is_edited_and_deleted(engine: Engine, dashboard: Dashboard) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/proactive")).text)
    form = {"csrf": csrf, "name": "Digest", "objective": "Write it.", "schedule": "0 7 * * *",
            "runner": "engine"}  # fmt: skip
    path = (await dashboard.tcp.post("/proactive", data=form)).headers["location"]
    agent_id = path.rsplit("/", 1)[1]
    page = await dashboard.tcp.get(path)
    assert 'value="Digest"' in page.text  # the edit form holds what it is

    bad = await dashboard.tcp.post(f"{path}/edit", data={**form, "schedule": "often"})
    assert bad.status_code == 422 and "schedule" in bad.text
    assert "Write it." in bad.text  # what was typed is kept
    assert engine.proactive.detail(agent_id)["schedule"] == "0 7 * * *"
    edited = await dashboard.tcp.post(
        f"{path}/edit", data={**form, "name": "Evening digest", "schedule": "0 19 * * *"}
    )
    assert edited.status_code == 303 and edited.headers["location"] == path
    detail = engine.proactive.detail(agent_id)
    assert (detail["name"], detail["schedule"]) == ("Evening digest", "0 19 * * *")

    refused = await dashboard.tcp.post(f"{path}/delete", data={})
    assert refused.status_code == 403 and engine.proactive.detail(agent_id)
    deleted = await dashboard.tcp.post(f"{path}/delete", data={"csrf": csrf})
    assert deleted.status_code == 303 and deleted.headers["location"] == "/proactive"
    assert (await dashboard.tcp.get(path)).status_code == 404
    assert (await dashboard.tcp.post(f"{path}/delete", data={"csrf": csrf})).status_code == 404

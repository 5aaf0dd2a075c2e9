"""The Automations page: a cron task previewed, created, run now, disabled; the heartbeat."""

from __future__ import annotations

import asyncio
import re

from claybot.engine.engine import Engine
from tests.web.conftest import Dashboard, csrf_of


async def test_a_cron_task_is_previewed_created_run_and_disabled(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    page = await dashboard.tcp.get("/automations")
    assert page.status_code == 200 and "No cron task yet." in page.text
    form = {
        "csrf": csrf_of(page.text),
        "name": "Morning <report>",
        "schedule": "0 9 * * 1-5",
        "timezone": "Europe/Berlin",
        "prompt": "Summarise the night.",
    }
    preview = await dashboard.tcp.post("/automations/cron", data={**form, "action": "preview"})
    assert preview.status_code == 200
    runs = re.findall(r'<li><time datetime="([^"]+)"', preview.text)
    assert len(runs) == 5 and all(":00:00+00:00" in run for run in runs)
    assert 'value="Morning &lt;report&gt;"' in preview.text  # the form keeps what was typed
    assert not engine.cron.listing()  # a preview creates nothing
    created = await dashboard.tcp.post("/automations/cron", data={**form, "action": "create"})
    assert created.status_code == 303
    (task,) = engine.cron.listing()
    assert (task["name"], task["timezone"], task["enabled"]) == (
        "Morning <report>",
        "Europe/Berlin",
        True,
    )
    listed = await dashboard.tcp.get("/automations")
    assert "Morning &lt;report&gt;" in listed.text and task["nextRunAt"] in listed.text
    csrf = form["csrf"]
    ran = await dashboard.tcp.post(f"/automations/cron/{task['taskId']}/run", data={"csrf": csrf})
    assert ran.status_code == 303
    disabled = await dashboard.tcp.post(
        f"/automations/cron/{task['taskId']}/disable", data={"csrf": csrf}
    )
    assert disabled.status_code == 303 and not engine.cron.listing()[0]["enabled"]


async def test_bad_cron_forms_say_what_is_wrong_and_create_nothing(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/automations")).text)
    base = {"csrf": csrf, "name": "x", "schedule": "0 9 * * *", "prompt": "p", "action": "create"}
    cases = [
        ({**base, "schedule": "every day"}, 422, "5 fields"),
        ({**base, "timezone": "Mars/Olympus"}, 422, "Mars/Olympus"),
        ({**base, "name": ""}, 422, "at least 1 character"),
        ({**base, "prompt": " "}, 422, "needs a prompt"),
        ({k: v for k, v in base.items() if k != "csrf"}, 403, "did not carry"),
    ]
    for form, status, said in cases:
        response = await dashboard.tcp.post("/automations/cron", data=form)
        assert response.status_code == status, (form, response.text)
        assert said in response.text, (form, said)
    assert engine.cron.listing() == []
    missing = await dashboard.tcp.post("/automations/cron/nope/run", data={"csrf": csrf})
    assert missing.status_code == 404


async def test_the_heartbeat_shows_and_runs(engine: Engine, dashboard: Dashboard) -> None:
    engine.heartbeat.store.add("Inbox", "Check the inbox.")
    await dashboard.log_in()
    page = await dashboard.tcp.get("/automations")
    assert "<strong>Inbox</strong>" in page.text and "Check the inbox." in page.text
    ran = await dashboard.tcp.post("/automations/heartbeat/run", data={"csrf": csrf_of(page.text)})
    assert ran.status_code == 303


async def test_a_cron_task_is_edited_with_a_preview_and_shows_its_runs(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/automations")).text)
    form = {"csrf": csrf, "name": "Digest", "schedule": "0 9 * * *", "timezone": "UTC",
            "prompt": "Write the digest."}  # fmt: skip
    await dashboard.tcp.post("/automations/cron", data={**form, "action": "create"})
    (task,) = engine.cron.listing()
    path = f"/automations/cron/{task['taskId']}"
    page = await dashboard.tcp.get(path)
    assert page.status_code == 200 and "It has not run yet." in page.text
    assert 'value="0 9 * * *"' in page.text and "Write the digest.</textarea>" in page.text

    changed = {**form, "schedule": "30 18 * * 1-5"}
    preview = await dashboard.tcp.post(f"{path}/edit", data={**changed, "action": "preview"})
    runs = re.findall(r'<li><time datetime="([^"]+)"', preview.text)
    assert len(runs) == 5 and all("T18:30:00+00:00" in run for run in runs)
    assert engine.cron.listing()[0]["schedule"] == "0 9 * * *"  # a preview changes nothing
    bad = await dashboard.tcp.post(f"{path}/edit", data={**changed, "timezone": "Mars/Base",
                                                         "action": "save"})  # fmt: skip
    assert bad.status_code == 422 and 'value="Mars/Base"' in bad.text
    saved = await dashboard.tcp.post(f"{path}/edit", data={**changed, "action": "save"})
    assert saved.status_code == 303 and saved.headers["location"] == path
    (edited,) = engine.cron.listing()
    assert (edited["taskId"], edited["schedule"]) == (task["taskId"], "30 18 * * 1-5")

    await dashboard.tcp.post(f"{path}/run", data={"csrf": csrf})
    async with asyncio.timeout(10):  # the run is in the ledger once it has finished
        while "<td>ran</td>" not in (page := await dashboard.tcp.get(path)).text:
            await asyncio.sleep(0.05)
    assert page.text.count("<tr><td><time") == 1

    deleted = await dashboard.tcp.post(f"{path}/delete", data={"csrf": csrf})
    assert deleted.status_code == 303 and engine.cron.listing() == []
    assert (await dashboard.tcp.get(path)).status_code == 404

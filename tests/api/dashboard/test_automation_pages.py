"""The Automations page: a cron task previewed, created, run now, disabled; the heartbeat."""

from __future__ import annotations

import re

from claybot.engine.engine import Engine
from tests.api.dashboard.conftest import Dashboard, csrf_of


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

"""The Jobs pages in-process: the list (filter, paging, counts, its live part), creating a
job with an attachment, a job's page with its plan to approve, answering and cancelling,
the live log's stream, artifacts; scopes, ownership, CSRF, and a plan's markdown made
harmless. The engine's own workers run the jobs with a scripted model."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from html import unescape
from typing import Any

import msgspec
import pytest

from claybot.config.home import HomePaths
from claybot.engine.engine import Engine, EngineOptions
from claybot.jobs.model import Job, JobStatus, NewJob
from tests.conftest import write_settings
from tests.web.conftest import Dashboard, csrf_of


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"text": "", "toolCalls": [{"name": name, "arguments": arguments}]}


PLAN = json.dumps({"type": "plan", "plan": "## Plan\n\n1. Write report.md", "question": "Go?"})
EVIL_PLAN = json.dumps(
    {
        "type": "plan",
        "plan": (
            "## Evil plan\n\n<script>alert(1)</script>\n\n"
            'A <b onclick="x()">bold</b> [click me](javascript:alert(1)) [fine](https://example.com)'
        ),
        "question": "Go?",
    }
)
RULES = [
    {"match": "Task: plan", "response": call("ask_user", question=PLAN)},
    {"match": "Task: evil", "response": call("ask_user", question=EVIL_PLAN)},
    {"match": "[PLAN EDITED]", "response": call("ask_user", question=PLAN)},
    {
        "match": "[PLAN APPROVED]",
        "response": call("write_file", filename="report.md", content="# R\n"),
    },
    {"match": "Wrote report.md", "response": call("final_answer", answer="Report written.")},
    {"match": "[PLAN REJECTED]", "response": call("final_answer", answer="Not done, as asked.")},
    {"match": "Task: ask", "response": call("ask_user", question="Which colour?")},
    {"match": "blue", "response": call("final_answer", answer="Blue it is.")},
]


@pytest.fixture
async def engine(request: pytest.FixtureRequest, paths: HomePaths) -> AsyncIterator[Engine]:
    """An engine whose workers run jobs with the rules above; ``idle``: no worker, so
    jobs stay as they are made."""
    idle = getattr(request, "param", "working") == "idle"
    provider = {"id": "scripted", "model": "rules", "options": {"rules": RULES}}
    write_settings(paths, {"providers": [provider], "jobs": {"workers": 0 if idle else 2}})
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    yield engine
    await engine.stop(drain_timeout_s=2)


idle = pytest.mark.parametrize("engine", ["idle"], indirect=True)


async def until(engine: Engine, job_id: str, *statuses: JobStatus) -> Job:
    db = await engine.jobs.database()
    async with asyncio.timeout(20):
        while (job := await db.jobs.get(job_id)).status not in statuses:
            await asyncio.sleep(0.05)
    return job


async def key_session(dashboard: Dashboard, engine: Engine, *scopes: str) -> str:
    """Log the TCP client in with a new key of ``scopes`` (ending any session it had);
    the key's id."""
    record, key = await engine.keys.create("dashboard key", list(scopes))
    dashboard.tcp.cookies.clear()
    token = csrf_of((await dashboard.tcp.get("/login")).text)
    logged_in = await dashboard.tcp.post("/login", data={"csrf": token, "key": key})
    assert logged_in.status_code == 303
    return str(record.id)


def job_ids(page: str) -> list[str]:
    return re.findall(r'<a href="/jobs/([0-9a-f-]{36})">', page)


@idle
async def test_the_list_pages_filters_and_counts_newest_first(
    engine: Engine, dashboard: Dashboard
) -> None:
    db = await engine.jobs.database()
    made = [(await db.jobs.create(NewJob(task=f"task number {n}"))).id for n in range(55)]
    for job_id in made[:3]:
        await db.jobs.cancel(job_id)
    await dashboard.log_in()

    first = await dashboard.tcp.get("/jobs")
    assert first.status_code == 200
    assert "55 jobs, newest first." in first.text
    assert job_ids(first.text) == made[::-1][:50]  # newest first, 50 a page
    assert "Page 1 of 2" in first.text and 'href="/jobs?page=2"' in first.text
    counts = dict(re.findall(r'status=(\w+)"\s*>[\w ]+<span class="count">(\d+)', first.text))
    assert counts == {
        "queued": "52", "running": "0", "completed": "0", "failed": "0",
        "waiting_for_user": "0", "cancelled": "3",
    }  # fmt: skip
    second = await dashboard.tcp.get("/jobs", params={"page": 2})
    assert job_ids(second.text) == made[::-1][50:]

    cancelled = await dashboard.tcp.get("/jobs", params={"status": "cancelled"})
    assert set(job_ids(cancelled.text)) == set(made[:3])
    assert "3 jobs cancelled" in cancelled.text and "Page 1 of" not in cancelled.text
    assert 'href="/jobs?status=cancelled" aria-current="page"' in cancelled.text
    unknown = await dashboard.tcp.get("/jobs", params={"status": "bogus"})
    assert len(job_ids(unknown.text)) == 50  # an unknown status filters nothing

    # The live part alone, as jobs.js asks for it: no page around it, no form.
    live = await dashboard.tcp.get(
        "/jobs", params={"status": "cancelled"}, headers={"X-Jobs-Fragment": "1"}
    )
    assert live.status_code == 200 and "<html" not in live.text and "<form" not in live.text
    assert set(job_ids(live.text)) == set(made[:3])
    assert "script-src 'self'" in live.headers["content-security-policy"]
    assert live.headers["vary"] == "X-Jobs-Fragment"
    # The script is the page's own file (no inline script: the CSP forbids them).
    assert '<script src="/static/jobs.js" defer></script>' in first.text
    script = await dashboard.tcp.get("/static/jobs.js")
    assert script.status_code == 200 and "X-Jobs-Fragment" in script.text
    assert "localStorage" not in script.text and "Engine unreachable" in first.text


@idle
async def test_a_job_is_created_from_the_form_with_an_attachment(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/jobs")).text)
    created = await dashboard.tcp.post(
        "/jobs",
        data={
            "csrf": csrf,
            "task": "summarise the notes",
            "model": "",
            "timeout_seconds": "120",
            "hitl_mode": "always_ask",
        },
        files=[("attachments", ("notes.txt", b"the notes", "text/plain"))],
    )
    assert created.status_code == 303, created.text
    job_id = created.headers["location"].removeprefix("/jobs/")
    db = await engine.jobs.database()
    job = await db.jobs.get(job_id)
    assert (job.task, job.timeout_seconds, job.hitl_mode.value, job.model, job.api_key_id) == (
        "summarise the notes", 120, "always_ask", None, None,
    )  # fmt: skip
    [attached] = await db.files.attachments(job_id, content=True)
    assert (attached.filename, attached.content) == ("notes.txt", b"the notes")
    shown = await dashboard.tcp.get(f"/jobs/{job_id}")
    assert shown.status_code == 200 and "summarise the notes" in shown.text
    assert "queued" in shown.text and "always ask" in shown.text

    # Bad input: the form again, with the problem and what was typed; nothing is made.
    cases = [
        ({"task": "  ", "timeout_seconds": "300", "hitl_mode": "auto_execute"}, "task"),
        ({"task": "keep <this>", "timeout_seconds": "5", "hitl_mode": "auto_execute"},
         "timeout_seconds"),
        ({"task": "keep <this>", "timeout_seconds": "soon", "hitl_mode": "auto_execute"},
         "timeout_seconds"),
        # A digit to str.isdigit, not to int(): refused, not a crash.
        ({"task": "keep <this>", "timeout_seconds": "²", "hitl_mode": "auto_execute"},
         "timeout_seconds"),
        ({"task": "keep <this>", "timeout_seconds": "300", "hitl_mode": "yolo"}, "hitl_mode"),
    ]  # fmt: skip
    for form, field in cases:
        refused = await dashboard.tcp.post("/jobs", data={"csrf": csrf, **form})
        assert refused.status_code == 422, (form, refused.text)
        assert re.search(rf'role="alert">{field}: ', refused.text), refused.text
        if form["task"].strip():
            assert ">keep &lt;this&gt;</textarea>" in refused.text  # kept, escaped
    _, total = await db.jobs.page()
    assert total == 1


async def test_a_plan_is_edited_approved_and_its_artifact_downloaded(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/jobs")).text)
    created = await dashboard.tcp.post(
        "/jobs", data={"csrf": csrf, "task": "plan a report", "hitl_mode": "plan_approval"}
    )
    job_id = created.headers["location"].removeprefix("/jobs/")
    await until(engine, job_id, JobStatus.WAITING_FOR_USER)
    waiting = await dashboard.tcp.get(f"/jobs/{job_id}")
    assert "Plan to approve" in waiting.text
    assert "<h2>Plan</h2>\n<ol>\n<li>Write report.md</li>" in waiting.text  # rendered
    assert '<textarea name="editedPlan" rows="8">## Plan\n\n1. Write report.md</textarea>' in (
        waiting.text
    )  # the box holds the plan's markdown, to edit

    # Rejecting needs feedback: the card again, with the problem and the edits kept.
    refused = await dashboard.tcp.post(
        f"/jobs/{job_id}/respond",
        data={"csrf": csrf, "action": "reject", "answer": "", "editedPlan": "## Mine"},
    )
    assert refused.status_code == 422 and "reject needs an answer" in refused.text
    assert ">## Mine</textarea>" in refused.text

    edited = await dashboard.tcp.post(
        f"/jobs/{job_id}/respond",
        data={"csrf": csrf, "action": "edit", "answer": "", "editedPlan": "## Plan v2\r\n\r\n1. X"},
    )
    assert edited.status_code == 303 and edited.headers["location"] == f"/jobs/{job_id}"
    job = await until(engine, job_id, JobStatus.WAITING_FOR_USER)
    db = await engine.jobs.database()
    lines = [line.message for line in await db.logs.page(job_id, limit=1000)]
    assert "User responded (edit)" in lines
    records = msgspec.json.encode(await db.jobs.records(job_id)).decode()
    assert "[PLAN EDITED] User modified the plan:\\n\\n## Plan v2\\n\\n1. X" in records

    approved = await dashboard.tcp.post(
        f"/jobs/{job_id}/respond", data={"csrf": csrf, "action": "approve", "editedPlan": "x"}
    )
    assert approved.status_code == 303
    job = await until(engine, job_id, JobStatus.COMPLETED, JobStatus.FAILED)
    assert (job.status, job.result) == (JobStatus.COMPLETED, "Report written.")
    done = await dashboard.tcp.get(f"/jobs/{job_id}")
    assert "Plan to approve" not in done.text and "Report written." in done.text
    assert "Cancel the job" not in done.text  # it has ended
    link = re.search(
        rf'href="(/jobs/{job_id}/artifacts/[0-9a-f-]+)" download>report.md<', done.text
    )
    assert link is not None
    download = await dashboard.tcp.get(link.group(1))
    assert download.status_code == 200 and download.content == b"# R\n"
    assert download.headers["content-disposition"] == 'attachment; filename="report.md"'
    assert download.headers["x-content-type-options"] == "nosniff"

    # The log's stream: every line after the one named, then the end.
    after = (await db.logs.page(job_id, limit=1))[0].id
    async with dashboard.tcp.stream(
        "GET", f"/jobs/{job_id}/logs/stream", headers={"Last-Event-ID": str(after)}
    ) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        body = (await stream.aread()).decode()
    ids = [int(found) for found in re.findall(r"^id: (\d+)$", body, re.MULTILINE)]
    assert ids and min(ids) > after  # resumed after the line named
    assert "Job created" not in body and '"message":"Job completed"' in body
    assert body.endswith('event: end\ndata: {"status": "completed"}\n\n')


async def test_a_question_is_answered_and_a_job_cancelled(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/jobs")).text)
    db = await engine.jobs.database()
    asking = await db.jobs.create(NewJob(task="ask me"))
    await until(engine, asking.id, JobStatus.WAITING_FOR_USER)
    page = await dashboard.tcp.get(f"/jobs/{asking.id}")
    assert "The job asks you" in page.text and "Which colour?" in page.text
    assert "Approve the plan" not in page.text  # a question, not a plan
    answered = await dashboard.tcp.post(
        f"/jobs/{asking.id}/respond", data={"csrf": csrf, "action": "respond", "answer": "blue"}
    )
    assert answered.status_code == 303
    job = await until(engine, asking.id, JobStatus.COMPLETED)
    assert job.result == "Blue it is."
    late = await dashboard.tcp.post(
        f"/jobs/{asking.id}/respond", data={"csrf": csrf, "action": "respond", "answer": "red"}
    )
    assert late.status_code == 400 and "a completed job cannot become queued" in late.text

    waiting = await db.jobs.create(NewJob(task="ask again"))
    await until(engine, waiting.id, JobStatus.WAITING_FOR_USER)
    cancelled = await dashboard.tcp.post(f"/jobs/{waiting.id}/cancel", data={"csrf": csrf})
    assert cancelled.status_code == 303
    assert (await db.jobs.get(waiting.id)).status is JobStatus.CANCELLED
    again = await dashboard.tcp.post(f"/jobs/{waiting.id}/cancel", data={"csrf": csrf})
    assert again.status_code == 400 and "cannot become cancelled" in again.text


@idle
async def test_posts_without_the_csrf_token_change_nothing(
    engine: Engine, dashboard: Dashboard
) -> None:
    db = await engine.jobs.database()
    job = await db.jobs.create(NewJob(task="stays queued"))
    await dashboard.log_in()
    for path, form in (
        ("/jobs", {"task": "sneaky", "hitl_mode": "auto_execute"}),
        (f"/jobs/{job.id}/cancel", {}),
        (f"/jobs/{job.id}/respond", {"action": "approve"}),
        (f"/jobs/{job.id}/cancel", {"csrf": "not-the-token"}),
    ):
        response = await dashboard.tcp.post(path, data=form)
        assert response.status_code == 403, path
    assert (await db.jobs.get(job.id)).status is JobStatus.QUEUED
    assert (await db.jobs.page())[1] == 1
    dashboard.tcp.cookies.clear()  # and no session at all: to the login page
    for path in ("/jobs", f"/jobs/{job.id}", f"/jobs/{job.id}/logs/stream", "/jobs/workers"):
        response = await dashboard.tcp.get(path)
        assert response.status_code == 303 and response.headers["location"] == "/login"


@idle
async def test_a_jobs_read_key_sees_its_own_jobs_and_nothing_else(
    engine: Engine, dashboard: Dashboard
) -> None:
    db = await engine.jobs.database()
    writer_id = await key_session(dashboard, engine, "jobs:read", "jobs:write")
    csrf = csrf_of((await dashboard.tcp.get("/jobs")).text)
    made = await dashboard.tcp.post("/jobs", data={"csrf": csrf, "task": "mine"})
    mine = made.headers["location"].removeprefix("/jobs/")
    assert (await db.jobs.get(mine)).api_key_id == writer_id
    others = await db.jobs.create(NewJob(task="the owner's"))

    reader_id = await key_session(dashboard, engine, "jobs:read")
    own = await db.jobs.create(NewJob(task="the reader's", api_key_id=reader_id))
    listed = await dashboard.tcp.get("/jobs")
    assert listed.status_code == 200 and job_ids(listed.text) == [own.id]
    assert "1 job, newest first." in listed.text and '<span class="count">1</span>' in listed.text
    nav = listed.text.split('<nav aria-label="Pages">', 1)[1].split("</nav>", 1)[0]
    assert re.findall(r'href="([^"]+)"', nav) == ["/jobs"]  # only the page it may see
    assert "New job" not in listed.text and 'action="/jobs"' not in listed.text
    assert "Workers and metrics" not in listed.text
    assert (await dashboard.tcp.get(f"/jobs/{own.id}")).status_code == 200
    for other in (mine, others.id):  # another key's job, the owner's: as unknown as none
        assert (await dashboard.tcp.get(f"/jobs/{other}")).status_code == 404
        stream = await dashboard.tcp.get(f"/jobs/{other}/logs/stream")
        assert stream.status_code == 404
    for path in ("/agents", "/settings/keys", "/jobs/workers", "/"):
        refused = await dashboard.tcp.get(path)
        assert refused.status_code == 403 and "Not for this key" in refused.text, path
    assert "needs <code>admin</code>" in refused.text

    csrf = csrf_of(listed.text)
    posted = await dashboard.tcp.post("/jobs", data={"csrf": csrf, "task": "not allowed"})
    assert posted.status_code == 403 and "needs <code>jobs:write</code>" in posted.text
    for verb, form in (("cancel", {}), ("respond", {"action": "approve"})):
        response = await dashboard.tcp.post(f"/jobs/{own.id}/{verb}", data={"csrf": csrf, **form})
        assert response.status_code == 403, verb
    assert (await db.jobs.get(own.id)).status is JobStatus.QUEUED
    assert (await db.jobs.page())[1] == 3

    await key_session(dashboard, engine, "admin")  # an admin key sees every job
    assert set(job_ids((await dashboard.tcp.get("/jobs")).text)) == {mine, others.id, own.id}


async def test_a_plans_markdown_shows_raw_html_as_text_and_no_script_link(
    engine: Engine, dashboard: Dashboard
) -> None:
    db = await engine.jobs.database()
    job = await db.jobs.create(NewJob(task="evil plan"))
    await until(engine, job.id, JobStatus.WAITING_FOR_USER)
    await dashboard.log_in()
    page = await dashboard.tcp.get(f"/jobs/{job.id}")
    plan = page.text.split('<div class="plan">', 1)[1].split("</div>", 1)[0]
    assert "<h2>Evil plan</h2>" in plan  # markdown still renders
    assert "<script" not in plan and "&lt;script&gt;alert(1)&lt;/script&gt;" in plan
    assert "<b" not in plan and "&lt;b onclick=&quot;x()&quot;&gt;bold&lt;/b&gt;" in plan
    hrefs = re.findall(r'href="([^"]*)"', plan)
    assert hrefs == ["https://example.com"]  # the javascript: one is no link
    assert "[click me](javascript:alert(1))" in unescape(plan)
    scripts = re.findall(r"<script[^>]*>", page.text)
    assert scripts == [
        '<script src="/static/dashboard.js" defer>',
        '<script src="/static/jobs.js" defer>',
    ]


async def test_the_workers_page_lists_workers_and_metrics(
    engine: Engine, dashboard: Dashboard
) -> None:
    db = await engine.jobs.database()
    await db.workers.heartbeat(
        "worker-elsewhere", hostname="box <2>", pid=4, version="9.9", active_jobs=1
    )
    await db.jobs.create(NewJob(task="ask me"))
    await dashboard.log_in()
    page = await dashboard.tcp.get("/jobs/workers")
    assert page.status_code == 200 and "<h1>Workers and metrics</h1>" in page.text
    row = page.text.split("<code>worker-elsewhere</code>", 1)[1].split("</tr>", 1)[0]
    assert "box &lt;2&gt;" in row and "healthy" in row and "9.9" in row
    assert re.search(r"<dt>Jobs</dt><dd>1: ", page.text)
    assert "<dt>API keys</dt><dd>0 active of 0</dd>" in page.text


@idle
async def test_the_log_stream_refuses_a_line_id_past_64_bits_and_ignores_such_a_header(
    engine: Engine, dashboard: Dashboard
) -> None:
    db = await engine.jobs.database()
    job = await db.jobs.create(NewJob(task="cancelled at once"))
    await db.jobs.cancel(job.id)  # ended: its stream ends
    await dashboard.log_in()
    stream_path = f"/jobs/{job.id}/logs/stream"
    refused = await dashboard.tcp.get(stream_path, params={"after": 2**64})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "query.after"
    # No line has an id past 64 bits, nor "²" (a digit to str.isdigit, not to int()):
    # such a Last-Event-ID is no place to resume from; the stream starts at the first line.
    for last_event_id in (str(2**64), "²"):
        async with dashboard.tcp.stream(
            "GET", stream_path, headers={"Last-Event-ID": last_event_id.encode("latin-1")}
        ) as stream:
            assert stream.status_code == 200
            body = (await stream.aread()).decode()
        assert '"message":"Job created"' in body
        assert body.endswith('event: end\ndata: {"status": "cancelled"}\n\n')

"""Files in the dashboard's Chat: attached in the composer, shown on the history cards
(images inline, anything else a download), served behind the session at ``/files/{id}``."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from claybot.agents.descriptors import UserDescriptor
from claybot.api.dashboard_auth import DashboardAuth
from claybot.config.home import HomePaths
from claybot.engine.engine import Engine, EngineOptions
from claybot.web.chat_pages import FILES_HEADER
from tests.conftest import ECHO_SETTINGS, write_settings
from tests.providers.test_request_bodies import PNG
from tests.web.conftest import Clock, Dashboard, csrf_of, open_dashboard

FETCHED = {"X-Claybot-Fetch": "1"}
DESK = "/chat/dashboard/desk"


async def user_records(engine: Engine, channel: str = "desk") -> list[dict[str, Any]]:
    """The conversation's user messages, once its agent has recorded one."""
    descriptor = UserDescriptor(connector="webchat", userId="dashboard", channelId=channel)
    async with asyncio.timeout(10):
        while True:
            agent_id = engine.agents.agent_id_for(descriptor)
            if agent_id is not None:
                page = await engine.agents.histories.page(
                    agent_id, after=None, before=None, limit=50
                )
                found = [r for r in page.records if r["type"] == "user_message"]
                if found:
                    return found
            await asyncio.sleep(0.02)


async def test_an_image_sent_from_the_composer_shows_on_its_card(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    tcp = dashboard.tcp
    page = await tcp.get(DESK)
    assert 'enctype="multipart/form-data"' in page.text and 'type="file" name="file"' in page.text
    csrf = csrf_of(page.text)
    sent = await tcp.post(
        DESK, data={"text": "what is this?", "csrf": csrf},
        files={"file": ("map.png", PNG, "application/octet-stream")},
    )  # fmt: skip
    assert sent.status_code == 303, sent.text
    (record,) = await user_records(engine)
    assert record["text"] == "what is this?"
    (file,) = record["files"]
    file_id = hashlib.sha256(PNG).hexdigest()
    assert (file["id"], file["name"], file["mimeType"]) == (file_id, "map.png", "image/png")

    page = await tcp.get(DESK)
    assert f'<img src="/files/{file_id}?name=map.png" alt="map.png">' in page.text
    shown = await tcp.get(f"/files/{file_id}", params={"name": "map.png"})
    assert shown.status_code == 200 and shown.content == PNG
    assert shown.headers["content-type"] == "image/png"
    assert shown.headers["content-disposition"].startswith("inline")
    assert shown.headers["x-content-type-options"] == "nosniff"
    assert shown.headers["content-security-policy"] == "sandbox"
    missing = await tcp.get(f"/files/{'0' * 64}")
    assert missing.status_code == 404 and "Not found" in missing.text


async def test_a_file_alone_is_a_message_and_the_script_learns_what_it_became(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get(DESK)).text)
    sent = await dashboard.tcp.post(
        DESK, data={"text": "", "csrf": csrf}, headers=FETCHED,
        files={"file": ("notes.txt", b"hello", "text/plain")},
    )  # fmt: skip
    assert sent.status_code == 204, sent.text
    (told,) = json.loads(sent.headers[FILES_HEADER])
    assert told["name"] == "notes.txt" and told["size"] == 5
    (record,) = await user_records(engine)
    assert record["text"] == "" and record["files"][0]["id"] == told["id"]
    # An empty file field is no file: with no text either, nothing is sent.
    empty = await dashboard.tcp.post(
        DESK, data={"text": " ", "csrf": csrf}, headers=FETCHED,
        files={"file": ("", b"", "application/octet-stream")},
    )  # fmt: skip
    assert empty.status_code == 422 and "empty message" in empty.text


def as_a_browser_posts(fields: dict[str, str], empty_file_field: str) -> tuple[bytes, str]:
    """A form posted by a browser whose file field was left empty: that field is still a
    part, with an empty file name and no bytes (httpx leaves an empty file name out, so
    the body is built here). The body and its Content-Type."""
    boundary = "----ClayBotFormBoundary7MA4YWxkTrZu0gW"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        for name, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{empty_file_field}"; '
        'filename=""\r\nContent-Type: application/octet-stream\r\n\r\n\r\n'
    )
    parts.append(f"--{boundary}--\r\n")
    return "".join(parts).encode(), f"multipart/form-data; boundary={boundary}"


async def test_a_text_message_with_the_file_field_left_empty_carries_no_file(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get(DESK)).text)
    body, content_type = as_a_browser_posts({"text": "just words", "csrf": csrf}, "file")
    sent = await dashboard.tcp.post(
        DESK, content=body, headers={"Content-Type": content_type, **FETCHED}
    )
    assert sent.status_code == 204, sent.text
    assert FILES_HEADER not in sent.headers
    (record,) = await user_records(engine)
    assert record["text"] == "just words" and not record.get("files")
    assert not engine.files.exists(hashlib.sha256(b"").hexdigest())  # nothing was stored
    page = (await dashboard.tcp.get(DESK)).text
    assert "(0 B)" not in page and 'class="files"' not in page
    # With no text either, it is an empty message.
    body, content_type = as_a_browser_posts({"text": " ", "csrf": csrf}, "file")
    empty = await dashboard.tcp.post(
        DESK, content=body, headers={"Content-Type": content_type, **FETCHED}
    )
    assert empty.status_code == 422 and "empty message" in empty.text


async def test_a_file_that_is_not_an_image_is_a_download_and_its_name_is_text(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get(DESK)).text)
    name = "<script>alert(1)<.script>.html"
    body = b"<script>alert(1)</script>"
    sent = await dashboard.tcp.post(
        DESK, data={"text": "a page", "csrf": csrf}, files={"file": (name, body, "text/html")}
    )
    assert sent.status_code == 303, sent.text
    (record,) = await user_records(engine)
    file_id = record["files"][0]["id"]
    page = (await dashboard.tcp.get(DESK)).text
    assert "<script>alert" not in page
    assert (
        f'<a href="/files/{file_id}?name=%3Cscript%3Ealert%281%29%3C.script%3E.html" '
        f'download="&lt;script&gt;alert(1)&lt;.script&gt;.html">'
        f"&lt;script&gt;alert(1)&lt;.script&gt;.html</a> "
        f'<span class="muted">(25 B)</span>'
    ) in page
    assert f'<img src="/files/{file_id}' not in page
    served = await dashboard.tcp.get(f"/files/{file_id}")
    assert served.status_code == 200 and served.content == body
    assert served.headers["content-type"] == "application/octet-stream"
    assert served.headers["content-disposition"].startswith("attachment")
    assert served.headers["content-security-policy"] == "sandbox"


async def test_files_need_a_session(engine: Engine, dashboard: Dashboard) -> None:
    stored = await asyncio.to_thread(engine.files.put, PNG, "map.png")
    for path in ("/files/x", f"/files/{stored.id}"):
        answer = await dashboard.tcp.get(path)
        assert answer.status_code == 303 and answer.headers["location"] == "/login"


async def test_files_past_the_message_cap_are_refused(paths: HomePaths) -> None:
    # Its own engine, with small caps: the form's files are checked as the API's are.
    write_settings(paths, {**ECHO_SETTINGS, "files": {"maxFileBytes": 1024,
                                                       "maxMessageBytes": 1500}})  # fmt: skip
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    try:
        async with open_dashboard(engine, DashboardAuth(clock=Clock())) as dashboard:
            tcp = dashboard.tcp
            await dashboard.log_in()
            csrf = csrf_of((await tcp.get(DESK)).text)
            big = await tcp.post(
                DESK, data={"csrf": csrf}, files={"file": ("big.bin", b"x" * 2000)}
            )
            assert big.status_code == 413 and "files.maxFileBytes" in big.text
            both = await tcp.post(
                DESK, data={"csrf": csrf},
                files=[("file", ("a.txt", b"a" * 1000)), ("file", ("b.txt", b"b" * 1000))],
            )  # fmt: skip
            assert both.status_code == 413 and "files.maxMessageBytes" in both.text
    finally:
        await engine.stop(drain_timeout_s=2)


async def test_a_file_over_the_default_body_limit_goes_through(
    engine: Engine, dashboard: Dashboard
) -> None:
    """Uploads are limited by the files' caps, not by the 1 MiB every other body gets."""
    data = PNG + b"\x00" * (3 * 1024 * 1024)
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get(DESK)).text)
    sent = await dashboard.tcp.post(
        DESK, data={"csrf": csrf}, headers=FETCHED, files={"file": ("big.png", data)}
    )
    assert sent.status_code == 204, sent.text
    stored = await dashboard.socket.post("/v1/engine/files", files={"file": ("big.png", data)})
    assert stored.status_code == 201, stored.text
    assert stored.json()["file"]["id"] == json.loads(sent.headers[FILES_HEADER])[0]["id"]

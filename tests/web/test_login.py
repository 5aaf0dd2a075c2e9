"""Getting into the dashboard: a one-time link, a session cookie, CSRF on every form."""

from __future__ import annotations

from collections import Counter
from http.cookies import SimpleCookie
from typing import Any

import httpx
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from claybot.api.dashboard_auth import IDLE_TTL_S, LINK_TTL_S, MAX_SESSIONS_PER_KEY, DashboardAuth
from claybot.engine.engine import Engine
from claybot.web.routes import SESSION_COOKIE
from tests.web.conftest import Clock, Dashboard, csrf_of, open_dashboard


async def test_a_link_logs_in_once_and_a_page_without_a_session_goes_to_login(
    dashboard: Dashboard,
) -> None:
    tcp = dashboard.tcp
    before = await tcp.get("/")
    assert before.status_code == 303 and before.headers["location"] == "/login"
    login_page = await tcp.get("/login")
    assert login_page.status_code == 200 and "claybot dashboard" in login_page.text
    path = await dashboard.link()
    first = await tcp.get("/" + path)
    assert first.status_code == 303 and first.headers["location"] == "/"
    cookie = SimpleCookie(first.headers["set-cookie"])[SESSION_COOKIE]
    assert cookie["httponly"] and cookie["samesite"] == "strict" and cookie["path"] == "/"
    overview = await tcp.get("/")
    assert overview.status_code == 200
    assert "<h1>Overview</h1>" in overview.text and "Scripted (echo)" in overview.text
    tcp.cookies.clear()
    second = await tcp.get("/" + path)  # the same link again
    assert second.status_code == 403 and "used already" in second.text
    assert SESSION_COOKIE not in second.headers.get("set-cookie", "")
    assert (await tcp.get("/")).status_code == 303


async def test_a_link_expires_after_five_minutes(dashboard: Dashboard) -> None:
    path = await dashboard.link()
    dashboard.clock.now += LINK_TTL_S + 1
    response = await dashboard.tcp.get("/" + path)
    assert response.status_code == 403
    made_up = await dashboard.tcp.get("/login", params={"token": "x" * 43})
    assert made_up.status_code == 403


async def test_a_revoked_or_idle_session_is_refused(dashboard: Dashboard) -> None:
    await dashboard.log_in()
    sessions = (await dashboard.socket.get("/v1/engine/dashboard/sessions")).json()["sessions"]
    assert [s["via"] for s in sessions] == ["login link"]
    revoked = await dashboard.socket.delete(f"/v1/engine/dashboard/sessions/{sessions[0]['id']}")
    assert revoked.status_code == 200
    assert (await dashboard.tcp.get("/")).status_code == 303
    again = await dashboard.socket.delete(f"/v1/engine/dashboard/sessions/{sessions[0]['id']}")
    assert again.status_code == 404 and again.json()["error"]["field"] == "sessionId"

    await dashboard.log_in()
    assert (await dashboard.tcp.get("/")).status_code == 200
    dashboard.clock.now += IDLE_TTL_S + 1
    assert (await dashboard.tcp.get("/")).status_code == 303
    assert (await dashboard.socket.get("/v1/engine/dashboard/sessions")).json()["sessions"] == []


async def test_a_post_without_the_csrf_token_is_refused(dashboard: Dashboard) -> None:
    await dashboard.log_in()
    page = (await dashboard.tcp.get("/")).text
    csrf = csrf_of(page)
    missing = await dashboard.tcp.post("/logout")
    assert missing.status_code == 403
    wrong = await dashboard.tcp.post("/logout", data={"csrf": "not-it"})
    assert wrong.status_code == 403
    assert (await dashboard.tcp.get("/")).status_code == 200  # still logged in
    out = await dashboard.tcp.post("/logout", data={"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert (await dashboard.tcp.get("/")).status_code == 303


async def test_pages_forbid_framing_scripts_from_elsewhere_and_referrers(
    dashboard: Dashboard,
) -> None:
    await dashboard.log_in()
    for path in ("/", "/login"):
        headers = (await dashboard.tcp.get(path)).headers
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert "script-src 'self'" in headers["content-security-policy"]
        assert headers["referrer-policy"] == "no-referrer"
        assert headers["cache-control"] == "no-store"
    css = await dashboard.tcp.get("/static/dashboard.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


async def test_links_come_from_the_owner_not_from_a_browser(dashboard: Dashboard) -> None:
    """On TCP the link route is the API's (an admin key); the pages take no key."""
    assert (await dashboard.tcp.post("/v1/engine/dashboard/links")).status_code == 401
    assert (await dashboard.tcp.get("/v1/engine/dashboard/sessions")).status_code == 401
    assert (await dashboard.tcp.get("/v1/engine/status")).status_code == 401


async def test_a_key_logs_in_with_its_scopes_only(engine: Engine, dashboard: Dashboard) -> None:
    """A `jobs:read` key sees no agent page and no settings; an admin key sees them
    until it is revoked."""
    _, reader = await engine.keys.create("jobs reader", ["jobs:read"])
    admin_record, admin = await engine.keys.create("owner", ["admin"])
    tcp = dashboard.tcp
    form = await tcp.get("/login")
    token = csrf_of(form.text)
    logged_in = await tcp.post("/login", data={"csrf": token, "key": reader})
    assert logged_in.status_code == 303 and logged_in.headers["location"] == "/jobs"
    assert (await tcp.get("/jobs")).status_code == 200  # where its scope reaches
    for path in ("/", "/agents", "/permissions", "/automations", "/settings/keys"):
        response = await tcp.get(path)
        assert response.status_code == 403 and "Not for this key" in response.text, path
        assert 'href="/agents"' not in response.text  # the links it may not follow are not shown
    tcp.cookies.clear()

    token = csrf_of((await tcp.get("/login")).text)
    assert (await tcp.post("/login", data={"csrf": token, "key": admin})).status_code == 303
    assert (await tcp.get("/agents")).status_code == 200
    sessions = (await dashboard.socket.get("/v1/engine/dashboard/sessions")).json()["sessions"]
    assert {(s["via"].split()[0], tuple(s["scopes"])) for s in sessions} == {
        ("API", ("jobs:read",)),
        ("API", ("admin",)),
    }
    await engine.keys.revoke(admin_record.id)
    assert (await tcp.get("/agents")).headers["location"] == "/login"  # the key is gone


async def test_a_key_login_needs_the_forms_token_and_a_live_key(
    engine: Engine, dashboard: Dashboard
) -> None:
    _, key = await engine.keys.create("owner", ["admin"])
    tcp = dashboard.tcp
    token = csrf_of((await tcp.get("/login")).text)
    wrong = await tcp.post("/login", data={"csrf": token, "key": "cb_not_a_key"})
    assert wrong.status_code == 401 and "unknown or revoked" in wrong.text
    tcp.cookies.clear()  # the form's cookie gone: a POST from elsewhere
    forged = await tcp.post("/login", data={"csrf": token, "key": key})
    assert forged.status_code == 403
    assert (await tcp.get("/")).status_code == 303  # no session came of either


async def log_in_with_key(browser: httpx.AsyncClient, key: str) -> httpx.Response:
    token = csrf_of((await browser.get("/login")).text)
    return await browser.post("/login", data={"csrf": token, "key": key})


async def test_a_keys_logins_never_push_another_principals_session_out(
    engine: Engine, dashboard: Dashboard
) -> None:
    """A `jobs:read` key logging in again and again ends only its own oldest sessions:
    the owner's stays, and so does another key's."""
    _, reader = await engine.keys.create("jobs reader", ["jobs:read"])
    _, admin = await engine.keys.create("admin", ["admin"])
    await dashboard.log_in()  # the owner, with a link
    async with dashboard.browser() as colleague:
        assert (await log_in_with_key(colleague, admin)).status_code == 303
        cookies = []
        async with dashboard.browser() as reader_browser:
            for _ in range(110):
                reader_browser.cookies.clear()
                answer = await log_in_with_key(reader_browser, reader)
                assert answer.status_code == 303, answer.text
                cookies.append(reader_browser.cookies[SESSION_COOKIE])
                dashboard.clock.now += 1
            assert (await reader_browser.get("/jobs")).status_code == 200
            reader_browser.cookies.set(SESSION_COOKIE, cookies[0])
            assert (await reader_browser.get("/jobs")).headers["location"] == "/login"
        assert (await dashboard.tcp.get("/")).status_code == 200  # the owner's session
        assert (await colleague.get("/agents")).status_code == 200  # the other key's
    listed = (await dashboard.socket.get("/v1/engine/dashboard/sessions")).json()["sessions"]
    by_how = Counter(session["via"].split(" ")[0] for session in listed)
    assert by_how == {"login": 1, "API": 1 + MAX_SESSIONS_PER_KEY}


async def test_past_the_cap_on_all_key_sessions_a_key_login_is_refused_not_anyone_out(
    engine: Engine,
) -> None:
    auth = DashboardAuth(clock=Clock(), max_sessions_per_key=2, max_key_sessions=3)
    _, first = await engine.keys.create("first", ["jobs:read"])
    _, second = await engine.keys.create("second", ["jobs:read"])
    async with open_dashboard(engine, auth) as dashboard:
        browsers = [dashboard.browser() for _ in range(4)]
        try:
            for browser, key in zip(browsers, (first, first, second), strict=False):
                assert (await log_in_with_key(browser, key)).status_code == 303
            refused = await log_in_with_key(browsers[3], second)
            assert refused.status_code == 503 and "all the key sessions" in refused.text
            for browser in browsers[:3]:
                assert (await browser.get("/jobs")).status_code == 200  # nobody was pushed out
            # A key at its own cap makes room from its own sessions; the owner always gets in.
            assert (await log_in_with_key(browsers[3], first)).status_code == 303
            assert (await browsers[0].get("/jobs")).headers["location"] == "/login"
            assert (await browsers[2].get("/jobs")).status_code == 200
            await dashboard.log_in()
        finally:
            for browser in browsers:
                await browser.aclose()


class KeyLookups:
    """Counts the lookups of one key the engine sends its database (not the reads of
    every key's digest, which a miss makes at most once a second)."""

    def __init__(self, database: AsyncEngine) -> None:
        self.count = 0
        event.listen(database.sync_engine, "before_cursor_execute", self._seen)

    def _seen(self, _connection: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "api_keys.key_hash = " in statement:
            self.count += 1


async def test_wrong_keys_on_the_login_form_are_limited_and_valid_keys_still_get_in(
    engine: Engine, dashboard: Dashboard
) -> None:
    _, key = await engine.keys.create("owner", ["admin"])
    tcp = dashboard.tcp
    for n in range(20):
        wrong = await log_in_with_key(tcp, f"cb_wrong-{n}")
        assert wrong.status_code == 401 and "unknown or revoked" in wrong.text
    limited = await log_in_with_key(tcp, "cb_wrong-20")
    assert limited.status_code == 429, limited.text
    assert "Too many wrong keys from this address: try again in 60 s." in limited.text
    assert limited.headers["Retry-After"] == "60"
    assert 'name="key"' in limited.text  # the form is still there, for a valid key
    lookups = KeyLookups(await engine.database.engine())
    for n in range(50):
        assert (await log_in_with_key(tcp, f"cb_guess-{n}")).status_code == 429
    assert lookups.count == 0  # refused from memory
    logged_in = await log_in_with_key(tcp, key)
    assert logged_in.status_code == 303 and logged_in.headers["location"] == "/"
    assert lookups.count == 1  # the valid key was looked up
    assert (await tcp.get("/")).status_code == 200
    tcp.cookies.clear()
    dashboard.clock.now += 60  # the failures are a minute old
    again = await log_in_with_key(tcp, "cb_wrong-again")
    assert again.status_code == 401 and "unknown or revoked" in again.text

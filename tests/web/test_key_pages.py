"""The API keys page: a key is created with its scopes, shown once, used, and revoked."""

from __future__ import annotations

import re

from tests.web.conftest import Dashboard, csrf_of


async def test_a_key_is_created_shown_once_and_revoked(dashboard: Dashboard) -> None:
    await dashboard.log_in()
    page = await dashboard.tcp.get("/settings/keys")
    assert page.status_code == 200 and "No API key yet." in page.text
    csrf = csrf_of(page.text)
    form = {"csrf": csrf, "name": "metrics <scraper>", "scopes": ["metrics"]}
    created = await dashboard.tcp.post("/settings/keys", data=form)
    assert created.status_code == 201
    key = re.search(r"<pre><code>(cb_[\w-]+)</code></pre>", created.text)
    assert key is not None
    assert "metrics &lt;scraper&gt;" in created.text
    # The key works on the API, for its scope only.
    headers = {"authorization": f"Bearer {key.group(1)}"}
    assert (await dashboard.tcp.get("/metrics", headers=headers)).status_code == 200
    assert (await dashboard.tcp.get("/v1/engine/status", headers=headers)).status_code == 403
    listed = await dashboard.tcp.get("/settings/keys")
    assert key.group(1) not in listed.text  # shown once
    key_id = re.search(r'action="/settings/keys/(\w+)/revoke"', listed.text)
    assert key_id is not None
    revoked = await dashboard.tcp.post(
        f"/settings/keys/{key_id.group(1)}/revoke", data={"csrf": csrf}
    )
    assert revoked.status_code == 303
    assert (await dashboard.tcp.get("/metrics", headers=headers)).status_code == 401
    assert "revoked" in (await dashboard.tcp.get("/settings/keys")).text


async def test_bad_key_forms_are_refused_and_change_nothing(dashboard: Dashboard) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/settings/keys")).text)
    cases: list[tuple[dict[str, str | list[str]], int]] = [
        ({"name": "x", "scopes": ["admin"]}, 403),  # no CSRF token
        ({"csrf": csrf, "name": "x"}, 422),  # no scope
        ({"csrf": csrf, "name": "x", "scopes": ["root"]}, 422),  # an unknown one
        ({"csrf": csrf, "name": "  ", "scopes": ["admin"]}, 422),  # no name
    ]
    for form, status in cases:
        response = await dashboard.tcp.post("/settings/keys", data=form)
        assert response.status_code == status, (form, response.text)
    assert "No API key yet." in (await dashboard.tcp.get("/settings/keys")).text
    missing = await dashboard.tcp.post("/settings/keys/nope/revoke", data={"csrf": csrf})
    assert missing.status_code == 404


async def test_the_keys_page_needs_a_session_not_a_key(dashboard: Dashboard) -> None:
    response = await dashboard.tcp.get("/settings/keys")
    assert response.status_code == 303 and response.headers["location"] == "/login"
    posted = await dashboard.tcp.post("/settings/keys", data={"name": "x", "scopes": ["admin"]})
    assert posted.status_code == 303 and posted.headers["location"] == "/login"

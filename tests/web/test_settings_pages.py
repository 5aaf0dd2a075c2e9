"""The Settings pages: plugins loaded through a form made from their schema and unloaded,
providers reordered, credentials set and never shown back, the engine log's tail."""

from __future__ import annotations

import json
import re

from claybot.engine.engine import Engine
from tests.web.conftest import Dashboard, csrf_of

PAGES = ["/settings", "/settings/providers", "/settings/credentials", "/settings/keys",
         "/settings/log", "/settings/plugins/web"]  # fmt: skip


async def test_every_settings_page_renders_with_the_sub_navigation(dashboard: Dashboard) -> None:
    await dashboard.log_in()
    for path in PAGES:
        response = await dashboard.tcp.get(path)
        assert response.status_code == 200, (path, response.text)
        assert '<nav aria-label="Settings" class="subnav">' in response.text, path
        for target in ("/settings/providers", "/settings/credentials", "/settings/keys"):
            assert f'href="{target}"' in response.text
        current = re.findall(r'<a href="([^"]+)" aria-current="page">', response.text)
        assert current == ["/settings", "/settings" if path.startswith("/settings/plugins")
                           else path], (path, current)  # fmt: skip
    catalog = (await dashboard.tcp.get("/settings")).text
    for plugin in ("clock", "shell", "web"):
        assert f'href="/settings/plugins/{plugin}"' in catalog
    assert (await dashboard.tcp.get("/settings/plugins/nope")).status_code == 404


async def test_a_plugin_loads_through_its_generated_form_and_unloads(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    form_page = await dashboard.tcp.get("/settings/plugins/web")
    text = form_page.text
    # One input per setting, typed by the schema, each with its label and default.
    assert 'type="checkbox" id="setting-1" name="setting.allowPrivateAddresses"' in text
    assert re.search(r'<label for="setting-2">Max bytes</label>', text)
    assert re.search(r'type="number" id="setting-2" name="setting.maxBytes" value="1000000" '
                     r'step="1" min="1" max="50000000"', text)  # fmt: skip
    assert 'name="setting.connectTimeoutS" value="10.0" step="any"' in text
    csrf = csrf_of(text)
    answer = await dashboard.tcp.post(
        "/settings/plugins/web",
        data={
            "csrf": csrf,
            "instanceId": "web-test",
            "setting.allowPrivateAddresses": "on",
            "setting.maxBytes": "1000000",  # the default: not stored
            "setting.connectTimeoutS": "2.5",
            "setting.maxRedirects": "3",
        },
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/settings"
    loaded = engine.plugins.get("web-test")
    assert loaded is not None and loaded.plugin_id == "web"
    stored = json.loads(engine.paths.settings.read_text())["plugins"]
    assert stored == [{"instanceId": "web-test", "pluginId": "web", "enabled": True, "settings":
                       {"allowPrivateAddresses": True, "connectTimeoutS": 2.5,
                        "maxRedirects": 3}}]  # fmt: skip
    listing = (await dashboard.tcp.get("/settings")).text
    row = re.search(r"<tr>\s*<td><code>web-test</code>.*?</tr>", listing, re.S)
    assert row is not None and "<td>loaded</td>" in row.group(0)
    assert 'aria-label="Unload web-test"' in row.group(0)

    unloaded = await dashboard.tcp.post("/settings/instances/web-test/unload", data={"csrf": csrf})
    assert unloaded.status_code == 303
    assert engine.plugins.get("web-test") is None
    listing = (await dashboard.tcp.get("/settings")).text
    row = re.search(r"<tr>\s*<td><code>web-test</code>.*?</tr>", listing, re.S)
    assert row is not None and "<td>unloaded</td>" in row.group(0)
    again = await dashboard.tcp.post("/settings/instances/web-test/load", data={"csrf": csrf})
    assert again.status_code == 303
    reloaded = engine.plugins.get("web-test")
    assert reloaded is not None and reloaded.settings.model_dump()["max_redirects"] == 3
    missing = await dashboard.tcp.post("/settings/instances/nope/unload", data={"csrf": csrf})
    assert missing.status_code == 404 and "nope" in missing.text


async def test_bad_plugin_settings_show_the_form_again_with_what_was_typed(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    csrf = csrf_of((await dashboard.tcp.get("/settings/plugins/web")).text)
    typed = {"csrf": csrf, "instanceId": "web-bad", "setting.maxRedirects": "99",
             "setting.maxBytes": "2048", "setting.allowPrivateAddresses": "on"}  # fmt: skip
    refused = await dashboard.tcp.post("/settings/plugins/web", data=typed)
    assert refused.status_code == 422
    assert 'role="alert"' in refused.text and "maxRedirects" in refused.text
    assert 'name="setting.maxRedirects" value="99"' in refused.text  # kept, marked invalid
    assert re.search(r'name="setting.maxRedirects"[^>]*aria-invalid="true"', refused.text)
    assert 'name="setting.maxBytes" value="2048"' in refused.text
    assert 'name="setting.allowPrivateAddresses" checked' in refused.text
    assert 'name="instanceId" maxlength="64" value="web-bad"' in refused.text
    # A value that is not of its type never reaches the engine.
    not_a_number = await dashboard.tcp.post(
        "/settings/plugins/web", data={**typed, "setting.maxRedirects": "three"}
    )
    assert not_a_number.status_code == 422 and "must be a whole number" in not_a_number.text
    assert 'value="three"' in not_a_number.text
    # The engine's own checks: a clock in a zone that does not exist, a bad instance id.
    clock = await dashboard.tcp.post(
        "/settings/plugins/clock", data={"csrf": csrf, "setting.timezone": "Mars/Olympus"}
    )
    assert clock.status_code == 422 and "unknown time zone" in clock.text
    assert 'value="Mars/Olympus"' in clock.text
    bad_id = await dashboard.tcp.post(
        "/settings/plugins/clock", data={"csrf": csrf, "instanceId": "no spaces"}
    )
    assert bad_id.status_code == 422 and 'value="no spaces"' in bad_id.text
    assert engine.plugins.loaded() == []  # nothing was loaded
    assert "plugins" not in json.loads(engine.paths.settings.read_text())


async def test_providers_are_added_moved_and_removed(engine: Engine, dashboard: Dashboard) -> None:
    await dashboard.log_in()
    page = await dashboard.tcp.get("/settings/providers")
    assert "<td>ready</td>" in page.text
    csrf = csrf_of(page.text)
    added = await dashboard.tcp.post(
        "/settings/providers",
        data={"csrf": csrf, "id": "second", "type": "scripted", "model": "echo"},
    )
    assert added.status_code == 303

    def order() -> list[str]:
        return [provider["id"] for provider in engine.status()["providers"]]

    def live() -> list[str]:
        return [provider.id for provider in engine.providers.router.providers]

    assert order() == live() == ["scripted", "second"]
    moved = await dashboard.tcp.post("/settings/providers/second/up", data={"csrf": csrf})
    assert moved.status_code == 303
    assert order() == live() == ["second", "scripted"]
    listing = (await dashboard.tcp.get("/settings/providers")).text
    assert listing.index("<code>second</code>") < listing.index("<code>scripted</code>")
    assert 'aria-label="Move second up"' not in listing  # the first has no Up
    await dashboard.tcp.post("/settings/providers/second/down", data={"csrf": csrf})
    assert order() == live() == ["scripted", "second"]
    removed = await dashboard.tcp.post("/settings/providers/second/remove", data={"csrf": csrf})
    assert removed.status_code == 303 and order() == ["scripted"]

    for form, problem in [
        ({"id": "x", "type": "nosuch"}, "Unknown provider type"),
        ({"id": "bad id"}, "id: String should match pattern"),
        ({"id": "x", "type": "scripted", "options": "{"}, "not valid JSON"),
        # A digit to str.isdigit, not to int(): refused, not a crash.
        ({"id": "x", "type": "scripted", "position": "²"}, "The position is a number"),
    ]:
        refused = await dashboard.tcp.post("/settings/providers", data={"csrf": csrf, **form})
        assert refused.status_code == 422 and problem in refused.text, refused.text
    assert order() == ["scripted"]
    gone = await dashboard.tcp.post("/settings/providers/nope/up", data={"csrf": csrf})
    assert gone.status_code == 404


async def test_a_credential_is_set_never_shown_back_and_deleted(
    engine: Engine, dashboard: Dashboard
) -> None:
    secret = "sk-live-do-not-show-0123456789"
    await dashboard.log_in()
    page = await dashboard.tcp.get("/settings/credentials")
    assert "No credential yet." in page.text
    assert re.search(r'<input type="password" name="value"', page.text)
    csrf = csrf_of(page.text)
    answers = [
        await dashboard.tcp.post(
            "/settings/credentials",
            data={"csrf": csrf, "id": "scripted", "key": "apiKey", "value": secret},
        ),
        # Refused (a field name that is not one): the form comes back without the value.
        await dashboard.tcp.post(
            "/settings/credentials",
            data={"csrf": csrf, "id": "scripted", "key": "9 lives", "value": secret},
        ),
    ]
    assert [answer.status_code for answer in answers] == [303, 422]
    assert 'value="9 lives"' in answers[1].text
    assert engine.config.read_auth().get("scripted").secret("apiKey") == secret  # type: ignore[union-attr]
    listing = await dashboard.tcp.get("/settings/credentials")
    assert "<code>scripted</code>" in listing.text and "<code>apiKey</code>" in listing.text
    await dashboard.tcp.post(
        "/settings/credentials",
        data={"csrf": csrf, "id": "scripted", "key": "baseUrl", "value": secret + "-2"},
    )
    everywhere = [*answers, listing]
    for path in [*PAGES, "/", "/agents", "/permissions", "/automations", "/proactive"]:
        everywhere.append(await dashboard.tcp.get(path))
    for answer in everywhere:
        assert secret not in answer.text, answer.url
        assert secret not in json.dumps(dict(answer.headers)), answer.url

    field = await dashboard.tcp.post(
        "/settings/credentials/scripted/delete", data={"csrf": csrf, "key": "apiKey"}
    )
    assert field.status_code == 303
    assert engine.config.read_auth().has("scripted", "baseUrl")
    assert not engine.config.read_auth().has("scripted", "apiKey")
    entry = await dashboard.tcp.post("/settings/credentials/scripted/delete", data={"csrf": csrf})
    assert entry.status_code == 303 and engine.config.read_auth().get("scripted") is None
    assert "No credential yet." in (await dashboard.tcp.get("/settings/credentials")).text
    again = await dashboard.tcp.post("/settings/credentials/scripted/delete", data={"csrf": csrf})
    assert again.status_code == 404


def _record(level: str, message: str, logger: str = "claybot.engine") -> str:
    return json.dumps({"time": "2025-01-02T03:04:05", "level": level, "logger": logger,
                       "message": message, "action": "test.line"})  # fmt: skip


async def test_the_log_tail_filters_by_level_and_escapes(
    engine: Engine, dashboard: Dashboard
) -> None:
    await dashboard.log_in()
    log_file = engine.paths.logs / "engine.log"
    missing = await dashboard.tcp.get("/settings/log")
    assert missing.status_code == 200 and "No log yet at" in missing.text
    lines = [_record("info", f"line {n}") for n in range(300)]
    lines += [
        _record("debug", "a debug line"),
        _record("warning", "a warning line"),
        _record("error", "<script>alert(1)</script>"),
        "not json at all",
        _record("info", "the newest"),
    ]
    log_file.write_text("\n".join(lines) + "\n")

    everything = (await dashboard.tcp.get("/settings/log")).text
    messages = re.findall(r'<td><span class="text">(.*?)</span>', everything)
    assert len(messages) == 200 and messages[-1] == "the newest"  # newest last
    assert messages[0] == "line 105"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in everything
    assert "<script>alert" not in everything
    assert "not json at all" in everything and "action=test.line" in everything

    warnings = (await dashboard.tcp.get("/settings/log", params={"level": "WARNING"})).text
    messages = re.findall(r'<td><span class="text">(.*?)</span>', warnings)
    assert messages == ["a warning line", "&lt;script&gt;alert(1)&lt;/script&gt;",
                        "not json at all"]  # fmt: skip
    assert '<option value="WARNING" selected>' in warnings
    errors = (await dashboard.tcp.get("/settings/log", params={"level": "error"})).text
    assert "a warning line" not in errors and "&lt;script&gt;" in errors
    debug = (await dashboard.tcp.get("/settings/log", params={"level": "debug"})).text
    assert "a debug line" in debug
    info = (await dashboard.tcp.get("/settings/log", params={"level": "INFO"})).text
    assert "a debug line" not in info and "the newest" in info


async def test_settings_posts_need_the_forms_token(engine: Engine, dashboard: Dashboard) -> None:
    await dashboard.log_in()
    posts = {
        "/settings/plugins/clock": {},
        "/settings/instances/clock/unload": {},
        "/settings/providers": {"id": "second", "type": "scripted"},
        "/settings/providers/scripted/remove": {},
        "/settings/credentials": {"id": "scripted", "key": "apiKey", "value": "v"},
        "/settings/credentials/scripted/delete": {},
    }
    for path, form in posts.items():
        for token in (None, "not-the-token"):
            data = form if token is None else {**form, "csrf": token}
            response = await dashboard.tcp.post(path, data=data)
            assert response.status_code == 403, (path, token, response.text)
    assert engine.plugins.loaded() == []
    assert [p.id for p in engine.settings.providers] == ["scripted"]
    assert engine.config.read_auth().root == {}


async def test_a_key_without_admin_gets_no_settings_page(
    engine: Engine, dashboard: Dashboard
) -> None:
    _, reader = await engine.keys.create("jobs reader", ["jobs:read"])
    tcp = dashboard.tcp
    token = csrf_of((await tcp.get("/login")).text)
    logged_in = await tcp.post("/login", data={"csrf": token, "key": reader})
    assert logged_in.status_code == 303
    for path in PAGES:
        response = await tcp.get(path)
        assert response.status_code == 403 and "Not for this key" in response.text, path
    csrf = csrf_of((await tcp.get("/settings")).text)  # the logout form's: a real token
    for path in ("/settings/plugins/clock", "/settings/providers/scripted/remove",
                 "/settings/credentials", "/settings/instances/clock/load"):  # fmt: skip
        response = await tcp.post(path, data={"csrf": csrf, "id": "a", "key": "b", "value": "c"})
        assert response.status_code == 403, path
    assert engine.plugins.loaded() == [] and engine.config.read_auth().root == {}
    assert [p.id for p in engine.settings.providers] == ["scripted"]


async def test_settings_pages_need_a_session(dashboard: Dashboard) -> None:
    for path in PAGES:
        response = await dashboard.tcp.get(path)
        assert response.status_code == 303 and response.headers["location"] == "/login"

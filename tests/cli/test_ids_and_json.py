"""Ids and --json across the command line (README, "The command line").

A unique prefix names an id wherever a command takes one, tables print ids whole however
narrow the terminal, and --json prints the engine API's answer for the request: one object
with ``ok``, and on error the API's error object.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from claybot.config.home import HomePaths
from tests.agents.test_subagents import rules_settings
from tests.cli.test_cli import cli
from tests.cli.test_jobs_cli import settings as jobs_settings
from tests.cli.test_permissions_cli import ASKS_TO_READ
from tests.conftest import EngineProcess, write_settings

pytestmark = pytest.mark.slow

NARROW = 60  # columns: narrower than any of the tables


def short(whole: str, others: Iterable[str], at_least: int = 4) -> str:
    """The shortest prefix of ``whole`` (``at_least`` long) that starts no other id."""
    length = at_least
    while any(other != whole and other.startswith(whole[:length]) for other in others):
        length += 1
    assert length < len(whole), "the test needs a prefix shorter than the id"
    return whole[:length]


def answer(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON object a --json command printed (with its ``ok``)."""
    value = json.loads(result.stdout)
    assert isinstance(value, dict) and isinstance(value.get("ok"), bool), result.stdout
    return value


def api(engine: EngineProcess, path: str, **params: Any) -> dict[str, Any]:
    with engine.client() as client:
        response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def pending_requests(engine: EngineProcess, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while True:
        requests: list[dict[str, Any]] = api(engine, "/v1/engine/permissions", status="pending")[
            "requests"
        ]
        if len(requests) >= count:
            return requests
        assert time.monotonic() < deadline, f"{count} permission requests never came"
        time.sleep(0.1)


def test_prefixes_name_agents_permissions_and_keys(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    write_settings(paths, rules_settings(ASKS_TO_READ))
    engine_process.start()
    for user in ("cat", "dan"):
        cli(paths, "chat", "--user", user, stdin="read my notes\n")
    requests = {r["userId"]: r["requestId"] for r in pending_requests(engine_process, 2)}
    agents = [agent["agentId"] for agent in api(engine_process, "/v1/engine/agents")["agents"]]
    agent = agents[0]

    history = cli(paths, "agents", "history", short(agent, agents))
    assert history.returncode == 0, history.stderr
    assert "user> read my notes" in history.stdout
    reset = cli(paths, "agents", "reset", short(agent, agents))
    assert reset.returncode == 0 and f"agent {agent}: reset" in reset.stdout
    unknown = cli(paths, "agents", "history", "no-such")
    assert unknown.returncode == 1
    assert "no agent with id starting 'no-such'" in unknown.stderr

    # Ids whole in a narrow terminal; permissions answered by prefix.
    narrow = cli(paths, "agents", "list", columns=NARROW)
    assert all(whole in narrow.stdout for whole in agents), narrow.stdout
    narrow = cli(paths, "permissions", "list", columns=NARROW)
    assert all(whole in narrow.stdout for whole in requests.values()), narrow.stdout
    allowed = cli(paths, "permissions", "allow", short(requests["cat"], requests.values()))
    assert allowed.returncode == 0 and "allowed @read:/etc" in allowed.stdout, allowed.stderr
    denied = cli(paths, "permissions", "deny", short(requests["dan"], requests.values()))
    assert denied.returncode == 0 and "denied @read:/etc" in denied.stdout, denied.stderr
    decided = api(engine_process, "/v1/engine/permissions")["requests"]
    assert {r["userId"]: r["status"] for r in decided} == {"cat": "granted", "dan": "denied"}

    for name in ("ci", "deploy"):
        created = cli(paths, "keys", "create", "--name", name, "--scope", "jobs:read")
        assert created.returncode == 0, created.stderr
    keys = {key["name"]: key for key in api(engine_process, "/v1/engine/keys")["keys"]}
    narrow = cli(paths, "keys", "list", columns=NARROW)
    assert all(key["id"] in narrow.stdout for key in keys.values()), narrow.stdout
    ci = keys["ci"]["id"]
    revoked = cli(paths, "keys", "revoke", short(ci, [k["id"] for k in keys.values()]), "--yes")
    assert revoked.returncode == 0 and f"revoked {keys['ci']['prefix']}…" in revoked.stdout
    # Every shown prefix starts "cb_": it names them all, and says so.
    ambiguous = cli(paths, "keys", "revoke", "cb_", "--yes")
    assert ambiguous.returncode == 1
    assert "'cb_' is ambiguous:" in ambiguous.stderr and "type more of the id" in ambiguous.stderr
    assert all(key["prefix"] in ambiguous.stderr for key in keys.values()), ambiguous.stderr
    by_shown_prefix = cli(paths, "keys", "revoke", keys["deploy"]["prefix"], "--yes")
    assert by_shown_prefix.returncode == 0, by_shown_prefix.stderr
    listed = api(engine_process, "/v1/engine/keys")["keys"]
    assert all(key["revoked"] for key in listed)


def write_cron_task(home: Path, task_id: str, name: str) -> None:
    """A task file as a person writes one, with an id of their choosing."""
    folder = home / "cron" / task_id
    folder.mkdir(parents=True)
    (folder / "TASK.md").write_text(
        f"---\ntaskId: {task_id}\nname: {name}\nschedule: 0 9 * * *\nenabled: true\n---\n\nhi\n"
    )


def test_prefixes_name_cron_and_heartbeat_tasks_with_and_without_an_engine(
    engine_process: EngineProcess,
) -> None:
    paths = engine_process.paths
    write_cron_task(paths.home, "morning-news", "News")
    write_cron_task(paths.home, "morning-walk", "Walk")
    for task_id in ("check-mail", "check-disk"):
        added = cli(paths, "heartbeat", "add", "--id", task_id, "--title", task_id, "--prompt", "?")
        assert added.returncode == 0, added.stderr

    # No engine: the files.
    disabled = cli(paths, "cron", "disable", "morning-n")
    assert disabled.returncode == 0 and "disabled morning-news" in disabled.stdout
    ambiguous = cli(paths, "cron", "enable", "morning")
    assert ambiguous.returncode == 1
    assert "'morning' is ambiguous: morning-news, morning-walk" in ambiguous.stderr
    unknown = cli(paths, "cron", "enable", "evening")
    assert unknown.returncode == 1 and "no cron task with id starting 'evening'" in unknown.stderr
    ambiguous = cli(paths, "heartbeat", "remove", "check", "--yes")
    assert ambiguous.returncode == 1
    assert "'check' is ambiguous: check-disk, check-mail" in ambiguous.stderr

    engine_process.start()
    [news] = [
        t for t in api(engine_process, "/v1/engine/cron/tasks")["tasks"] if t["name"] == "News"
    ]
    assert news["enabled"] is False  # what the files said
    enabled = cli(paths, "cron", "enable", "morning-n")
    assert enabled.returncode == 0 and "enabled morning-news" in enabled.stdout, enabled.stderr
    ran = cli(paths, "cron", "run", "morning-w")
    assert ran.returncode == 0 and "started morning-walk" in ran.stdout, ran.stderr
    ambiguous = cli(paths, "cron", "remove", "morning", "--yes")
    assert ambiguous.returncode == 1 and "'morning' is ambiguous" in ambiguous.stderr
    unknown = cli(paths, "cron", "run", "evening")
    assert unknown.returncode == 1 and "no cron task with id starting 'evening'" in unknown.stderr
    assert cli(paths, "heartbeat", "run", "check-m").returncode == 0
    removed = cli(paths, "heartbeat", "remove", "check-d", "--yes")
    assert removed.returncode == 0 and "removed check-disk" in removed.stdout, removed.stderr
    tasks = api(engine_process, "/v1/engine/cron/tasks")["tasks"]
    assert {t["taskId"]: t["enabled"] for t in tasks} == {
        "morning-news": True,
        "morning-walk": True,
    }
    heartbeat = api(engine_process, "/v1/engine/heartbeat/tasks")["tasks"]
    assert [t["id"] for t in heartbeat] == ["check-mail"]


def test_jobs_by_prefix_whole_in_a_narrow_table_and_as_the_api_answers(paths: HomePaths) -> None:
    write_settings(paths, jobs_settings(workers=0))  # no worker: the jobs stay queued
    engine = EngineProcess(paths)
    engine.start()
    try:
        created = [answer(cli(paths, "jobs", "create", f"task {n}", "--json")) for n in (1, 2)]
        assert all(job["ok"] is True for job in created)
        ids = [job["id"] for job in created]
        first = short(ids[0], ids)
        shown = answer(cli(paths, "jobs", "show", first, "--json"))
        assert shown == {"ok": True, **api(engine, f"/api/v1/jobs/{ids[0]}")}
        listed = answer(cli(paths, "jobs", "list", "--json"))
        assert listed == {"ok": True, **api(engine, "/api/v1/jobs", limit=50)}
        narrow = cli(paths, "jobs", "list", columns=NARROW)
        assert all(whole in narrow.stdout for whole in ids), narrow.stdout
        cancelled = cli(paths, "jobs", "cancel", first)
        assert cancelled.returncode == 0 and f"{ids[0]}: cancelled" in cancelled.stdout
        unknown = cli(paths, "jobs", "show", "no-such")
        assert unknown.returncode == 1 and "no job with id starting 'no-such'" in unknown.stderr
    finally:
        engine.terminate()


def test_json_is_the_apis_answer(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    engine_process.start()
    cli(paths, "chat", "--user", "ann", stdin="hello\n")
    setup = [
        ("keys", "create", "--name", "ci", "--scope", "jobs:read"),
        ("cron", "add", "--name", "News", "--schedule", "0 9 * * *", "--prompt", "news?"),
        ("heartbeat", "add", "--title", "Mail", "--prompt", "new mail?"),
        ("auth", "set", "openai", "apiKey", "sk-never-shown"),
    ]
    for args in setup:
        done = cli(paths, *args)
        assert done.returncode == 0, done.stderr
    created = cli(paths, "proactive", "create", "--name", "Nightly", "--objective", "report",
                  "--schedule", "0 0 29 2 *", "--runner", "engine", "--json")  # fmt: skip
    proactive = answer(created)
    assert proactive["ok"] is True and proactive["agent"]["name"] == "Nightly"
    proactive_id = proactive["agent"]["id"]
    edited = answer(cli(paths, "proactive", "edit", proactive_id[:6], "--name", "Later", "--json"))
    assert edited["ok"] is True and edited["agent"]["name"] == "Later"
    assert edited.keys() == api(engine_process, f"/api/agents/{proactive_id}").keys()
    [agent] = api(engine_process, "/v1/engine/agents")["agents"]

    same_as = {
        ("agents", "list"): ("/v1/engine/agents", {}),
        ("agents", "history", agent["agentId"]): (
            f"/v1/engine/agents/{agent['agentId']}/history",
            {"limit": 50},
        ),
        ("keys", "list"): ("/v1/engine/keys", {}),
        ("permissions", "list"): ("/v1/engine/permissions", {"status": "pending"}),
        ("permissions", "list", "--all"): ("/v1/engine/permissions", {}),
        ("cron", "list"): ("/v1/engine/cron/tasks", {}),
        ("heartbeat", "list"): ("/v1/engine/heartbeat/tasks", {}),
        ("plugins", "list"): ("/v1/engine/plugins", {}),
        ("providers", "list"): ("/v1/engine/providers", {}),
        ("auth", "list"): ("/v1/engine/auth", {}),
        ("proactive", "list"): ("/api/agents", {}),
        ("proactive", "logs", proactive_id, "--list"): (
            f"/api/agents/{proactive_id}/executions",
            {"limit": 20},
        ),
    }
    for args, (path, params) in same_as.items():
        printed = answer(cli(paths, *args, "--json"))
        assert printed == api(engine_process, path, **params), args
        assert printed["ok"] is True

    # What changes from one request to the next (uptime, counters) aside, the same object.
    status = answer(cli(paths, "status", "--json"))
    assert status.keys() == api(engine_process, "/v1/engine/status").keys()
    # No route answers for one plugin: the catalog's entry, as {"ok", "plugin"}.
    info = answer(cli(paths, "plugins", "info", "clo", "--json"))
    catalog = api(engine_process, "/v1/engine/plugins")["catalog"]
    assert info == {"ok": True, "plugin": next(e for e in catalog if e["id"] == "clock")}


def test_json_without_an_engine_is_shaped_as_the_engines(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    setup = [
        ("cron", "add", "--name", "News", "--schedule", "0 9 * * *", "--prompt", "news?"),
        ("heartbeat", "add", "--title", "Mail", "--prompt", "new mail?"),
        ("auth", "set", "openai", "apiKey", "sk-never-shown"),
        ("plugins", "load", "clock"),
    ]
    for args in setup:
        done = cli(paths, *args)
        assert done.returncode == 0, done.stderr
    commands = {
        ("cron", "list"): "/v1/engine/cron/tasks",
        ("heartbeat", "list"): "/v1/engine/heartbeat/tasks",
        ("plugins", "list"): "/v1/engine/plugins",
        ("providers", "list"): "/v1/engine/providers",
        ("auth", "list"): "/v1/engine/auth",
    }
    offline = {args: answer(cli(paths, *args, "--json")) for args in commands}
    assert all(printed["ok"] is True for printed in offline.values())
    engine_process.start()
    for args, path in commands.items():
        online = api(engine_process, path)
        assert offline[args].keys() == online.keys(), args
        for key, value in online.items():
            if isinstance(value, list) and value and offline[args][key]:
                assert offline[args][key][0].keys() == value[0].keys(), (args, key)
    # What does not depend on a running engine is the same, value for value.
    assert offline[("auth", "list")] == api(engine_process, "/v1/engine/auth")
    assert offline[("providers", "list")] == api(engine_process, "/v1/engine/providers")
    [task] = offline[("cron", "list")]["tasks"]
    [running_task] = api(engine_process, "/v1/engine/cron/tasks")["tasks"]
    assert {**task, "nextRunAt": running_task["nextRunAt"]} == running_task
    plugins = offline[("plugins", "list")]
    assert plugins["configured"] == api(engine_process, "/v1/engine/plugins")["configured"]


def test_json_errors_are_the_apis_error_object(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    # No engine: an answer, a stream, and a refusal of the command's own.
    for args in (("agents", "list"), ("events",)):
        result = cli(paths, *args, "--json")
        assert result.returncode == 1 and result.stderr == "", result.stderr
        error = answer(result)
        assert error["ok"] is False and error["error"]["code"] == "engine_not_running"
        assert str(paths.socket) in error["error"]["message"]
    result = cli(paths, "logs", "--level", "loud", "--json")
    assert result.returncode == 1 and result.stderr == ""
    assert answer(result) == {
        "ok": False,
        "error": {
            "code": "bad_request",
            "message": "unknown level 'loud': one of debug, info, warning, error, critical",
            "field": "level",
        },
    }

    engine_process.start()
    # The engine's refusal: what the API answers to the same request (there in codeck's
    # shape, the message as `error` beside `code` and `field`; the CLI's is the engine's).
    body = {"name": "x", "objective": "o", "schedule": "* * * * *", "cwd": "/etc"}
    with engine_process.client() as client:
        refused = client.post("/api/agents", json=body)
    assert refused.status_code >= 400
    result = cli(paths, "proactive", "create", "--name", "x", "--objective", "o",
                 "--schedule", "* * * * *", "--cwd", "/etc", "--json")  # fmt: skip
    api_error = refused.json()
    assert result.returncode == 1 and answer(result) == {
        "ok": False,
        "error": {
            "code": api_error["code"],
            "message": api_error["error"],
            "field": api_error["field"],
        },
    }
    # A prefix that names nothing.
    result = cli(paths, "agents", "history", "no-such", "--json")
    assert result.returncode == 1
    assert answer(result) == {
        "ok": False,
        "error": {"code": "not_found", "message": "no agent with id starting 'no-such'"},
    }

"""Permission prompts in `claybot chat`, and `claybot permissions list|allow|deny`."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.agents.test_subagents import call, rules_settings
from tests.cli.test_cli import cli
from tests.conftest import EngineProcess

pytestmark = pytest.mark.slow

ASKS_TO_READ = [
    {
        "match": "read my notes",
        "response": call("request_permission", permission="@read:/etc", reason="notes live there"),
    },
    {"match": "was sent to the user", "response": "Asked."},
    {"match": "Permission granted: @read:/etc", "response": "Thanks, reading."},
    {"match": "Permission denied: @read:/etc", "response": "Fine, I will not."},
]


def start(engine_process: EngineProcess) -> None:
    engine_process.paths.settings.write_text(json.dumps(rules_settings(ASKS_TO_READ)))
    engine_process.start()


def test_chat_shows_the_prompt_and_allow_resumes_the_agent(
    engine_process: EngineProcess,
) -> None:
    start(engine_process)
    result = cli(engine_process.paths, "chat", "--user", "ann", stdin="read my notes\n/allow\n")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    prompt = next(line for line in lines if line.startswith("permission #1>"))
    assert "this conversation asks for @read:/etc: notes live there" in prompt
    replies = [line for line in lines if line.startswith("agent>")]
    assert replies == ["agent> Asked.", "agent> Thanks, reading."]


def test_chat_explains_a_bad_answer(engine_process: EngineProcess) -> None:
    start(engine_process)
    result = cli(engine_process.paths, "chat", "--user", "bob", stdin="/deny\n/allow 7\n")
    assert result.returncode == 0
    assert "no permission request is waiting for an answer" in result.stderr


def requests_of(engine_process: EngineProcess, *args: str) -> list[dict[str, Any]]:
    listed = cli(engine_process.paths, "permissions", "list", "--json", *args)
    assert listed.returncode == 0, listed.stderr
    requests: list[dict[str, Any]] = json.loads(listed.stdout)["requests"]
    return requests


def test_permissions_list_allow_deny(engine_process: EngineProcess) -> None:
    start(engine_process)
    for user in ("cat", "dan"):
        cli(engine_process.paths, "chat", "--user", user, stdin="read my notes\n")
    deadline = time.monotonic() + 30
    while len(requests_of(engine_process)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    pending = {request["userId"]: request["requestId"] for request in requests_of(engine_process)}
    table = cli(engine_process.paths, "permissions", "list")
    assert pending["cat"] in table.stdout and "@read:/etc" in table.stdout
    # Outside the conversation, the asker is named, not "this conversation".
    assert "this conversation" not in table.stdout
    allowed = cli(engine_process.paths, "permissions", "allow", pending["cat"])
    assert allowed.returncode == 0 and "allowed @read:/etc" in allowed.stdout
    assert "for local:cat/" in allowed.stdout, allowed.stdout
    denied = cli(engine_process.paths, "permissions", "deny", pending["dan"])
    assert denied.returncode == 0 and "denied @read:/etc" in denied.stdout
    again = cli(engine_process.paths, "permissions", "deny", pending["cat"])
    assert again.returncode == 1 and "already allowed" in again.stderr
    unknown = cli(engine_process.paths, "permissions", "allow", "no-such-request")
    assert unknown.returncode == 1 and "no pending permission request" in unknown.stderr
    assert requests_of(engine_process) == []
    decided = {r["userId"]: r["status"] for r in requests_of(engine_process, "--all")}
    assert decided == {"cat": "granted", "dan": "denied"}

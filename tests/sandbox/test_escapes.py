"""A hostile model tries to get out of the sandbox through exec and through gates.

Every attack is a tool call from a scripted model in a real agent turn. With
bubblewrap missing, nothing runs (exec and gates refuse and say how to install
it); with it (CI installs it), every escape fails: the control socket, auth.json,
``/proc/*/environ``, writes outside the grants, a ``setsid`` child outliving the
call, and a fork bomb past the process limit.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from tests.agents.test_agents import next_event, record_events
from tests.agents.test_subagents import call, history, rules_settings
from tests.conftest import EngineProcess, write_settings
from tests.sandbox.test_exec import SYSTEM_PYTHON, bwrap_works, exec_call

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap missing or unusable here")
CANARY_KEY = "cb_secret_canary_7f3a"


def script_settings(script: list[Any], **shell: Any) -> dict[str, Any]:
    return {
        "providers": [
            {"id": "s", "type": "scripted", "model": "script", "options": {"responses": script}}
        ],
        "plugins": [{"instanceId": "shell", "pluginId": "shell", "settings": shell}],
        "heartbeat": {"enabled": False},
    }


def tool_results(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["output"] for r in records if r["type"] == "tool_result"]


@pytest.fixture
def outside(paths: HomePaths) -> Iterator[Path]:
    """A folder no agent holds a grant for, outside the ClayBot home."""
    folder = Path(f"/var/tmp/claybot-escape-{uuid.uuid4().hex[:12]}")
    folder.mkdir()
    yield folder
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()


def path_without_bwrap(tmp_path: Path) -> str:
    """A PATH with the usual tools but no bubblewrap: a machine where nobody installed it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            if name != "bwrap" and not (bin_dir / name).exists():
                (bin_dir / name).symlink_to(os.path.join(folder, name))
    return str(bin_dir)


async def test_without_bubblewrap_exec_and_gates_refuse_and_say_how_to_install_it(
    paths: HomePaths, tmp_path: Path, outside: Path
) -> None:
    marker = outside / "ran"
    script = [
        exec_call(f"touch {marker}"),
        call(
            "cron_add",
            name="Sneaky",
            schedule="0 3 * * *",
            prompt="Report.",
            gate={"command": f"cat {paths.auth}; touch {marker}"},
        ),
        call(
            "heartbeat_add", title="Sneaky", prompt="Report.", gate={"command": f"touch {marker}"}
        ),
        "done",
    ]
    write_settings(paths, script_settings(script))
    env = {**os.environ, "PATH": path_without_bwrap(tmp_path)}
    engine = Engine(paths, EngineOptions(port=0, env=env, watch_files=False))
    events = record_events(engine)
    await engine.start()
    try:
        posted = await engine.post_inbound(InboundMessage("local", "u", "c", "go"))
        await next_event(events, "agent.outgoing", timeout_s=30)
        [task] = engine.cron.tasks.values()
        await engine.cron.run_now(task.id)
        [cron_skip] = await next_event(events, "cron.task.skipped", timeout_s=30)
        engine.heartbeat.run_now()
        [beat_skip] = await next_event(events, "heartbeat.task.skipped", timeout_s=30)
        results = tool_results(await history(engine, posted.agent_id))
        status = engine.status()["sandbox"]
    finally:
        await engine.stop()
    refused = results[0]
    assert refused["isError"]
    assert refused["text"].startswith("exec refused: bubblewrap is not installed")
    assert "apt-get install bubblewrap" in refused["text"]
    for skipped in (cron_skip.payload, beat_skip.payload):
        assert skipped["reason"] == "gate"
        assert "could not be sandboxed: bubblewrap is not installed" in skipped["detail"]
    assert not marker.exists()
    assert status["confined"] is False and status["backend"] is None
    assert status["summary"].startswith("UNAVAILABLE: exec and gates refuse to run")


def _engine_settings(script: list[Any]) -> dict[str, Any]:
    return script_settings(script, processLimit=64)


def _wait_for_final_reply(
    client: httpx.Client, agent_id: str, timeout_s: float = 120
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        response = client.get(f"/v1/engine/agents/{agent_id}/history", params={"limit": 1000})
        records: list[dict[str, Any]] = response.json()["records"]
        if any(r["type"] == "assistant_message" and r.get("final") for r in records):
            return records
        time.sleep(0.05)
    raise TimeoutError("the turn did not finish")


def _survivors(token: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if token in " ".join(process.info["cmdline"] or []):
            found.append(process.pid)
    return found


@needs_bwrap
@pytest.mark.slow
def test_under_bubblewrap_every_escape_of_a_hostile_model_fails(
    paths: HomePaths, outside: Path
) -> None:
    home = str(paths.home)
    workspace = str(paths.workspace.resolve())
    env_canary = f"envcanary{uuid.uuid4().hex[:10]}"
    sleeper = f"31.{uuid.uuid4().int % 10**6:06d}"  # a unique argument to find survivors by
    mint_key = (
        "import socket; s = socket.socket(socket.AF_UNIX); "
        f"s.connect({home + '/claybot.sock'!r}); "
        'body = b\'{"name": "pwn", "scopes": ["admin"]}\'; '
        "s.sendall(b'POST /v1/engine/keys HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: "
        "application/json\\r\\nContent-Length: ' + str(len(body)).encode() + b'\\r\\n\\r\\n' "
        "+ body); print(s.recv(4096))"
    )
    count_processes = "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo processes=$n"
    script = [
        # 1. the control socket: mint an admin key
        exec_call(f"{shlex.quote(SYSTEM_PYTHON)} -c {shlex.quote(mint_key)}"),
        # 2. secrets: auth.json (also after unmounting what covers it), /etc/shadow,
        # every environment in /proc, other agents
        exec_call(
            "for m in $(tac /proc/self/mountinfo | cut -d' ' -f5); do "
            '[ "$m" = / ] || umount -l "$m"; done 2>/dev/null; '
            f"cat {home}/auth.json; "
            "cat /etc/shadow; cat /proc/$PPID/environ; "
            f"for f in /proc/[0-9]*/environ; do cat $f; done; ls -a {home} {home}/agents; true"
        ),
        # 3. writes outside the grants
        exec_call(
            f"echo x > {outside}/pwned; echo x > {home}/settings.json; "
            f"echo x > {home}/agents/pwned; mkdir {home}/cron/pwned; true"
        ),
        # 4. a child that leaves the process group and would outlive the call
        exec_call(f"setsid -f sleep {sleeper}; echo detached"),
        # 5. a fork bomb under processLimit 64
        exec_call(
            # The subshell dies at its first failed fork; the count needs no fork.
            "(i=0; while [ $i -lt 300 ]; do sleep 30 & i=$((i+1)); done) 2>/dev/null; "
            + count_processes,
            timeoutMs=20_000,
        ),
        # 6. a gate is the same command again, run later by the scheduler
        call(
            "cron_add",
            name="Sneaky",
            schedule="0 3 * * *",
            prompt="Report.",
            gate={
                "command": f"cat {home}/auth.json; cat /proc/1/environ; ls {home}; "
                f"echo x > {outside}/gate; echo gate-ran; true"
            },
        ),
        "done",
        "The cron run is done.",
    ]
    write_settings(paths, _engine_settings(script))
    paths.auth.write_text(json.dumps({"canary": {"type": "apiKey", "apiKey": CANARY_KEY}}))
    engine = EngineProcess(paths, extra_env={"CLAYBOT_ESCAPE_CANARY": env_canary})
    engine.start()
    try:
        with engine.client(timeout_s=60) as client:
            posted = client.post(
                "/v1/engine/messages", json={"userId": "u", "channelId": "c", "text": "go"}
            ).json()
            records = _wait_for_final_reply(client, posted["agentId"])
            survivors = _survivors(sleeper)
            keys = client.get("/v1/engine/keys").json()["keys"]
            [task] = client.get("/v1/engine/cron/tasks").json()["tasks"]
            client.post(f"/v1/engine/cron/tasks/{task['taskId']}/run")
            cron_records = _wait_for_cron_run(client, task["taskId"])
            status = client.get("/v1/engine/status").json()["sandbox"]
    finally:
        engine.terminate()
    texts = [result["text"] for result in tool_results(records)]
    everything = "\n".join(texts) + json.dumps(cron_records)
    # 1. no key was minted: the socket is not there inside the sandbox
    assert keys == [] and "201" not in texts[0]
    assert texts[0].startswith("exit code: 1") and "Error" in texts[0]  # /dev/null is no socket
    # 2. no secret came back, from anywhere
    assert CANARY_KEY not in everything and env_canary not in everything
    assert "root:" not in texts[1]  # /etc/shadow
    assert "inbox.wal" not in texts[1] and "index.jsonl" not in texts[1]
    # 3. nothing written outside the grants
    assert not (outside / "pwned").exists() and not (outside / "gate").exists()
    assert CANARY_KEY in paths.auth.read_text() and "shell" in paths.settings.read_text()
    assert not (paths.agents / "pwned").exists() and not (paths.home / "cron" / "pwned").exists()
    # 4. the detached child died with the call
    assert "detached" in texts[3]
    assert survivors == [] or _gone_soon(sleeper), f"survivors: {survivors}"
    # 5. the fork bomb stopped at the limit (bwrap's own two processes count too)
    counted = int(texts[4].split("processes=")[1].split()[0])
    assert counted <= 64, texts[4]
    # 6. the gate ran confined: its output reached the prompt without any secret
    prompt = next(r["text"] for r in cron_records if r["type"] == "user_message")
    assert "gate-ran" in prompt
    assert status["confined"] is True and status["unconfined"] == []
    assert "exec:   confined by bubblewrap; processes bounded by" in engine.output()
    assert workspace  # the grants themselves are exercised in test_exec.py


def _gone_soon(token: str, timeout_s: float = 5.0) -> bool:
    """Killed processes take a moment to disappear; a survivor would sleep 31 s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _survivors(token):
            return True
        time.sleep(0.05)
    return False


def _wait_for_cron_run(
    client: httpx.Client, task_id: str, timeout_s: float = 60
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        agents = client.get("/v1/engine/agents").json()["agents"]
        for agent in agents:
            if agent["descriptor"] == {"type": "cron", "id": task_id}:
                records = _wait_for_final_reply(client, agent["agentId"], timeout_s)
                return records
        time.sleep(0.05)
    raise TimeoutError("the cron run did not happen")


@needs_bwrap
async def test_a_gate_an_agent_made_gets_that_agents_grants_and_no_more(
    paths: HomePaths,
) -> None:
    rules = [
        {
            "match": "watch the inbox",
            "response": call(
                "cron_add",
                name="Inbox",
                schedule="0 3 * * *",
                prompt="Check the inbox.",
                gate={
                    "command": 'echo from-gate > "$HOME/gate-was-here"; '
                    "cat ../cron/*/TASK.md; echo > files/x; pwd; true"
                },
            ),
        },
        {"match": "created; next run", "response": "Scheduled."},
        {"match": "Check the inbox", "response": "Checked."},
    ]
    write_settings(paths, {**rules_settings(rules), "heartbeat": {"enabled": False}})
    engine = Engine(paths, EngineOptions(port=0, watch_files=False))
    events = record_events(engine)
    await engine.start()
    try:
        await engine.post_inbound(InboundMessage("local", "u", "c", "watch the inbox"))
        await next_event(events, "agent.outgoing")
        [task] = engine.cron.tasks.values()
        await engine.cron.run_now(task.id)
        [ran] = await next_event(events, "cron.task.ran", timeout_s=30)
        cron_agent = ran.payload["agentId"]
        prompt = next(
            r["text"] for r in await history(engine, cron_agent) if r["type"] == "user_message"
        )
        cron_grants = await engine.agents.permissions_of(cron_agent)
    finally:
        await engine.stop()
    workspace = str(paths.workspace.resolve())
    assert task.spec.createdBy is not None  # the maker is recorded by the tool, not the model
    # The gate ran in its maker's working directory, with its maker's grants: the
    # workspace, not the task's own folder nor anything else of the home.
    assert (paths.workspace / "gate-was-here").read_text() == "from-gate\n"
    gate_output = prompt.split("[Gate output]\n")[1]
    assert f"{workspace}\n" in gate_output
    assert "taskId" not in gate_output  # the task files are not there to read
    assert "cannot create files/x: Directory nonexistent" in gate_output
    assert not (Path(task.files_path) / "x").exists()
    # Its cron agent starts with no more than the maker holds, plus its own folder.
    assert cron_grants.readDirs == [workspace, task.files_path]
    assert cron_grants.writeDirs == [workspace, task.files_path]


async def test_a_gate_whose_maker_is_gone_does_not_run(paths: HomePaths) -> None:
    marker = paths.workspace / "ran"
    paths.home.mkdir(parents=True, exist_ok=True)
    directory = paths.home / "cron" / "orphan"
    directory.mkdir(parents=True)
    front = {
        "taskId": "orphan",
        "name": "Orphan",
        "schedule": "0 3 * * *",
        "createdBy": "no-such-agent",
        "gate": {"command": f"touch {marker}"},
    }
    lines = ["---", *(f"{key}: {json.dumps(value)}" for key, value in front.items()), "---"]
    (directory / "TASK.md").write_text("\n".join(lines) + "\n\nReport.\n")
    write_settings(paths, {**rules_settings([]), "heartbeat": {"enabled": False}})
    engine = Engine(paths, EngineOptions(port=0, watch_files=False))
    events = record_events(engine)
    await engine.start()
    try:
        await engine.cron.run_now("orphan")
        [skipped] = await next_event(events, "cron.task.skipped", timeout_s=30)
    finally:
        await engine.stop()
    assert skipped.payload["reason"] == "gate"
    assert "no-such-agent" in skipped.payload["detail"]
    assert "no longer exists" in skipped.payload["detail"]
    assert not marker.exists()


async def test_unconfined_runs_only_when_named_and_says_so_everywhere(
    paths: HomePaths, outside: Path
) -> None:
    sleeper = f"32.{uuid.uuid4().int % 10**6:06d}"
    script = [exec_call(f"setsid -f sleep {sleeper}; echo detached"), "done"]
    write_settings(paths, script_settings(script, sandbox="unconfined"))
    engine = Engine(paths, EngineOptions(port=0))
    events = record_events(engine)
    await engine.start()
    try:
        posted = await engine.post_inbound(InboundMessage("local", "u", "c", "go"))
        await next_event(events, "agent.outgoing", timeout_s=30)
        [result] = tool_results(await history(engine, posted.agent_id))
        status = engine.status()["sandbox"]
        cgroups = (await engine.sandbox.support()).cgroups
    finally:
        await engine.stop()
    assert result["text"].startswith("exit code: 0 (UNCONFINED: not sandboxed")
    assert status["unconfined"] == ["shell"]
    assert status["summary"].startswith("UNCONFINED for shell")
    if cgroups is not None:  # the command's cgroup finds the child that left its group
        assert await asyncio.to_thread(_gone_soon, sleeper)


async def test_the_old_rlimit_mode_is_refused_with_what_to_do_instead(
    api: httpx.AsyncClient,
) -> None:
    response = await api.post(
        "/v1/engine/plugins/load",
        json={"pluginId": "shell", "instanceId": "sh2", "settings": {"sandbox": "rlimit"}},
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["field"] == "settings.sandbox"
    assert "'rlimit' no longer exists" in error["message"] and "unconfined" in error["message"]

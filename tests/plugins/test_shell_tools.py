"""The shell file tools, driven by a scripted model through a real agent turn."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from tests.agents.test_agents import next_event
from tests.conftest import write_settings


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"text": "", "toolCalls": [{"name": name, "arguments": arguments}]}


def script_settings(script: list[Any]) -> dict[str, Any]:
    return {
        "providers": [
            {"id": "s", "type": "scripted", "model": "script", "options": {"responses": script}}
        ],
        "plugins": [{"instanceId": "shell", "pluginId": "shell"}],
    }


async def run_script(
    paths: HomePaths,
    script: list[Any],
    *,
    prepare: Callable[[], None] = lambda: None,
    after_post: Callable[[Engine, str], None] = lambda engine, agent_id: None,
) -> list[dict[str, Any]]:
    """One user message to a scripted model with the shell tools: the tool results.

    ``prepare`` runs once the engine has started; ``after_post`` as soon as the
    message is accepted, before the turn can call a tool.
    """
    write_settings(paths, script_settings(script))
    engine = Engine(paths, EngineOptions(port=0))
    events: list[Event] = []
    engine.events.add_listener(events.append)
    await engine.start()
    prepare()
    try:
        posted = await engine.post_inbound(InboundMessage("local", "u", "c", "go"))
        after_post(engine, posted.agent_id)
        await next_event(events, "agent.outgoing")
        page = await engine.agents.histories.page(
            posted.agent_id, after=None, before=None, limit=100
        )
        return [r["output"] for r in page.records if r["type"] == "tool_result"]
    finally:
        await engine.stop()


async def test_read_write_edit_stay_inside_the_granted_folders(paths: HomePaths) -> None:
    workspace = paths.workspace.resolve()
    outside = paths.home / "outside"
    outside.mkdir(parents=True)
    (outside / "secret.txt").write_text("s3cret")
    notes = f"{workspace}/notes.txt"
    script = [
        call("write", path=notes, content="hello world"),
        call("edit", path=notes, edits=[{"search": "world", "replace": "there"}]),
        call("read", path=notes),
        call("read", path=str(outside / "secret.txt")),
        call("read", path=f"{workspace}/link/secret.txt"),
        call("read", path=f"{workspace}/../outside/secret.txt"),
        call("write", path=str(outside / "new.txt"), content="x"),
        call("edit", path=notes, edits=[{"search": "absent", "replace": "x"}]),
        "done",
    ]
    results = await run_script(
        paths, script, prepare=lambda: os.symlink(outside, paths.workspace / "link")
    )
    assert [r["isError"] for r in results] == [False, False, False, True, True, True, True, True]
    assert results[2]["text"] == "hello there"
    for refused in results[3:7]:
        assert "is not granted" in refused["text"] and "s3cret" not in refused["text"]
    assert "was not found" in results[7]["text"]
    assert (paths.workspace / "notes.txt").read_text() == "hello there"
    assert not (outside / "new.txt").exists()


async def test_links_that_resolve_inside_the_grants_still_work(paths: HomePaths) -> None:
    workspace = paths.workspace.resolve()
    via_link = f"{workspace}/alias/new/x.txt"  # alias -> data; new does not exist yet
    script = [
        call("write", path=via_link, content="one"),
        call("edit", path=via_link, edits=[{"search": "one", "replace": "two"}]),
        call("read", path=via_link),
        call("read", path=f"{workspace}/pipe"),
        "done",
    ]

    def prepare() -> None:
        (workspace / "data").mkdir()
        os.symlink(workspace / "data", workspace / "alias")
        os.mkfifo(workspace / "pipe")  # opening it for reading would wait for a writer

    results = await run_script(paths, script, prepare=prepare)
    assert [r["isError"] for r in results] == [False, False, False, True]
    assert results[0]["text"] == f"wrote 3 bytes to {workspace}/data/new/x.txt"
    assert results[2]["text"] == "two"
    assert "not a regular file" in results[3]["text"]
    assert (workspace / "data" / "new" / "x.txt").read_text() == "two"


async def test_the_engines_files_are_refused_even_to_an_agent_granted_the_whole_home(
    paths: HomePaths,
) -> None:
    home = paths.home.resolve()
    paths.home.mkdir(parents=True, exist_ok=True)
    paths.auth.write_text('{"x": {"type": "apiKey", "apiKey": "cb_canary_key"}}')
    script = [
        call("read", path=str(home / "auth.json")),
        call("write", path=str(home / "settings.json"), content="{}"),
        call("read", path=str(home / "agents" / "index.jsonl")),
        call("write", path=str(home / "permissions" / "requests.jsonl"), content="forged"),
        call("write", path=str(home / "workspace" / "fine.txt"), content="ok"),
        "done",
    ]

    def grant_the_home(engine: Engine, agent_id: str) -> None:
        # A user who granted the home itself, on purpose or by mistake.
        agent = engine.agents.residency.loaded[agent_id]
        agent.state.permissions = agent.state.permissions.model_copy(
            update={"readDirs": [str(home)], "writeDirs": [str(home)]}
        )

    results = await run_script(paths, script, after_post=grant_the_home)
    assert [r["isError"] for r in results] == [True, True, True, True, False]
    for refused in results[:4]:
        assert "belongs to the engine" in refused["text"]
    assert "cb_canary_key" not in str(results)
    assert "shell" in paths.settings.read_text()
    assert (paths.workspace / "fine.txt").read_text() == "ok"

"""``claybot chat`` in a real terminal (a pty driven by pexpect) against a real engine,
whose model is a fake OpenAI server on loopback that streams word by word."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from claybot.config.home import HomePaths
from tests.cli.init_run import default_interrupt
from tests.conftest import EngineProcess, write_settings
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import LoopbackServer
from tests.providers.test_request_bodies import PNG

pytestmark = pytest.mark.slow

WAIT_S = 30
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
STYLE = r"(?:\x1b\[[0-9;]*m)*"  # rich's colour codes between the words on screen
DIM = "\x1b[2m"


def reply(text: str) -> str:
    """What a reply starting with ``text`` looks like on the screen."""
    return f"agent>{STYLE} {re.escape(text)}"


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    vendor = FakeOpenAI()
    with LoopbackServer(vendor):
        yield vendor


@pytest.fixture
def engine(paths: HomePaths, fake_openai: FakeOpenAI) -> Iterator[EngineProcess]:
    """An engine whose first provider always fails and whose second is the fake."""
    write_settings(
        paths,
        {
            "providers": [
                {"id": "broken", "type": "scripted", "model": "fail"},
                {
                    "id": "openai",
                    "model": "gpt-fake",
                    "options": {"baseUrl": fake_openai.api_base, "maxRetries": 0},
                },
            ]
        },
    )
    process = EngineProcess(paths)
    process.start()
    yield process
    if process.process is not None and process.process.poll() is None:
        process.kill()


@pytest.fixture
def chat(engine: EngineProcess) -> Iterator[pexpect.spawn]:
    env = {
        **os.environ,
        "CLAYBOT_HOME": str(engine.paths.home),
        "TERM": "xterm-256color",
        # No cursor-position requests: pexpect is not a terminal that answers them.
        "PROMPT_TOOLKIT_NO_CPR": "1",
    }
    child = pexpect.spawn(
        sys.executable,
        ["-m", "claybot", "chat", "--user", "ann"],
        env=env,
        preexec_fn=default_interrupt,
        encoding="utf-8",
        dimensions=(50, 250),
        timeout=WAIT_S,
    )
    child.expect_exact("you> ")
    yield child
    if child.isalive():
        child.terminate(force=True)
    child.close()


def history(engine: EngineProcess) -> list[dict[str, Any]]:
    with engine.client() as client:
        [agent] = client.get("/v1/engine/agents").json()["agents"]
        page = client.get(f"/v1/engine/agents/{agent['agentId']}/history").json()
    records: list[dict[str, Any]] = page["records"]
    return records


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_a_reply_streams_before_its_turn_ends_after_a_dim_fallback_line(
    chat: pexpect.spawn, engine: EngineProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.reply_text("alpha beta gamma delta epsilon")
    # Frames: the role, "alpha", " beta"; then the fake holds the rest back.
    fake_openai.hold_stream_after(3)
    chat.send("hello\r")
    chat.expect_exact(
        DIM + "provider broken failed (the scripted 'fail' model always fails); trying openai"
    )
    chat.expect(reply("alpha beta"))
    # The model has not finished: the turn has no answer in history yet.
    assert not [r for r in history(engine) if r["type"] == "assistant_message"]
    fake_openai.release_stream()
    chat.expect_exact(" gamma delta epsilon")
    chat.expect_exact("you> ")
    [answer] = [r for r in history(engine) if r["type"] == "assistant_message"]
    assert answer["text"] == "alpha beta gamma delta epsilon"
    chat.sendcontrol("d")  # leaves cleanly
    chat.expect(pexpect.EOF)


def test_a_20_kb_paste_arrives_whole(
    chat: pexpect.spawn, engine: EngineProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.reply_text("got it")
    lines = [f"line {n}: " + "x" * 90 for n in range(200)]
    pasted = "\n".join([*lines, "What is the last line number?"])
    assert len(pasted) > 20_000
    chat.send(PASTE_START + pasted + PASTE_END)
    chat.send("\r")
    chat.expect(reply("got it"))
    [sent] = [r for r in history(engine) if r["type"] == "user_message"]
    assert sent["text"] == pasted
    assert fake_openai.last_body["messages"][-1]["content"] == pasted


def test_a_paste_beyond_the_message_limit_is_refused_with_a_reason(
    chat: pexpect.spawn, engine: EngineProcess
) -> None:
    chat.send(PASTE_START + "y" * 70_000 + PASTE_END)
    chat.send("\r")
    chat.expect(r"error:.*(65536|64 KiB|too long|too large)")
    chat.expect_exact("you> ")
    with engine.client() as client:
        assert client.get("/v1/engine/agents").json()["agents"] == []


def test_reset_and_stop_are_answered_by_chat_itself(
    chat: pexpect.spawn, engine: EngineProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.reply_text("once upon a time there was a fox")
    fake_openai.hold_stream_after(3)
    chat.send("tell me a story\r")
    chat.expect(reply("once upon"))
    chat.sendcontrol("c")  # stop waiting: the prompt comes back while the turn runs
    chat.expect_exact("not waiting")
    chat.expect_exact("you> ")
    chat.send("/stop\r")
    chat.expect_exact("stopped")
    fake_openai.release_stream()
    wait_for(lambda: any(r.get("final") for r in history(engine)), "the stopped turn's end")
    chat.send("/reset\r")
    chat.expect_exact("context cleared")
    records = history(engine)
    assert records[-1]["type"] == "reset"
    # Neither command reached the model, nor the agent's history as a message.
    assert len(fake_openai.requests) == 1
    assert [r["text"] for r in records if r["type"] == "user_message"] == ["tell me a story"]


def test_a_tool_call_shows_as_a_summary_line_and_in_full_on_request(
    chat: pexpect.spawn, fake_openai: FakeOpenAI
) -> None:
    fake_openai.reply_tool_calls(("call_1", "no_such_tool", {"path": "notes.md"}))
    fake_openai.reply_text("all done")
    chat.send("look it up\r")
    chat.expect_exact('tool 1: no_such_tool {"path":"notes.md"}')
    chat.expect(f"tool 1 {STYLE}failed{STYLE}: Unknown tool 'no_such_tool'")
    chat.expect(reply("all done"))
    chat.expect_exact("you> ")
    chat.send("/tool 1\r")
    chat.expect_exact('"path": "notes.md"')
    chat.expect_exact("Unknown tool 'no_such_tool'.")


def test_attach_shows_in_the_prompt_and_the_image_reaches_the_model(
    chat: pexpect.spawn, engine: EngineProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    picture = tmp_path / "map.png"
    picture.write_bytes(PNG)
    chat.send("/help\r")
    chat.expect_exact("/attach PATH")
    chat.expect_exact("you> ")
    chat.send(f"/attach {picture}\r")
    chat.expect_exact("it goes with your next message")
    chat.expect_exact("you [+1 file]> ")
    fake_openai.reply_text("A map.")
    chat.send("what is this?\r")
    chat.expect(reply("A map."))
    chat.expect_exact("you> ")  # sent: nothing waits any more
    [sent] = [r for r in history(engine) if r["type"] == "user_message"]
    assert [f["name"] for f in sent["files"]] == ["map.png"]
    text, image = fake_openai.last_body["messages"][-1]["content"]
    assert text["text"].startswith("what is this?")
    assert image["image_url"]["url"].startswith("data:image/png;base64,")

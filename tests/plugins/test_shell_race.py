"""The shell file tools against a folder swapped for a link while they run.

A scripted model writes, reads and edits ``workspace/race/real/f.txt`` hundreds of
times while a thread keeps exchanging ``real`` with a symbolic link to a folder
outside the grants (what another agent's ``exec`` can do in the shared workspace).
Checking a path and then opening it is a race; the tools must never follow the link.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Any

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from tests.agents.test_agents import next_event
from tests.conftest import write_settings

AT_FDCWD = -100
RENAME_EXCHANGE = 2
ROUNDS = 30  # model responses; each makes CALLS_PER_ROUND tool calls
CALLS_PER_ROUND = 20
OUTSIDE = {"r.txt": b"OUTSIDE-SECRET\n", "e.txt": b"OUTSIDE line\n"}

_libc = ctypes.CDLL(None, use_errno=True)


def exchange(first: Path, second: Path) -> None:
    """Swap two names in one step (renameat2 RENAME_EXCHANGE), so ``real`` always exists."""
    if _libc.renameat2(AT_FDCWD, bytes(first), AT_FDCWD, bytes(second), RENAME_EXCHANGE) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error), str(first))


class Swapper:
    """A thread that keeps exchanging a folder with a link until stopped."""

    def __init__(self, real: Path, link: Path) -> None:
        self.swaps = 0
        self._real = real
        self._link = link
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            exchange(self._real, self._link)
            self.swaps += 1

    def __enter__(self) -> Swapper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self._real.is_symlink():  # leave the folder in place
            exchange(self._real, self._link)


def race_script(real: Path) -> list[Any]:
    # Each write makes a file of its own and each tool has its own file, so every
    # escape leaves its own trace outside.
    rounds: list[Any] = []
    for round_number in range(ROUNDS):
        batch: list[dict[str, Any]] = []
        for n in range(CALLS_PER_ROUND // 4):
            name = f"{real}/w{round_number}-{n}.txt"
            batch += [
                {"name": "write", "arguments": {"path": name, "content": "line\n"}},
                {"name": "read", "arguments": {"path": f"{real}/r.txt"}},
                {"name": "write", "arguments": {"path": name, "content": "+", "append": True}},
                {
                    "name": "edit",
                    "arguments": {
                        "path": f"{real}/e.txt",
                        "edits": [{"search": "line", "replace": "line+"}],
                    },
                },
            ]
        rounds.append({"text": "", "toolCalls": batch})
    return [*rounds, "done"]


async def test_a_folder_swapped_for_a_link_is_never_followed(paths: HomePaths) -> None:
    workspace = paths.workspace.resolve()
    outside = paths.home.resolve() / "outside"
    outside.mkdir(parents=True)
    for name, content in OUTSIDE.items():
        (outside / name).write_bytes(content)
    real = workspace / "race" / "real"
    write_settings(
        paths,
        {
            "providers": [
                {
                    "id": "s",
                    "type": "scripted",
                    "model": "script",
                    "options": {"responses": race_script(real)},
                }
            ],
            "plugins": [{"instanceId": "shell", "pluginId": "shell"}],
            "agents": {"maxToolIterations": ROUNDS + 1},
        },
    )
    engine = Engine(paths, EngineOptions(port=0))
    events: list[Event] = []
    engine.events.add_listener(events.append)
    await engine.start()
    real.mkdir(parents=True)
    (real / "r.txt").write_text("inside\n")
    (real / "e.txt").write_text("line\n")
    link = real.parent / "link"
    os.symlink(outside, link)
    try:
        with Swapper(real, link) as swapper:
            posted = await engine.post_inbound(InboundMessage("local", "u", "c", "go"))
            await next_event(events, "agent.outgoing", timeout_s=60)
        page = await engine.agents.histories.page(
            posted.agent_id, after=None, before=None, limit=1000
        )
        results = [r["output"] for r in page.records if r["type"] == "tool_result"]
    finally:
        await engine.stop()
    assert len(results) == ROUNDS * CALLS_PER_ROUND
    assert swapper.swaps > 0
    # Nothing outside was written, created or read.
    assert {name: (outside / name).read_bytes() for name in os.listdir(outside)} == OUTSIDE
    assert not any("OUTSIDE-SECRET" in result["text"] for result in results)
    # What was refused was refused for the link, with a message saying so.
    for result in results:
        if result["isError"]:
            reasons = ("is not granted", "symbolic link", "changed while it was resolved")
            assert any(reason in result["text"] for reason in reasons), result

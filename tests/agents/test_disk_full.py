"""A full disk: nothing acknowledged is lost, nothing unacknowledged is kept, the API says so.

Two ways to fill a disk. Everywhere: fault injection at the write call, which
refuses chosen files with ENOSPC after writing half of what it was given (so a
torn line is left where a real disk would leave one). As root: a real tmpfs of a
few megabytes as the engine's home, filled and freed, with the engine a real
process that is SIGKILLed afterwards.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claybot.config.home import HomePaths
from claybot.durable import atomic, group_commit
from claybot.durable.jsonl import parse_jsonl
from claybot.kernel.events import Event
from tests.agents.test_agents import next_event
from tests.agents.test_subagents import rules_settings
from tests.conftest import EngineProcess, running_engine, write_settings


class FullDisk:
    """``write_all`` that refuses the files ``refused`` picks while the disk is "full"."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.refused: Callable[[str, bytes], bool] | None = None
        self.error = errno.ENOSPC
        self.failures = 0
        real = atomic.write_all

        def write_all(fd: int, data: bytes) -> None:
            refused = self.refused
            if refused is not None and refused(os.readlink(f"/proc/self/fd/{fd}"), data):
                self.failures += 1
                os.write(fd, data[: len(data) // 2])  # what a disk that fills up mid-write does
                raise OSError(self.error, os.strerror(self.error))
            real(fd, data)

        monkeypatch.setattr(atomic, "write_all", write_all)
        monkeypatch.setattr(group_commit, "write_all", write_all)

    def fill(
        self,
        refused: Callable[[str, bytes], bool] = lambda path, data: True,
        error: int = errno.ENOSPC,
    ) -> None:
        """Refuse what ``refused`` picks with ``error`` (another than a full disk's: a
        write refused the same way however often it is tried)."""
        self.refused = refused
        self.error = error

    def free(self) -> None:
        self.refused = None


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> FullDisk:
    return FullDisk(monkeypatch)


def carries_reply(wal_chunk: bytes) -> bool:
    """Whether the log is given the redo record of a final reply (history appends are
    journaled in the log: the reply is already in history.jsonl when this is written)."""
    for line in wal_chunk.splitlines():
        record = json.loads(line)
        if record.get("op") == "redo" and b'"final":true' in base64.b64decode(record["data"]):
            return True
    return False


def finals(events: list[Event], message_id: str) -> list[dict[str, Any]]:
    return [
        event.payload["message"]
        for event in events
        if event.type == "agent.outgoing"
        and event.payload["message"]["inReplyTo"] == message_id
        and event.payload["message"]["final"]
    ]


async def test_a_reply_written_while_the_log_is_refused_is_delivered_once_space_returns(
    paths: HomePaths, disk: FullDisk
) -> None:
    """Item 6: the history append succeeds, the write-ahead log's does not."""
    write_settings(paths, rules_settings([{"match": "", "response": "pong"}], delayS=0.3))
    async with running_engine(paths) as (_, api, events):
        body = {"userId": "ann", "channelId": "c", "text": "ping", "messageId": "m1"}
        accepted = await api.post("/v1/engine/messages", json=body)
        assert accepted.status_code == 202
        # While the model thinks, the log (and only the log) stops taking writes,
        # as soon as it is handed the journal of the reply appended to history.
        disk.fill(lambda path, data: path.endswith("inbox.wal") and carries_reply(data))
        async with asyncio.timeout(10):
            while not disk.failures:
                await asyncio.sleep(0.005)
        assert finals(events, "m1") == []  # not delivered: it is not durable
        disk.free()
        await next_event(events, "agent.outgoing", timeout_s=30)
        agent_id = accepted.json()["agentId"]
        history = (await api.get(f"/v1/engine/agents/{agent_id}/history")).json()["records"]
    assert [m["text"] for m in finals(events, "m1")] == ["pong"]
    kinds = [(r["type"], r.get("final")) for r in history if r.get("messageId") == "m1"]
    assert kinds == [("user_message", None), ("assistant_message", True)]


async def test_a_full_disk_answers_507_accepts_nothing_and_recovers_by_itself(
    paths: HomePaths, disk: FullDisk
) -> None:
    """Items 7 and 8: a refused append leaves no torn line, the API says what to do."""
    write_settings(paths, rules_settings([{"match": "", "response": "pong"}]))
    async with running_engine(paths) as (engine, api, events):
        first = await api.post(
            "/v1/engine/messages", json={"userId": "ann", "channelId": "c", "text": "hi"}
        )
        agent_id = first.json()["agentId"]
        await next_event(events, "agent.outgoing")
        disk.fill()
        refused = [
            await api.post(
                "/v1/engine/messages",
                json={"userId": "ann", "channelId": "c", "text": "lost", "messageId": "m2"},
            ),
            await api.post(
                "/v1/engine/messages", json={"userId": "bob", "channelId": "c", "text": "new user"}
            ),
            await api.post("/v1/engine/auth", json={"id": "x", "key": "apiKey", "value": "v"}),
            await api.post(f"/v1/engine/agents/{agent_id}/reset"),
        ]
        disk.free()
        # The same message id was never accepted, so a retry is a new message, not a duplicate.
        retried = await api.post(
            "/v1/engine/messages",
            json={"userId": "ann", "channelId": "c", "text": "found", "messageId": "m2"},
        )
        await next_event(events, "agent.outgoing", count=2)
        agents = (await api.get("/v1/engine/agents")).json()["agents"]
        await engine.writer.settled()
        # Every line of every append-only file is whole: the torn halves were cut back.
        logs = [paths.agents / "inbox.wal", *paths.agents.glob("*/history.jsonl")]
        contents = {path: path.read_bytes() for path in logs}
    for response in refused:
        assert response.status_code == 507, response.text
        assert response.headers["retry-after"] == "5"
        error = response.json()["error"]
        assert error["code"] == "disk_full"
        assert str(paths.home) in error["message"] and "free some space" in error["message"]
    assert retried.status_code == 202 and retried.json()["duplicate"] is False
    assert [m["text"] for m in finals(events, "m2")] == ["pong"]
    assert [a["descriptor"]["userId"] for a in agents] == ["ann"]  # bob's agent was undone
    assert len(list(paths.agents.glob("*/"))) == 1
    for path, data in contents.items():
        _, good_end, bad_lines = parse_jsonl(data)
        assert (good_end, bad_lines) == (len(data), []), path
    assert b'"found"' in contents[paths.agents / "inbox.wal"]
    assert disk.failures > 0
    assert not paths.auth.exists() or "x" not in json.loads(paths.auth.read_text())


# -- a real full disk (root only) ------------------------------------------------------


@pytest.fixture
def tmpfs_home(paths: HomePaths) -> Iterator[HomePaths]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the fault-injection tests above cover the rest")
    paths.home.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m,mode=0700", "tmpfs", str(paths.home)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield paths
    finally:
        subprocess.run(["umount", "-l", str(paths.home)], check=False)


def fill(folder: Path) -> list[Path]:
    """Fill the file system with files of shrinking size until not one byte fits."""
    made: list[Path] = []
    for size in (256 * 1024, 16 * 1024, 1024, 64, 1):
        while True:
            path = folder / f"filler-{len(made)}"
            try:
                with path.open("wb") as handle:
                    handle.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                path.unlink(missing_ok=True)
                break
            made.append(path)
    return made


class EventLog:
    """The engine's SSE stream, read in a thread for as long as the engine lives."""

    def __init__(self, engine: EngineProcess) -> None:
        self.events: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._read, args=(engine,), daemon=True)
        self._thread.start()

    def _read(self, engine: EngineProcess) -> None:
        try:
            with (
                engine.client(timeout_s=300) as client,
                client.stream("GET", "/v1/engine/events", params={"since": 0}) as stream,
            ):
                for line in stream.iter_lines():
                    if line.startswith("data: "):
                        self.events.append(json.loads(line[6:]))
        except (httpx.HTTPError, OSError):
            return  # the engine was killed

    def replies(self) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for event in list(self.events):
            if event["type"] == "agent.outgoing" and event["payload"]["message"]["final"]:
                message = event["payload"]["message"]
                found.setdefault(message["inReplyTo"], set()).add(message["text"])
        return found

    def wait(self, predicate: Callable[[], bool], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError("the event did not come")
            time.sleep(0.02)


@pytest.mark.slow
def test_on_a_real_full_disk_every_acknowledged_message_is_answered_once(
    tmpfs_home: HomePaths,
) -> None:
    paths = tmpfs_home
    write_settings(paths, rules_settings([{"match": "", "response": "pong"}]))
    engine = EngineProcess(paths)
    engine.start()
    acknowledged: list[str] = []
    statuses: dict[int, int] = {}
    try:
        log = EventLog(engine)
        with engine.client() as client:  # one keep-alive connection for every request
            for user in ("ann", "bob", "cid"):  # their agents exist before the disk fills
                body = {"userId": user, "channelId": "c", "text": "hi", "messageId": f"{user}-0"}
                assert client.post("/v1/engine/messages", json=body).status_code == 202
                acknowledged.append(f"{user}-0")
            log.wait(lambda: len(log.replies()) == 3)
            fillers = fill(paths.home)
            for round_ in range(1, 6):
                # A page of room: some posts fit, and turns run out of space halfway.
                fillers.pop().unlink()
                for user in ("ann", "bob", "cid"):
                    for n in range(8):
                        message_id = f"{user}-{round_}-{n}"
                        body = {"userId": user, "channelId": "c", "text": message_id}
                        response = client.post(
                            "/v1/engine/messages", json={**body, "messageId": message_id}
                        )
                        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                        if response.status_code == 202:
                            acknowledged.append(message_id)
                        else:
                            assert response.status_code == 507, response.text
                            assert response.json()["error"]["code"] == "disk_full"
                time.sleep(0.2)  # let turns run into the full disk
                fill(paths.home)  # and fill what they left
            assert statuses.get(507), statuses  # the disk really was full
            for path in paths.home.glob("filler-*"):
                path.unlink()
            log.wait(lambda: set(acknowledged) <= log.replies().keys(), timeout_s=120)
            # A message posted now is durable only after every earlier record: then a
            # SIGKILL finds all the turns above finished on disk.
            barrier = {"userId": "ann", "channelId": "c", "text": "barrier", "messageId": "bar"}
            assert client.post("/v1/engine/messages", json=barrier).status_code == 202
        replies_before = log.replies()
        engine.kill()
        engine.start()
        after = EventLog(engine)
        with engine.client() as client:
            deadline = time.monotonic() + 60
            while client.get("/v1/engine/status").json()["agents"]["pendingItems"]:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            agents = client.get("/v1/engine/agents").json()["agents"]
            histories = {
                a["agentId"]: client.get(
                    f"/v1/engine/agents/{a['agentId']}/history", params={"limit": 1000}
                ).json()["records"]
                for a in agents
            }
    finally:
        if engine.process is not None and engine.process.poll() is None:
            engine.terminate()
    assert {m: len(texts) for m, texts in replies_before.items() if len(texts) != 1} == {}
    assert len(agents) == 3
    user_messages = [
        r["messageId"] for records in histories.values() for r in records
        if r["type"] == "user_message"
    ]  # fmt: skip
    finished = [
        r["messageId"] for records in histories.values() for r in records
        if r["type"] == "assistant_message" and r.get("final")
    ]  # fmt: skip
    expected = sorted([*acknowledged, "bar"])
    assert sorted(user_messages) == expected  # each once, and nothing that got a 507
    assert sorted(finished) == expected
    # The restart sent nothing again that was delivered before it.
    resent = [
        e for e in after.events
        if e["type"] == "agent.outgoing" and e["payload"]["message"]["inReplyTo"] != "bar"
    ]  # fmt: skip
    assert resent == []
    assert shutil.disk_usage(paths.home).free > 0

"""Process groups: a timeout or a cancellation stops the child and what it started."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from claybot.kernel.processes import ProcessGroup, drain, start_group

# The child starts a grandchild in its group, notes its pid, and ignores SIGTERM if told.
CHILD = """
import signal, subprocess, sys, time
if sys.argv[2] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen(["sleep", "60"])
open(sys.argv[1], "w").write(str(grandchild.pid))
print("started", flush=True)
time.sleep(60)
"""


def gone(pid: int) -> bool:
    """Ended: no such process, or a zombie nobody has reaped yet (it runs no more)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    # Reaped before the open, or between the open and the read (ESRCH).
    except (FileNotFoundError, ProcessLookupError):
        return True


async def until_gone(*pids: int) -> None:
    async with asyncio.timeout(5):
        while not all(gone(pid) for pid in pids):
            await asyncio.sleep(0.01)


async def start_child(tmp_path: Path, mode: str) -> tuple[asyncio.subprocess.Process, int]:
    pid_file = tmp_path / "grandchild.pid"
    process = await start_group(
        [sys.executable, "-c", CHILD, str(pid_file), mode], cwd=tmp_path, env=dict(os.environ)
    )
    assert process.stdout is not None
    assert await process.stdout.readline() == b"started\n"
    return process, int(pid_file.read_text())


async def test_a_child_that_ends_in_time_is_left_alone(tmp_path: Path) -> None:
    process = await start_group(["true"], cwd=tmp_path, env=dict(os.environ))
    group = ProcessGroup(process.pid, exited=process.wait, kill_grace_s=1.0)
    assert await group.wait(5.0) is False
    assert process.returncode == 0


@pytest.mark.parametrize("mode", ["polite", "stubborn"])
async def test_past_its_timeout_the_whole_group_is_stopped(tmp_path: Path, mode: str) -> None:
    process, grandchild = await start_child(tmp_path, mode)
    told: list[str] = []
    group = ProcessGroup(
        process.pid,
        exited=process.wait,
        kill_grace_s=0.2,
        on_sigkill=lambda: told.append("sigkill"),
    )
    assert await group.wait(0.1, on_timeout=lambda: told.append("timeout")) is True
    assert process.returncode == (-15 if mode == "polite" else -9)
    assert told == (["timeout"] if mode == "polite" else ["timeout", "sigkill"])
    await until_gone(grandchild)


async def test_a_cancelled_wait_stops_the_group_before_it_gives_way(tmp_path: Path) -> None:
    process, grandchild = await start_child(tmp_path, "polite")
    group = ProcessGroup(process.pid, exited=process.wait, kill_grace_s=1.0)
    waiting = asyncio.create_task(group.wait(60.0))
    await asyncio.sleep(0)  # let it start waiting
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert process.returncode == -15  # already ended when the cancellation came through
    await until_gone(grandchild)


async def test_drain_kills_a_leftover_holding_the_pipe_when_asked(tmp_path: Path) -> None:
    # The shell ends at once; its background sleep keeps stdout open.
    process = await start_group(["sh", "-c", "sleep 60 & echo $!"], cwd=tmp_path, env={})
    assert process.stdout is not None
    stdout = process.stdout
    leftover = int((await stdout.readline()).decode())
    await until_gone(process.pid)  # not process.wait(): on 3.11 it waits for the pipe too
    group = ProcessGroup(process.pid, exited=process.wait, kill_grace_s=1.0)
    reader = asyncio.create_task(stdout.read())
    errors = await drain([reader], 0.1, kill_stragglers=group)
    assert errors == []
    assert reader.done() and not reader.cancelled()  # the pipe closed once the group died
    await until_gone(leftover)


async def test_drain_cancels_a_reader_still_waiting_and_reports_reader_errors() -> None:
    async def stuck() -> None:
        await asyncio.Event().wait()

    async def broken() -> None:
        raise OSError("read failed")

    stuck_reader = asyncio.create_task(stuck())
    errors = await drain([stuck_reader, asyncio.create_task(broken())], 0.05)
    assert stuck_reader.cancelled()
    assert [str(error) for error in errors] == ["read failed"]


async def test_a_cancellation_that_meets_the_childs_end_still_cancels(tmp_path: Path) -> None:
    # Python 3.11's asyncio.wait_for returns the result instead when both happen in one
    # step of the loop: a stopped turn then ran on (a drained job asked its model again).
    process = await start_group(["true"], cwd=tmp_path, env=dict(os.environ))
    await process.wait()
    ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    group = ProcessGroup(process.pid, exited=lambda: ended, kill_grace_s=1.0)
    waiting = asyncio.create_task(group.wait(10.0))
    await asyncio.sleep(0)  # it waits for the child now
    ended.set_result(None)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting

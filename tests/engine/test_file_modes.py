"""Everything the engine keeps in its home is its owner's alone: folders 0700, files 0600."""

from __future__ import annotations

import os
import stat
import time

import pytest

from tests.conftest import EngineProcess

pytestmark = pytest.mark.slow


def loose_modes(root: str) -> list[str]:
    """Every path under ``root`` that its group or others may use, with its mode."""
    found = []
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            if mode & 0o077:
                found.append(f"{oct(mode)} {os.path.relpath(path, root)}")
    return found


def test_a_home_holds_nothing_others_may_read(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    # A home an earlier version made: folders 0755, a log and a database 0644.
    for folder in (paths.agents, paths.workspace, paths.logs):
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o755)
    for file in (paths.logs / "engine.log", paths.database):
        file.write_bytes(b"")
        os.chmod(file, 0o644)
    os.umask(0o022)  # the engine must not count on the umask it is started with
    engine_process.start()
    with engine_process.client() as client:
        posted = client.post(
            "/v1/engine/messages", json={"userId": "ann", "channelId": "c", "text": "hi"}
        ).json()
        deadline = time.monotonic() + 30
        while not any(
            r["type"] == "assistant_message"
            for r in client.get(f"/v1/engine/agents/{posted['agentId']}/history").json()["records"]
        ):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        client.post(
            "/v1/engine/cron/tasks",
            json={"name": "Daily", "schedule": "0 9 * * *", "prompt": "Report."},
        )
    assert engine_process.terminate() == 0
    assert stat.S_IMODE(paths.home.stat().st_mode) == 0o700
    assert (paths.agents / posted["agentId"] / "history.jsonl").exists()
    assert paths.database.exists() and (paths.logs / "engine.log").stat().st_size > 0
    assert loose_modes(str(paths.home)) == []

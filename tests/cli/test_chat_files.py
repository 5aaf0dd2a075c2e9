"""Files in ``claybot chat``: /attach uploads one for the next message, and files a reply
carries are saved under the downloads folder once each, their paths printed. Against a
real engine process (its socket, as chat uses it)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from claybot.cli.chat_conversation import Conversation, default_downloads
from claybot.config.home import HomePaths
from claybot.wire.events import EventFrame
from tests.cli.test_cli import cli
from tests.conftest import EngineProcess
from tests.providers.test_request_bodies import PNG

pytestmark = pytest.mark.slow


def outgoing(outgoing_id: str, files: list[dict[str, Any]]) -> EventFrame:
    message = {"id": outgoing_id, "agentId": "agent-1", "connector": "local", "userId": "ann",
               "channelId": "cli", "text": "here it is", "inReplyTo": "m1", "final": True,
               "files": files}  # fmt: skip
    return EventFrame(id=1, type="agent.outgoing", payload={"message": message}, timestamp=None)


def user_messages(engine: EngineProcess) -> list[dict[str, Any]]:
    with engine.client() as client:
        [agent] = client.get("/v1/engine/agents").json()["agents"]
        page = client.get(f"/v1/engine/agents/{agent['agentId']}/history").json()
    return [record for record in page["records"] if record["type"] == "user_message"]


def test_attach_sends_the_file_with_the_next_message(
    engine_process: EngineProcess, tmp_path: Path
) -> None:
    engine_process.start()
    picture = tmp_path / "map.png"
    picture.write_bytes(PNG)
    piped = f"/attach {picture}\n/attach\nwhat is this?\nand this?\n/attach {tmp_path}/none\n"
    result = cli(engine_process.paths, "chat", "--user", "ann", stdin=piped)
    assert result.returncode == 0, result.stderr
    assert f"attached map.png (image/png, {len(PNG)} B); it goes with your next message" in (
        result.stderr
    )
    assert "attached to your next message: map.png" in result.stderr
    assert f"cannot read '{tmp_path}/none'" in result.stderr
    replies = [line for line in result.stdout.splitlines() if line.startswith("agent>")]
    assert len(replies) == 2  # the /attach lines reached no one
    first, second = user_messages(engine_process)
    assert first["text"] == "what is this?"
    assert [(f["id"], f["name"]) for f in first["files"]] == [
        (hashlib.sha256(PNG).hexdigest(), "map.png")
    ]
    assert second["text"] == "and this?" and second["files"] == []  # sent once


def test_chat_help_mentions_attach(paths: HomePaths) -> None:
    shown = cli(paths, "chat", "--help")
    assert shown.returncode == 0 and "/attach PATH" in shown.stdout and "--save-to" in shown.stdout


def test_a_replys_files_are_saved_once_each_and_their_paths_printed(
    engine_process: EngineProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine_process.start()
    with engine_process.client() as client:
        answer = client.post("/v1/engine/files", files={"file": ("report.txt", b"all fine")})
    stored = answer.json()["file"]
    downloads = tmp_path / "downloads"
    conversation = Conversation(engine_process.paths, "ann", "cli", downloads=downloads)
    conversation.remember("m1")
    conversation.on_event(outgoing("o1", [stored]))
    conversation.on_event(outgoing("o1", [stored]))  # seen again (a reconnect): not saved again
    saved = downloads / "report.txt"
    assert saved.read_bytes() == b"all fine"
    out = capsys.readouterr().out
    assert out.count("saved report.txt to") == 1 and str(saved) in out.replace("\n", "")
    assert conversation.is_answered("m1")

    # The same name again: a new file beside it, the first untouched; an unknown file is
    # reported, not fatal.
    missing = {**stored, "id": "0" * 64, "name": "gone.txt"}
    conversation.on_event(outgoing("o2", [stored, missing]))
    assert (downloads / "report (2).txt").read_bytes() == b"all fine"
    out = capsys.readouterr().out
    assert "could not save gone.txt" in out
    assert sorted(p.name for p in downloads.iterdir()) == ["report (2).txt", "report.txt"]


def test_the_default_downloads_folder(paths: HomePaths, tmp_path: Path) -> None:
    assert default_downloads(paths, tmp_path) == paths.home / "downloads"
    (tmp_path / "Downloads").mkdir()
    assert default_downloads(paths, tmp_path) == tmp_path / "Downloads" / "claybot"

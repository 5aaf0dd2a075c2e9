"""History records as /v1/engine answers them: the original dashboard's fields beside ours."""

from __future__ import annotations

from typing import Any

from claybot.wire.history_view import seed_record

FILE_ID = "a" * 64


def file_path(file_id: str) -> str:
    return f"/store/{file_id}"


def test_a_tool_result_gets_the_message_and_files_the_dashboard_reads() -> None:
    record = {
        "seq": 3,
        "type": "tool_result",
        "at": 1700000000000,
        "messageId": "m1",
        "toolCallId": "call_1",
        "toolName": "list_agents",
        "output": {"text": "a1\tuser", "isError": False},
    }
    seen = seed_record(record, file_path)
    assert seen["output"] == {
        "text": "a1\tuser",
        "isError": False,
        "toolMessage": {
            "role": "toolResult",
            "toolCallId": "call_1",
            "toolName": "list_agents",
            "content": [{"type": "text", "text": "a1\tuser"}],
            "isError": False,
            "timestamp": 1700000000000,
        },
        "files": [],
    }
    assert record["output"] == {"text": "a1\tuser", "isError": False}  # a copy was changed
    assert seed_record(seen, file_path) is seen  # already there: left alone


def test_a_file_without_a_place_gets_the_stores() -> None:
    placed = {"id": FILE_ID, "name": "a.txt", "mimeType": "text/plain", "size": 1, "path": "/x"}
    bare = {"id": FILE_ID, "name": "b.txt", "mimeType": "text/plain", "size": 1}
    record = {"type": "assistant_message", "at": 1, "text": "", "files": [placed, bare]}
    seen = seed_record(record, file_path)
    assert seen["files"] == [placed, {**bare, "path": f"/store/{FILE_ID}"}]
    assert "path" not in bare


def test_a_file_that_could_not_be_placed_names_no_place() -> None:
    unplaced = {"id": FILE_ID, "name": "c.txt", "mimeType": "text/plain", "size": 1,
                "problem": "it could not be saved for you"}  # fmt: skip
    record = {"type": "user_message", "at": 1, "text": "", "files": [unplaced]}
    assert seed_record(record, file_path)["files"] == [{**unplaced, "path": ""}]


def test_records_that_need_nothing_are_answered_as_read() -> None:
    records: list[dict[str, Any]] = [
        {"type": "user_message", "at": 1, "text": "hi", "files": []},
        {"type": "start", "at": 1},
        {"type": "damaged", "line": 3, "raw": "{", "error": "bad"},
        {"type": "tool_result", "at": 1, "output": "not an object"},
        {"no": "type"},
    ]
    for record in records:
        assert seed_record(record, file_path) is record

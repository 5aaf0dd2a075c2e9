"""History records as ``GET /v1/engine/agents/{id}/history`` answers them: the records of
``history.jsonl`` with the fields the original ClayBot dashboard reads added beside ours.

That dashboard (its agent page) reads two things the records here do not hold:

- a tool result's ``output.toolMessage`` (the tool result message it shows as JSON, and
  whose ``role``, ``name``, ``status`` and ``type`` it lists) and ``output.files`` (whose
  ``length`` it counts: without it the page throws);
- each file reference's ``path``, where its bytes are (shown, and the key of its row;
  empty for a file that could not be placed for the agent: it has no place).

They are derived here, as the records are answered, rather than written to the file:
``toolMessage`` would hold the tool's text twice in every record, and a file's place
is the store's, not the history's. A record that needs nothing is answered as it was
read; one that does is copied first (the store may hand out records it keeps).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

Record = dict[str, Any]
FilePath = Callable[[str], str]  # a file id -> where the store keeps its bytes

TOOL_RESULT_ROLE = "toolResult"  # the role of a tool result message in the original


def seed_record(record: Record, file_path: FilePath) -> Record:
    """``record`` with the original dashboard's fields added (see the module's doc)."""
    kind = record.get("type")
    if kind == "tool_result":
        output = record.get("output")
        if isinstance(output, dict) and "toolMessage" not in output:
            return {**record, "output": _tool_output(record, output)}
        return record
    if kind in ("user_message", "assistant_message"):
        files = record.get("files")
        if isinstance(files, list) and any(_lacks_path(file) for file in files):
            placed = [_with_path(file, file_path) for file in files]
            return {**record, "files": placed}
    return record


def seed_records(records: list[Record], file_path: FilePath) -> list[Record]:
    return [seed_record(record, file_path) for record in records]


async def seed_chunks(
    chunks: AsyncIterator[list[Record]], file_path: FilePath
) -> AsyncIterator[list[Record]]:
    async for records in chunks:
        yield seed_records(records, file_path)


def _tool_output(record: Record, output: dict[str, Any]) -> dict[str, Any]:
    text = output.get("text")
    message = {
        "role": TOOL_RESULT_ROLE,
        "toolCallId": record.get("toolCallId"),
        "toolName": record.get("toolName"),
        "content": [{"type": "text", "text": text if isinstance(text, str) else ""}],
        "isError": output.get("isError") is True,
        "timestamp": record.get("at"),
    }
    # No tool of this engine returns files with its result (send_file writes a message).
    return {**output, "toolMessage": message, "files": []}


def _lacks_path(file: Any) -> bool:
    return isinstance(file, dict) and isinstance(file.get("id"), str) and "path" not in file


def _with_path(file: Any, file_path: FilePath) -> Any:
    if not _lacks_path(file):
        return file
    if "problem" in file:  # it could not be placed for the agent: it has no place to show
        return {**file, "path": ""}
    return {**file, "path": file_path(file["id"])}

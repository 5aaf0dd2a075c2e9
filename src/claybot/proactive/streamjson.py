"""Text from the Claude CLI's ``--output-format stream-json`` lines (pure: no I/O).

Seed 004 reads three line types: ``assistant`` (``message.content[].text``),
``content_block_delta`` (``delta.text``) and ``result`` (``result``). Anything
else, and anything that is not JSON, gives no text: one garbage line never ends
a run. The ``result`` line repeats the last assistant message; that repeat is
left out so the clean log says the answer once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# A line longer than this (no newline in sight) is handled in pieces so memory stays bounded.
MAX_LINE_BYTES = 1024 * 1024


@dataclass
class ResultLine:
    text: str | None
    is_error: bool
    subtype: str | None


def parse_line(line: str | bytes) -> dict[str, Any] | None:
    """One line of the CLI's stream as a JSON object (None if it is none). A dict is
    right here: the object is whatever the Claude CLI printed, read field by field."""
    try:
        value = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def assistant_text(message: Any) -> str:
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if not isinstance(content, list):
        return ""
    return "".join(
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


@dataclass
class StreamJsonParser:
    """Turns lines into clean text pieces; remembers the final ``result`` line."""

    result: ResultLine | None = None
    _last_assistant: str = ""
    _started: bool = False
    lines: int = 0
    garbage_lines: int = 0

    def feed(self, line: str | bytes) -> str:
        """The text a line adds (possibly empty)."""
        if not line.strip():
            return ""
        self.lines += 1
        value = parse_line(line)
        if value is None:
            self.garbage_lines += 1
            return ""
        return self._strip_leading(self._text_of(value))

    def _text_of(self, value: dict[str, Any]) -> str:
        kind = value.get("type")
        if kind == "assistant":
            text = assistant_text(value.get("message"))
            if not text:
                return ""
            self._last_assistant = text
            return text + "\n"
        if kind == "content_block_delta":
            delta = value.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("text"), str):
                return str(delta["text"])
            return ""
        if kind == "result":
            raw = value.get("result")
            subtype = value.get("subtype")
            result = raw if isinstance(raw, str) else None
            self.result = ResultLine(
                result, value.get("is_error") is True, subtype if isinstance(subtype, str) else None
            )
            if not result or result == self._last_assistant:
                return ""
            return "\n" + result + "\n"
        return ""

    def _strip_leading(self, text: str) -> str:
        if not self._started:
            text = text.lstrip("\n")
            self._started = bool(text)
        return text


@dataclass
class LineSplitter:
    """Splits a byte stream into lines, keeping the incomplete tail for the next chunk."""

    _tail: bytearray = field(default_factory=bytearray)

    def feed(self, chunk: bytes) -> list[bytes]:
        self._tail.extend(chunk)
        lines: list[bytes] = []
        while True:
            newline = self._tail.find(b"\n")
            if newline < 0:
                break
            lines.append(bytes(self._tail[: newline + 1]))
            del self._tail[: newline + 1]
        if len(self._tail) > MAX_LINE_BYTES:
            lines.append(bytes(self._tail))
            self._tail.clear()
        return lines

    def finish(self) -> list[bytes]:
        rest = bytes(self._tail)
        self._tail.clear()
        return [rest] if rest else []

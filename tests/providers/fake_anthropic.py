"""A fake Anthropic server: ``POST /v1/messages`` with the real JSON shapes."""

from __future__ import annotations

from typing import Any

from tests.providers.loopback import ScriptedVendor

USAGE = {
    "input_tokens": 20,
    "output_tokens": 7,
    "cache_read_input_tokens": 3,
    "cache_creation_input_tokens": 1,
}


class FakeAnthropic(ScriptedVendor):
    path = "/v1/messages"

    @property
    def api_base(self) -> str:
        """What goes in ``options.baseUrl`` (the SDK adds ``/v1`` itself)."""
        return self.base_url

    def reply_text(self, text: str) -> None:
        self.reply_blocks({"type": "text", "text": text})

    def reply_tool_use(self, call_id: str, name: str, arguments: dict[str, Any], text: str) -> None:
        self.reply_blocks(
            {"type": "text", "text": text},
            {"type": "tool_use", "id": call_id, "name": name, "input": arguments},
            stop_reason="tool_use",
        )

    def reply_blocks(self, *blocks: dict[str, Any], stop_reason: str = "end_turn") -> None:
        body = {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": "claude-fake",
            "content": list(blocks),
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": USAGE,
        }
        self.respond(200, body, None)

    def reply_error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        body = {"type": "error", "error": {"type": kind, "message": message}}
        self.respond(status, body, {"x-should-retry": "false"})

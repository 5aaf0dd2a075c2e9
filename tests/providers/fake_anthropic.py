"""A fake Anthropic server: ``POST /v1/messages`` with the real JSON shapes."""

from __future__ import annotations

import json
from typing import Any

from tests.providers.fake_openai import words
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

    def reply_cut_off(self, text: str) -> None:
        """An answer that stopped at the token limit."""
        self.reply_blocks({"type": "text", "text": text}, stop_reason="max_tokens")

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

    def stream_frames(self, body: dict[str, Any], request: dict[str, Any]) -> list[str]:
        """The message as the Messages API streams it: message_start, each block's
        start, deltas (text a word at a time, tool input JSON in two pieces) and stop,
        message_delta (stop reason, output tokens), message_stop."""

        def event(kind: str, data: dict[str, Any]) -> str:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

        usage = body["usage"]
        start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        frames = [event("message_start", {"message": start})]
        for index, block in enumerate(body["content"]):
            if block["type"] == "text":
                frames.append(
                    event(
                        "content_block_start",
                        {"index": index, "content_block": {"type": "text", "text": ""}},
                    )
                )
                frames += [
                    event(
                        "content_block_delta",
                        {"index": index, "delta": {"type": "text_delta", "text": word}},
                    )
                    for word in words(block["text"])
                ]
            else:
                opened = {**block, "input": {}}
                frames.append(
                    event("content_block_start", {"index": index, "content_block": opened})
                )
                raw = json.dumps(block["input"])
                for piece in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
                    delta = {"type": "input_json_delta", "partial_json": piece}
                    frames.append(event("content_block_delta", {"index": index, "delta": delta}))
            frames.append(event("content_block_stop", {"index": index}))
        end = {"stop_reason": body["stop_reason"], "stop_sequence": None}
        frames.append(
            event(
                "message_delta", {"delta": end, "usage": {"output_tokens": usage["output_tokens"]}}
            )
        )
        frames.append(event("message_stop", {}))
        return frames

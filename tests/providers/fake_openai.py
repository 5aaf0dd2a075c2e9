"""A fake OpenAI server: ``POST /v1/chat/completions`` with the real JSON shapes."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.providers.loopback import ScriptedVendor

USAGE = {
    "prompt_tokens": 12,
    "completion_tokens": 5,
    "total_tokens": 17,
    "prompt_tokens_details": {"cached_tokens": 2},
}


class FakeOpenAI(ScriptedVendor):
    path = "/v1/chat/completions"

    @property
    def api_base(self) -> str:
        """What goes in ``options.baseUrl``."""
        return f"{self.base_url}/v1"

    def reply_text(self, text: str, *, usage: dict[str, Any] | None = USAGE) -> None:
        self._completion({"role": "assistant", "content": text}, "stop", usage)

    def reply_tool_calls(
        self, *calls: tuple[str, str, str | dict[str, Any]], text: str = ""
    ) -> None:
        """Each call is (id, name, arguments); a dict is JSON-encoded, a str sent verbatim."""
        message = {
            "role": "assistant",
            "content": text or None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for call_id, name, args in calls
            ],
        }
        self._completion(message, "tool_calls", USAGE)

    def reply_error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        # x-should-retry: the SDK's own switch, so a provider with retries still fails fast.
        error = {"message": message, "type": kind, "param": None, "code": None}
        self.respond(status, {"error": error}, {"x-should-retry": "false"})

    def reply_cut_off(self, text: str) -> None:
        """An answer that stopped at the token limit."""
        self._completion({"role": "assistant", "content": text}, "length", USAGE)

    def _completion(
        self, message: dict[str, Any], finish_reason: str, usage: dict[str, Any] | None
    ) -> None:
        body: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "gpt-fake",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        }
        if usage is not None:
            body["usage"] = usage
        self.respond(200, body, None)

    def stream_frames(self, body: dict[str, Any], request: dict[str, Any]) -> list[str]:
        """The completion as chat.completion.chunk frames: the text a word at a time,
        each tool call in two pieces, then the finish reason, the usage (when asked
        for), and ``[DONE]``."""
        choice = body["choices"][0]
        message = choice["message"]
        head = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"]}
        head["model"] = body["model"]

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            data = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            return f"data: {json.dumps(data)}\n\n"

        frames = [chunk({"role": "assistant", "content": ""})]
        frames += [chunk({"content": word}) for word in words(message.get("content") or "")]
        for index, call in enumerate(message.get("tool_calls") or []):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            first = {"name": call["function"]["name"], "arguments": arguments[:half]}
            frames.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": first,
                            }
                        ]
                    }
                )
            )
            rest = {"arguments": arguments[half:]}
            frames.append(chunk({"tool_calls": [{"index": index, "function": rest}]}))
        frames.append(chunk({}, choice["finish_reason"]))
        if (request.get("stream_options") or {}).get("include_usage") and "usage" in body:
            data = {**head, "choices": [], "usage": body["usage"]}
            frames.append(f"data: {json.dumps(data)}\n\n")
        frames.append("data: [DONE]\n\n")
        return frames


def words(text: str) -> list[str]:
    """``text`` in pieces that join back to it: each word with the space before it."""
    return re.findall(r"\s*\S+|\s+$", text)

"""stream-json parsing, the environment allowlist and redaction (pure functions)."""

from __future__ import annotations

import json

from claybot.proactive.environment import run_environment, withheld_secrets
from claybot.proactive.redact import MASK, Redactor
from claybot.proactive.streamjson import MAX_LINE_BYTES, LineSplitter, StreamJsonParser


def line(value: object) -> str:
    return json.dumps(value)


def test_the_three_line_types_give_text_and_everything_else_gives_none() -> None:
    parser = StreamJsonParser()
    texts = [
        parser.feed(raw)
        for raw in [
            line({"type": "system", "subtype": "init"}),
            line({"type": "assistant", "message": {"content": [
                {"type": "text", "text": "\n\nHello"}, {"type": "tool_use", "name": "Bash"},
                {"type": "text", "text": " world"},
            ]}}),
            line({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "more"}}),
            line({"type": "user", "message": {"content": [{"type": "tool_result"}]}}),
            "not json at all",
            line([1, 2, 3]),
            line({"type": "assistant", "message": "odd"}),
            line({"type": "content_block_delta", "delta": {"text": 5}}),
            "",
            line({"type": "result", "subtype": "success", "result": "Final answer"}),
        ]
    ]  # fmt: skip
    assert texts == [
        "", "Hello world\n", "more", "", "", "", "", "", "", "\nFinal answer\n",
    ]  # fmt: skip
    assert parser.garbage_lines == 2  # not JSON, and JSON that is not an object
    assert parser.result is not None and parser.result.text == "Final answer"
    assert parser.result.is_error is False


def test_a_result_repeating_the_last_message_adds_nothing() -> None:
    parser = StreamJsonParser()
    parser.feed(
        line({"type": "assistant", "message": {"content": [{"type": "text", "text": "Done"}]}})
    )
    assert parser.feed(line({"type": "result", "result": "Done", "is_error": True})) == ""
    assert parser.result is not None and parser.result.is_error is True


def test_lines_are_split_across_chunks_and_a_huge_line_is_bounded() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"a":') == []
    assert splitter.feed(b'1}\n{"b"') == [b'{"a":1}\n']
    assert splitter.feed(b":2}\n\n") == [b'{"b":2}\n', b"\n"]
    assert splitter.finish() == []
    big = splitter.feed(b"x" * (MAX_LINE_BYTES + 1))
    assert big == [b"x" * (MAX_LINE_BYTES + 1)]
    assert splitter.feed(b"tail") == [] and splitter.finish() == [b"tail"]


def test_the_environment_is_an_allowlist() -> None:
    source = {
        "PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "https_proxy": "http://p:3128",
        "ANTHROPIC_API_KEY": "sk-ant-xxxxxxxxxxxx", "AWS_SECRET_ACCESS_KEY": "abc12345678",
        "DATABASE_URL": "postgres://u:p@h/db", "CLAYBOT_DATABASE_URL": "x", "EDITOR": "vim",
        "TERM": "xterm-256color",
    }  # fmt: skip
    env = run_environment(source, {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-token"})
    assert env == {
        "PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "https_proxy": "http://p:3128",
        "TERM": "dumb", "CLAUDE_CODE_OAUTH_TOKEN": "oauth-token",
    }  # fmt: skip
    assert sorted(withheld_secrets(source)) == ["abc12345678", "sk-ant-xxxxxxxxxxxx"]


def test_redaction_masks_known_values_and_token_shapes() -> None:
    redact = Redactor(["hunter2-is-my-password", "short"])
    text = (
        "key sk-ant-api03-abcdefghijklmnop and ghp_abcdefghijklmnopqrstuvwxyz01 "
        "pw hunter2-is-my-password url https://bob:pa55word@example.com/x "
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz cb_abcdefghijklmnopqrstu short"
    )
    masked = redact(text)
    for secret in (
        "sk-ant-api03",
        "ghp_abc",
        "hunter2",
        "pa55word",
        "abcdefghijklmnopqrstuvwxyz",
        "cb_abc",
    ):
        assert secret not in masked
    assert masked.count(MASK) == 6 and masked.endswith("short")
    assert redact("an ordinary sentence about tokens") == "an ordinary sentence about tokens"

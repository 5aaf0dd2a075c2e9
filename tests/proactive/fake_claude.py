"""A fake ``claude`` CLI: the tests install it first on PATH as an executable script.

It speaks ``-p <prompt> --output-format stream-json --verbose [--model m]`` and
prints what the real CLI prints: a ``system`` init line, ``assistant`` messages
with content blocks (text and tool use), a ``user`` tool result, streamed
``content_block_delta`` lines and a final ``result`` line. The prompt picks the
behaviour (the environment is scrubbed by the engine, so it cannot carry a mode):

- ``FAIL``: some output, ``boom`` on stderr, exit 1
- ``HANG``: some output, then ignore SIGTERM and sleep forever
- ``SLOW``: ten deltas, 0.1 s apart
- ``SLEEP=<s>``: sleep that long, then succeed
- ``GARBAGE``: non-JSON and odd JSON lines between the real ones
- ``ERROR_RESULT``: exit 0 with ``is_error: true``
- anything else: succeed

Every run records ``<pid>.json`` (start time, argv, cwd, environment) in the
record directory, and ``<pid>.end`` when it exits normally.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

RECORD_DIR = Path(os.environ.get("FAKE_CLAUDE_RECORDS", "/tmp/fake-claude-records"))
SESSION = "7f0c3c1e-2b7a-4c55-9d8e-0a1b2c3d4e5f"


def emit(value: object) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def assistant(*blocks: dict[str, object]) -> dict[str, object]:
    return {
        "type": "assistant",
        "message": {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": list(blocks),
            "stop_reason": None,
            "usage": {"input_tokens": 12, "output_tokens": 7},
        },
        "parent_tool_use_id": None,
        "session_id": SESSION,
    }


def parse_args(argv: list[str]) -> tuple[str, str | None]:
    prompt: str | None = None
    model: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-p":
            prompt = argv[i + 1]
            i += 2
        elif arg == "--model":
            model = argv[i + 1]
            i += 2
        elif arg in ("--output-format",):
            assert argv[i + 1] == "stream-json", argv
            i += 2
        elif arg == "--verbose":
            i += 1
        else:
            sys.stderr.write(f"unknown argument {arg!r}\n")
            sys.exit(2)
    if prompt is None:
        sys.stderr.write("no prompt\n")
        sys.exit(2)
    return prompt, model


def main() -> None:
    prompt, model = parse_args(sys.argv[1:])
    RECORD_DIR.mkdir(parents=True, exist_ok=True)
    record = RECORD_DIR / f"{os.getpid()}.json"
    record.write_text(
        json.dumps(
            {
                "pid": os.getpid(),
                "start": time.time(),
                "argv": sys.argv[1:],
                "cwd": os.getcwd(),
                "env": dict(os.environ),
                "prompt": prompt,
            }
        )
    )
    emit(
        {
            "type": "system",
            "subtype": "init",
            "cwd": os.getcwd(),
            "session_id": SESSION,
            "tools": ["Bash", "Read", "Edit"],
            "model": model or "claude-sonnet-4-5",
            "permissionMode": "default",
        }
    )
    emit(assistant({"type": "text", "text": f"Working on: {prompt[:40]}"}))
    if "GARBAGE" in prompt:
        sys.stdout.write('this is not json\n{"type": "assistant", "message": 5}\n[1, 2]\n')
        sys.stdout.flush()
    emit(
        assistant(
            {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}}
        )
    )
    emit(
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"tool_use_id": "toolu_01", "type": "tool_result", "content": "a.txt"}],
            },
            "session_id": SESSION,
        }
    )
    if "HANG" in prompt:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        (RECORD_DIR / f"{os.getpid()}.hanging").write_text("1")
        while True:
            time.sleep(1)
    if "SLOW" in prompt:
        for i in range(10):
            emit(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": f"tick {i} "},
                }
            )
            time.sleep(0.1)
    match = re.search(r"SLEEP=([0-9.]+)", prompt)
    if match:
        time.sleep(float(match.group(1)))
    if "FAIL" in prompt:
        sys.stderr.write("boom: the task failed\n")
        emit(
            {
                "type": "result",
                "subtype": "error_during_execution",
                "is_error": True,
                "session_id": SESSION,
            }
        )
        (RECORD_DIR / f"{os.getpid()}.end").write_text(str(time.time()))
        sys.exit(1)
    emit(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Streaming "},
        }
    )
    emit(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "done.\n"},
        }
    )
    final = "All checks passed." if "ERROR_RESULT" not in prompt else "Credit balance too low"
    emit(assistant({"type": "text", "text": final}))
    emit(
        {
            "type": "result",
            "subtype": "success" if "ERROR_RESULT" not in prompt else "error",
            "is_error": "ERROR_RESULT" in prompt,
            "duration_ms": 1234,
            "num_turns": 2,
            "result": final,
            "session_id": SESSION,
            "total_cost_usd": 0.0123,
        }
    )
    (RECORD_DIR / f"{os.getpid()}.end").write_text(str(time.time()))


if __name__ == "__main__":
    main()

"""Gates: a shell command whose exit status decides whether a scheduled run happens.

Exit 0 lets the run happen and its output is added to the prompt; anything else
(or a timeout) skips the run. The command runs in the task's ``files/`` folder
with a scrubbed environment (no inherited secrets) in its own process group, so
a timeout kills everything it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

MAX_OUTPUT_BYTES = 8 * 1024
SAFE_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "TZ")


@dataclass(frozen=True)
class GateResult:
    passed: bool
    output: str
    exit_code: int | None  # None: killed after the timeout
    reason: str = ""


def gate_environment(home: Path) -> dict[str, str]:
    env = {name: os.environ[name] for name in SAFE_ENVIRONMENT if name in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["HOME"] = str(home)
    return env


async def run_gate(command: str, cwd: Path, timeout_s: float) -> GateResult:
    await asyncio.to_thread(cwd.mkdir, parents=True, exist_ok=True)
    process = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        command,
        cwd=cwd,
        env=gate_environment(cwd),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(timeout_s):
            output = await process.stdout.read(MAX_OUTPUT_BYTES)
            with contextlib.suppress(Exception):
                while await process.stdout.read(65536):  # drain past the cap
                    pass
            code = await process.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        return GateResult(False, "", None, f"the gate ran longer than {timeout_s:g}s")
    text = output.decode(errors="replace").strip()
    if code != 0:
        return GateResult(False, text, code, f"the gate exited with {code}")
    return GateResult(True, text, code)

"""Gates: a shell command whose exit status decides whether a scheduled run happens.

Exit 0 lets the run happen and its output is added to the prompt; anything else,
a timeout, or a sandbox that cannot isolate the command skips the run (fail
closed). The command runs in the exec sandbox of the shell tools (bubblewrap
when it works here, else resource limits with no network), in the task's
folder, which is all it may write; it has no network: a task file, which an agent
may have written, cannot grant itself more than that.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path

from claybot.engine.agents.state import Permissions
from claybot.engine.sandbox import SandboxRunner, SandboxUnavailable

MAX_OUTPUT_BYTES = 8 * 1024


@dataclass(frozen=True)
class GateResult:
    passed: bool
    output: str
    exit_code: int | None  # None: not run, or killed after the timeout
    reason: str = ""


def gate_runner(claybot_home: Path) -> SandboxRunner:
    """A sandbox with the shell tools' default limits and a small output cap."""
    from claybot.engine.plugins.builtin.shell import ShellSettings, sandbox_config

    config = sandbox_config(ShellSettings(), claybot_home)
    return SandboxRunner(replace(config, max_output_bytes=MAX_OUTPUT_BYTES))


async def run_gate(
    runner: SandboxRunner, command: str, folder: str, timeout_s: float
) -> GateResult:
    await asyncio.to_thread(Path(folder).mkdir, parents=True, exist_ok=True)
    permissions = Permissions(workingDir=folder, readDirs=[folder], writeDirs=[folder])
    try:
        result = await runner.run(
            command, cwd=folder, home=folder, permissions=permissions, timeout_s=timeout_s
        )
    except SandboxUnavailable as exc:
        return GateResult(False, "", None, f"the gate could not be sandboxed: {exc}")
    output = (result.stdout.text() + result.stderr.text()).strip()
    if result.timed_out:
        return GateResult(False, output, None, f"the gate ran longer than {timeout_s:g}s")
    if result.exit_code != 0:
        return GateResult(
            False, output, result.exit_code, f"the gate exited with {result.exit_code}"
        )
    return GateResult(True, output, 0)

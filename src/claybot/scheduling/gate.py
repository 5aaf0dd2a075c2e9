"""Gates: a shell command whose exit status decides whether a scheduled run happens.

Exit 0 lets the run happen and its output is added to the prompt; anything else,
a timeout, or a command that cannot be confined skips the run (fail closed).
Gates run in the same sandbox as ``exec`` (bubblewrap, or nothing runs; there is
no unconfined mode for gates) and never with network. What a gate may see:

- a gate the owner wrote (the CLI, the API, a task file by hand) gets its task's
  folder, read-write, and nothing else;
- a gate an agent made (``cron_add``, ``heartbeat_add``) gets no more than that
  agent's own grants, read when it runs, in the agent's working directory: a
  model cannot reach through a gate what it could not reach through ``exec``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from claybot.permissions.model import Permissions
from claybot.permissions.tags import PermissionTag, grants
from claybot.sandbox import (
    DEFAULT_LIMITS,
    Sandbox,
    SandboxConfig,
    SandboxRunner,
    SandboxUnavailable,
)

MAX_OUTPUT_BYTES = 8 * 1024
GATES_OWNER = "gates"


class GateRefused(LookupError):
    """The gate may not run at all (its maker is gone, or has no folder to run in)."""


@dataclass(frozen=True)
class GateResult:
    passed: bool
    output: str
    exit_code: int | None  # None: not run, or killed after the timeout
    reason: str = ""


@dataclass(frozen=True)
class GateGrant:
    """Where a gate runs and what it may see."""

    cwd: str
    permissions: Permissions


def gate_runner(sandbox: Sandbox) -> SandboxRunner:
    """Bubblewrap with the default limits and a small output cap."""
    return sandbox.runner(
        GATES_OWNER, SandboxConfig("auto", DEFAULT_LIMITS, max_output_bytes=MAX_OUTPUT_BYTES)
    )


async def owner_gate_grant(folder: str) -> GateGrant:
    """A gate the owner wrote: its task folder (made if missing), and nothing else."""
    await asyncio.to_thread(Path(folder).mkdir, parents=True, exist_ok=True)
    return GateGrant(folder, Permissions(workingDir=folder, readDirs=[folder], writeDirs=[folder]))


def agent_gate_grant(maker: str, permissions: Permissions) -> GateGrant:
    """A gate an agent made: that agent's folders (never its network), in its working
    directory. Pure: ``permissions`` are the maker's, read when the gate runs."""
    confined = permissions.model_copy(update={"network": False})
    cwd = permissions.workingDir
    if not cwd or not grants(permissions, PermissionTag("read", cwd)):
        readable = [*permissions.writeDirs, *permissions.readDirs]
        if not readable:
            raise GateRefused(f"the agent that made this gate ({maker}) holds no folder to run in")
        cwd = readable[0]
    return GateGrant(cwd, confined)


async def run_gate(
    runner: SandboxRunner, command: str, grant: GateGrant, timeout_s: float
) -> GateResult:
    try:
        result = await runner.run(
            command,
            cwd=grant.cwd,
            home=grant.cwd,
            permissions=grant.permissions,
            timeout_s=timeout_s,
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

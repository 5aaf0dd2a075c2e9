"""The ``claude`` CLI on PATH: proactive agents with the (default) ``claude`` runner run it.

Looked for on the PATH a run gets (``run_environment``), i.e. this environment's.
Missing is a failure when an agent uses that runner, else a warning.
"""

from __future__ import annotations

import shutil

from claybot.doctor.context import DoctorContext
from claybot.doctor.finding import Finding, fail, ok, warn
from claybot.proactive.environment import run_environment
from claybot.proactive.store import ProactiveStore

CLAUDE = "claude"
INSTALL_CLAUDE = "npm install -g @anthropic-ai/claude-code"


def check_claude(context: DoctorContext) -> list[Finding]:
    path = run_environment(context.env)["PATH"]
    binary = shutil.which(CLAUDE, path=path)
    agents = ProactiveStore(context.paths.home / "proactive").peek()
    using = [agent.id for agent in agents if agent.runner == CLAUDE]
    if binary is not None:
        users = f"; used by {len(using)} proactive agent(s)" if using else ""
        return [ok("claude", f"{binary}{users}")]
    if using:
        return [
            fail(
                "claude",
                f"the claude CLI is not on PATH, and proactive agent(s) {', '.join(using)} run "
                "it: their runs fail",
                f'{INSTALL_CLAUDE}  (or give them the runner "engine")',
            )
        ]
    return [
        warn(
            "claude",
            'the claude CLI is not on PATH: proactive agents with the runner "claude" (the '
            "default) would fail",
            INSTALL_CLAUDE,
        )
    ]

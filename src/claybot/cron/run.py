"""A cron run: its key (task, scheduled instant), the prompt its agent gets, and the
port it is posted through (``CronHost``, the engine's agents)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from claybot.cron.store import CronTask
from claybot.scheduling.gate import GateGrant


class CronHost(Protocol):
    """What the scheduler needs from the engine: posting a run and waiting for it."""

    async def post_run(self, task: CronTask, message_id: str, text: str) -> tuple[str, str]:
        """Post the run's prompt; (agent id, item id). Raises LookupError for a bad agentId."""
        ...

    async def wait_run(self, agent_id: str, item_id: str) -> bool:
        """Until the agent has processed the item; whether its turn succeeded."""
        ...

    async def prepare_run(self, task: CronTask) -> None:
        """Have the run's agent loaded (created if new): the run is due in a moment."""
        ...

    async def post_runs(
        self, runs: list[tuple[CronTask, str, str]]
    ) -> list[tuple[str, str] | Exception]:
        """Post several runs (task, message id, prompt) in one batch; per run, its
        (agent id, item id) or the error that kept it from being posted."""
        ...

    async def gate_grant(self, made_by: str | None, folder: str) -> GateGrant:
        """Where a gate runs and what it sees: ``folder`` for the owner's, the maker's
        grants for an agent's. GateRefused when it may not run at all."""
        ...


@dataclass(frozen=True)
class RunKey:
    """A run is (task, scheduled instant): it happens at most once, under one message id
    that the agent's inbox drops a repeat of."""

    task_id: str
    at_ms: int

    @property
    def message_id(self) -> str:
        return f"cron:{self.task_id}:{self.at_ms}"


def run_prompt(task: CronTask, at: datetime, gate_output: str | None) -> str:
    local = at.astimezone(task.schedule.zone)
    lines = [
        f'[Cron task "{task.spec.name}" ({task.id}), scheduled for '
        f"{local.isoformat(timespec='minutes')} {task.schedule.timezone}]",
        f"Files folder: {task.files_path}",
        "",
        task.prompt,
    ]
    if gate_output:
        lines += ["", "[Gate output]", gate_output]
    return "\n".join(lines)

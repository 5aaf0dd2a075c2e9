"""The cron scheduler's host over the agent runtime: where runs go and how they end.

A task's runs go to the agent it names, or to its own cron agent (created on
first use with the task's files folder). A run is a ``Turn``: posted through the
agents' one admission path, and waited on through its handle, which after a
restart answers from history.
"""

from __future__ import annotations

from claybot.agents.descriptors import CronDescriptor
from claybot.agents.system import AgentNotFound, AgentSystem, Submission
from claybot.cron.store import CronTask
from claybot.permissions.model import Permissions
from claybot.scheduling.gate import GateGrant, GateRefused, agent_gate_grant, owner_gate_grant


async def gate_grant(agents: AgentSystem, made_by: str | None, folder: str) -> GateGrant:
    """Cron and heartbeat gates: see ``claybot.scheduling.gate``."""
    if made_by is None:
        return await owner_gate_grant(folder)
    try:
        permissions = await agents.permissions_of(made_by)
    except AgentNotFound as exc:
        raise GateRefused(f"the agent that made it ({made_by}) no longer exists") from exc
    return agent_gate_grant(made_by, permissions)


class AgentCronHost:
    """``CronHost`` for the engine: runs are turns of agents."""

    def __init__(self, agents: AgentSystem) -> None:
        self._agents = agents

    async def _agent_of(self, task: CronTask) -> str:
        """The agent a task's runs go to: the one it names, or its own (created on first use)."""
        agents = self._agents
        if task.spec.agentId is not None:
            if not agents.exists(task.spec.agentId):
                raise LookupError(f"the task's agentId {task.spec.agentId!r} does not exist")
            return task.spec.agentId
        descriptor = CronDescriptor(id=task.id)
        existing = agents.agent_id_for(descriptor)
        if existing is not None:  # the usual case: no permissions to build for 1,000 runs
            return existing
        return await agents.resolve(descriptor, permissions=await self._grants(task))

    async def _grants(self, task: CronTask) -> Permissions:
        """A new cron agent's grants: its files folder, plus the workspace for the owner's
        tasks or, for a task an agent made, no more than that agent holds."""
        files = task.files_path
        maker = task.spec.createdBy
        if maker is None:
            base = self._agents.runtime.default_permissions
        else:
            try:
                base = await self._agents.permissions_of(maker)
            except AgentNotFound:
                base = Permissions()  # its maker is gone: the folder alone
        return Permissions(
            workingDir=files,
            readDirs=[*base.readDirs, files],
            writeDirs=[*base.writeDirs, files],
            network=base.network,
        )

    async def post_run(self, task: CronTask, message_id: str, text: str) -> tuple[str, str]:
        agent_id = await self._agent_of(task)
        turn = await self._agents.submit(agent_id, text, message_id=message_id, origin="cron")
        return turn.agent_id, turn.id

    async def prepare_run(self, task: CronTask) -> None:
        await self._agents.warm(await self._agent_of(task))

    async def post_runs(
        self, runs: list[tuple[CronTask, str, str]]
    ) -> list[tuple[str, str] | Exception]:
        targets: list[str | Exception] = []
        for task, _, _ in runs:
            try:
                targets.append(await self._agent_of(task))
            except LookupError as exc:
                targets.append(exc)
        await self._agents.submit_many(
            [
                Submission(target, text, message_id, origin="cron")
                for target, (_, message_id, text) in zip(targets, runs, strict=True)
                if isinstance(target, str)
            ]
        )
        return [
            (target, message_id) if isinstance(target, str) else target
            for target, (_, message_id, _) in zip(targets, runs, strict=True)
        ]

    async def wait_run(self, agent_id: str, item_id: str) -> bool:
        outcome = await self._agents.turn(agent_id, item_id).outcome()
        return not outcome.failed

    async def gate_grant(self, made_by: str | None, folder: str) -> GateGrant:
        return await gate_grant(self._agents, made_by, folder)

"""What the proactive service refuses: the house errors, with the field to blame.

Fields are named as the ``/api/agents`` requests spell them (``id`` for the agent in
the path, as this API always has).
"""

from __future__ import annotations

from claybot.kernel.errors import ClayError, Conflict, InvalidInput, NotFound, Unavailable


class ProactiveError(ClayError):
    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message, field=field)


class AgentNotFound(ProactiveError, NotFound):
    code = "agent_not_found"

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"no proactive agent with id {agent_id!r}", "id")


class InvalidAgentInput(ProactiveError, InvalidInput):
    pass


class AgentLimitReached(ProactiveError, Conflict):
    code = "too_many_agents"


class RunQueueFull(ProactiveError, Conflict):
    code = "queue_full"


class NothingToShow(ProactiveError, NotFound):
    pass


class ServiceStopping(ProactiveError, Unavailable):
    code = "stopping"

"""What the proactive service refuses, with the HTTP status and the field to blame."""

from __future__ import annotations


class ProactiveError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class AgentNotFound(ProactiveError):
    status = 404
    code = "agent_not_found"

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"no proactive agent with id {agent_id!r}", "id")


class InvalidAgentInput(ProactiveError):
    status = 422
    code = "invalid_request"


class AgentLimitReached(ProactiveError):
    status = 409
    code = "too_many_agents"


class RunQueueFull(ProactiveError):
    status = 409
    code = "queue_full"


class NothingToShow(ProactiveError):
    status = 404
    code = "not_found"


class ServiceStopping(ProactiveError):
    status = 503
    code = "stopping"

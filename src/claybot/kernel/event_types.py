"""Every event type the engine emits, and what each one's payload holds.

Clients learn here what arrives on the event stream; the emitting code builds
each payload with its TypedDict, so mypy checks the keys where they are written,
and the test suite checks every payload it sees against its type
(``tests/guards.py``), so a payload cannot drift from this description.

A member of ``EventType`` *is* its string (``StrEnum``): the wire is unchanged.
Events a plugin emits are namespaced to it (``plugin.event``, with the plugin's
own type inside), and proactive agents' events keep seed 004's names under
``proactive.``; those are free-form and not listed here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict


class EventType(StrEnum):
    AGENT_CREATED = "agent.created"
    AGENT_WOKE = "agent.woke"
    AGENT_RESTORED = "agent.restored"
    AGENT_SLEEP = "agent.sleep"
    AGENT_RESET = "agent.reset"
    AGENT_GRANT_REVOKED = "agent.grant_revoked"
    AGENT_OUTGOING = "agent.outgoing"
    AGENT_DELTA = "agent.delta"
    AGENT_TOOL_CALL = "agent.tool_call"
    AGENT_TOOL_RESULT = "agent.tool_result"
    AGENT_ERROR = "agent.error"
    AGENT_DAMAGED = "agent.damaged"
    AGENT_STORAGE_FAILED = "agent.storage_failed"
    SUBAGENT_FINISHED = "agent.subagent.finished"
    SUBAGENT_FAILED = "agent.subagent.failed"
    CRON_STARTED = "cron.started"
    CRON_TASK_ADDED = "cron.task.added"
    CRON_TASK_UPDATED = "cron.task.updated"
    CRON_TASK_REMOVED = "cron.task.removed"
    CRON_TASK_INVALID = "cron.task.invalid"
    CRON_TASK_STARTED = "cron.task.started"
    CRON_TASK_RAN = "cron.task.ran"
    CRON_TASK_SKIPPED = "cron.task.skipped"
    HEARTBEAT_DEFERRED = "heartbeat.deferred"
    HEARTBEAT_TASK_SKIPPED = "heartbeat.task.skipped"
    HEARTBEAT_TASK_RAN = "heartbeat.task.ran"
    PERMISSION_REQUESTED = "permission.requested"
    PERMISSION_GRANTED = "permission.granted"
    PERMISSION_DENIED = "permission.denied"
    PROVIDER_FALLBACK = "provider.fallback"
    AUTH_UPDATED = "auth.updated"
    PLUGIN_LOADED = "plugin.loaded"
    PLUGIN_UNLOADED = "plugin.unloaded"
    PLUGIN_EVENT = "plugin.event"
    JOB_CREATED = "job.created"
    JOB_STATUS = "job.status"
    JOB_LOG = "job.log"
    JOB_CANCEL_REQUESTED = "job.cancel_requested"


# Payload types refuse keys they do not list when the tests check them.
_CLOSED = ConfigDict(extra="forbid")


@with_config(_CLOSED)
class AgentId(TypedDict):
    agentId: str


@with_config(_CLOSED)
class AgentCreated(TypedDict):
    agentId: str
    descriptor: dict[str, Any]
    source: Literal["agent", "api", "connector"]


@with_config(_CLOSED)
class AgentSleep(TypedDict):
    agentId: str
    reason: Literal["idle"]


@with_config(_CLOSED)
class AgentReset(TypedDict):
    agentId: str
    context: dict[str, Any]  # what the reset was asked with


@with_config(_CLOSED)
class AgentGrantRevoked(TypedDict):
    agentId: str
    permission: str  # the tag taken back
    held: bool  # False: the agent did not have it, and nothing changed


@with_config(_CLOSED)
class FileReferenceJson(TypedDict):
    """A file as messages, history records and the API carry it (``FileReference``)."""

    id: str  # the content's SHA-256
    name: str
    mimeType: str
    size: int
    sha256: str  # the same as ``id``, under the name seed 001's clients read


@with_config(_CLOSED)
class OutgoingMessagePayload(TypedDict):
    id: str
    agentId: str
    connector: str
    userId: str
    channelId: str
    text: str
    inReplyTo: str | None
    final: bool
    files: NotRequired[list[FileReferenceJson]]  # for a message with files


@with_config(_CLOSED)
class AgentOutgoing(TypedDict):
    agentId: str
    message: OutgoingMessagePayload


@with_config(_CLOSED)
class AgentDelta(TypedDict):
    """Text of a reply while the model writes it: live only, never in history.

    The deltas of one ``outgoingId`` concatenate to what the model has written so far;
    the ``agent.outgoing`` with that id carries the final text (which may differ: a
    notice appended, or nothing when the provider failed and the next one answered, see
    ``provider.fallback``)."""

    agentId: str
    messageId: str  # the inbox item the turn answers
    outgoingId: str
    text: str


@with_config(_CLOSED)
class AgentToolCall(TypedDict):
    agentId: str
    messageId: str
    callId: str
    name: str
    arguments: str  # the arguments as JSON, cut to a one-line summary's worth


@with_config(_CLOSED)
class AgentToolResult(TypedDict):
    agentId: str
    messageId: str
    callId: str
    name: str
    isError: bool
    text: str  # the start of the result; the whole of it is in the agent's history


# A provider failed and the next one is tried; text the failed one streamed is void.
# ``from`` is a keyword, hence the functional form. ``agentId`` and ``messageId`` are
# None for a call made for no agent's turn (a job's, a provider test's).
ProviderFallback = TypedDict(
    "ProviderFallback",
    {
        "from": str,
        "to": str,
        "reason": str,
        "agentId": str | None,
        "messageId": str | None,
    },
)
with_config(_CLOSED)(ProviderFallback)


@with_config(_CLOSED)
class AgentError(TypedDict):
    agentId: str
    messageId: str
    error: str


@with_config(_CLOSED)
class AgentDamaged(TypedDict):
    agentId: str
    file: str
    error: str
    action: str


@with_config(_CLOSED)
class AgentStorageFailed(TypedDict):
    agentId: str
    error: str


@with_config(_CLOSED)
class SubagentEnded(TypedDict):
    agentId: str
    parentAgentId: str
    messageId: str


@with_config(_CLOSED)
class CronStarted(TypedDict):
    tasks: int
    problems: int


@with_config(_CLOSED)
class CronTaskAdded(TypedDict):
    taskId: str
    name: str
    source: Literal["api", "file", "tool"]


@with_config(_CLOSED)
class CronTaskUpdated(TypedDict):
    taskId: str
    source: Literal["api", "file", "tool"]


@with_config(_CLOSED)
class TaskId(TypedDict):
    taskId: str


@with_config(_CLOSED)
class TaskInvalid(TypedDict):
    path: str
    reason: str


@with_config(_CLOSED)
class CronTaskStarted(TypedDict):
    taskId: str
    scheduledAt: str
    agentId: str
    latenessMs: float


@with_config(_CLOSED)
class CronTaskRan(TypedDict):
    taskId: str
    scheduledAt: str
    status: str
    agentId: str | None
    error: NotRequired[str]


@with_config(_CLOSED)
class CronTaskSkipped(TypedDict):
    taskId: str
    scheduledAt: list[str]
    reason: str
    detail: NotRequired[str]
    output: NotRequired[str]


@with_config(_CLOSED)
class HeartbeatDeferred(TypedDict):
    scheduledAt: str


@with_config(_CLOSED)
class HeartbeatTaskSkipped(TypedDict):
    taskId: str
    reason: str
    detail: str


@with_config(_CLOSED)
class HeartbeatTaskRan(TypedDict):
    taskId: str
    lastRunAt: str


@with_config(_CLOSED)
class PermissionRequest(TypedDict):
    requestId: str
    agentId: str
    agentLabel: str
    permission: str
    reason: str
    connector: str
    userId: str
    channelId: str
    expiresAt: int  # unix ms; unanswered by then means denied
    createdAt: int  # unix ms
    status: Literal["pending", "granted", "denied"]
    decidedBy: str | None
    decidedAt: int | None
    delivered: bool


@with_config(_CLOSED)
class AuthUpdated(TypedDict):
    id: str
    key: str  # the field's name ("*": the whole entry was removed); never its value


@with_config(_CLOSED)
class PluginInstance(TypedDict):
    id: str
    pluginId: str
    name: NotRequired[str]


@with_config(_CLOSED)
class PluginEvent(TypedDict):
    instanceId: str
    pluginId: str
    type: str
    payload: dict[str, Any]


@with_config(_CLOSED)
class JobCreated(TypedDict):
    jobId: str
    status: Literal["queued"]


@with_config(_CLOSED)
class JobStatusChanged(TypedDict):
    jobId: str
    status: Literal["queued", "running", "completed", "failed", "waiting_for_user", "cancelled"]


@with_config(_CLOSED)
class JobLog(TypedDict):
    jobId: str
    id: int
    level: Literal["debug", "info", "warn", "error"]
    message: str


@with_config(_CLOSED)
class JobId(TypedDict):
    jobId: str


PAYLOAD_TYPES: dict[EventType, type] = {
    EventType.AGENT_CREATED: AgentCreated,
    EventType.AGENT_WOKE: AgentId,
    EventType.AGENT_RESTORED: AgentId,
    EventType.AGENT_SLEEP: AgentSleep,
    EventType.AGENT_RESET: AgentReset,
    EventType.AGENT_GRANT_REVOKED: AgentGrantRevoked,
    EventType.AGENT_OUTGOING: AgentOutgoing,
    EventType.AGENT_DELTA: AgentDelta,
    EventType.AGENT_TOOL_CALL: AgentToolCall,
    EventType.AGENT_TOOL_RESULT: AgentToolResult,
    EventType.AGENT_ERROR: AgentError,
    EventType.AGENT_DAMAGED: AgentDamaged,
    EventType.AGENT_STORAGE_FAILED: AgentStorageFailed,
    EventType.SUBAGENT_FINISHED: SubagentEnded,
    EventType.SUBAGENT_FAILED: SubagentEnded,
    EventType.CRON_STARTED: CronStarted,
    EventType.CRON_TASK_ADDED: CronTaskAdded,
    EventType.CRON_TASK_UPDATED: CronTaskUpdated,
    EventType.CRON_TASK_REMOVED: TaskId,
    EventType.CRON_TASK_INVALID: TaskInvalid,
    EventType.CRON_TASK_STARTED: CronTaskStarted,
    EventType.CRON_TASK_RAN: CronTaskRan,
    EventType.CRON_TASK_SKIPPED: CronTaskSkipped,
    EventType.HEARTBEAT_DEFERRED: HeartbeatDeferred,
    EventType.HEARTBEAT_TASK_SKIPPED: HeartbeatTaskSkipped,
    EventType.HEARTBEAT_TASK_RAN: HeartbeatTaskRan,
    EventType.PERMISSION_REQUESTED: PermissionRequest,
    EventType.PERMISSION_GRANTED: PermissionRequest,
    EventType.PERMISSION_DENIED: PermissionRequest,
    EventType.PROVIDER_FALLBACK: ProviderFallback,
    EventType.AUTH_UPDATED: AuthUpdated,
    EventType.PLUGIN_LOADED: PluginInstance,
    EventType.PLUGIN_UNLOADED: PluginInstance,
    EventType.PLUGIN_EVENT: PluginEvent,
    EventType.JOB_CREATED: JobCreated,
    EventType.JOB_STATUS: JobStatusChanged,
    EventType.JOB_LOG: JobLog,
    EventType.JOB_CANCEL_REQUESTED: JobId,
}

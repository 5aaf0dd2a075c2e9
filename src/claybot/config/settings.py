"""The settings.json model. JSON keys are camelCase; unknown top-level sections are kept."""

from __future__ import annotations

from typing import Any, NotRequired, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel
from typing_extensions import TypedDict

from claybot.config.redaction import redact_named
from claybot.kernel.clock import UnknownTimeZone, zone

DEFAULT_PORT = 7331


class CamelModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def to_json_dict(self) -> dict[str, Any]:
        """The model as settings.json holds it (camelCase, no nulls). A dict: one method
        for every section, each with its own keys."""
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)


class EngineSettings(CamelModel):
    socket_path: str | None = None  # default <home>/claybot.sock
    data_dir: str | None = None  # default <home>
    host: str = "127.0.0.1"
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    # The IANA zone schedules use when a task names none.
    timezone: str = Field(default="UTC", min_length=1, max_length=64)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            zone(value)
        except UnknownTimeZone as exc:
            raise ValueError(str(exc)) from exc
        return value


class PublicProviderJson(TypedDict):
    """A provider entry as it may be shown: settings.json's, its secret options redacted."""

    id: str
    type: NotRequired[str]  # left out: the id names the type
    enabled: bool
    model: NotRequired[str]
    options: dict[str, Any]


class ProviderSettings(CamelModel):
    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    # The provider implementation; defaults to ``id`` so {"id": "openai"} just works,
    # while {"id": "ollama", "type": "openai"} adds a second OpenAI-compatible endpoint.
    type: str | None = None
    enabled: bool = True
    model: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @property
    def provider_type(self) -> str:
        return self.type or self.id

    def to_public_dict(self) -> PublicProviderJson:
        """What may be shown: options whose names say secret (``apiKey``...) redacted."""
        data = self.to_json_dict()
        data["options"] = redact_named(self.options)
        # The dump has exactly these keys (the model forbids others), in this order.
        return cast(PublicProviderJson, data)


class PluginInstanceSettings(CamelModel):
    instance_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    plugin_id: str = Field(min_length=1, max_length=64)
    enabled: bool = True
    settings: dict[str, Any] = Field(default_factory=dict)


class AgentSettings(CamelModel):
    max_concurrent: int = Field(default=512, ge=1, le=10_000)  # agents running a turn at once
    idle_unload_s: float = Field(default=60.0, ge=0)  # unload an agent idle this long
    max_message_bytes: int = Field(default=64 * 1024, ge=1, le=16 * 1024 * 1024)
    # The most recent messages sent to the model each turn (history keeps everything).
    max_context_messages: int = Field(default=200, ge=2, le=100_000)
    system_prompt: str | None = None
    # The tool loop: model calls per turn, and how much of a tool's output the model sees.
    max_tool_iterations: int = Field(default=25, ge=1, le=500)
    tool_output_limit: int = Field(default=16_000, ge=256, le=1_000_000)
    # Background agents: how deep subagents may nest, and how many may be busy per parent.
    max_subagent_depth: int = Field(default=3, ge=1, le=32)
    max_children: int = Field(default=8, ge=1, le=1000)


class HeartbeatSettings(CamelModel):
    enabled: bool = True
    interval_s: float = Field(default=1800.0, ge=10, le=7 * 24 * 3600)


class PermissionSettings(CamelModel):
    # An unanswered permission request is denied after this long (fail closed).
    request_timeout_s: float = Field(default=900.0, gt=0, le=7 * 24 * 3600)


class ProactiveSettings(CamelModel):
    """Proactive agents (seed 004): defaults for new agents and the engine-wide limits."""

    timeout_ms: int = Field(default=300_000, ge=1000, le=24 * 3600 * 1000)
    max_retries: int = Field(default=3, ge=1, le=100)  # consecutive failures before auto-pause
    max_agents: int = Field(default=10, ge=1, le=10_000)
    max_concurrent: int = Field(default=2, ge=1, le=64)  # executions at once, all agents
    workspace: str | None = None  # an agent's cwd must lie inside; default <home>/workspace
    # The zone of a schedule when the agent names none; default: engine.timezone.
    default_timezone: str | None = Field(default=None, min_length=1, max_length=64)
    # A WebSocket client that hears nothing for a while takes the connection for dead
    # (codeck's after 45 s): a `heartbeat` message goes out after this much silence.
    ws_heartbeat_s: float = Field(default=25.0, ge=0.1, le=40.0)

    @field_validator("default_timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        return None if value is None else EngineSettings._known_zone(value)


class JobSettings(CamelModel):
    """Jobs (seed 002): the workers inside the engine and the limits every worker keeps."""

    workers: int = Field(default=2, ge=0, le=256)  # jobs run at once in the engine; 0: none
    max_file_bytes: int = Field(default=10 * 1024 * 1024, ge=1024, le=1024**3)  # per file
    max_iterations: int = Field(default=50, ge=1, le=1000)  # model calls per job run
    lease_s: float = Field(default=30.0, ge=2.0, le=3600.0)  # a worker silent this long is lost
    python_memory_mb: int = Field(default=512, ge=32, le=65536)  # run_python's address space


class FileSettings(CamelModel):
    """The file store (``<home>/files``): what messages carry in and out."""

    max_file_bytes: int = Field(default=20 * 1024**2, ge=1024, le=4 * 1024**3)
    max_message_bytes: int = Field(default=50 * 1024**2, ge=1024, le=16 * 1024**3)  # all files
    quota_bytes: int = Field(default=2 * 1024**3, ge=1024**2)  # everything stored
    # A file no history references is removed once it is this old (it may belong to a
    # message still on its way into a history).
    collect_after_s: float = Field(default=24 * 3600.0, ge=60.0)


class ChatSettings(CamelModel):
    """The OpenAI-compatible door (``/v1/chat/completions``)."""

    # How long a request waits for the agent's reply; the turn itself goes on after.
    reply_timeout_s: float = Field(default=600.0, gt=0, le=24 * 3600)


class Settings(CamelModel):
    # Later features add their own sections; a file written by a newer engine must
    # still load, so unknown sections are preserved instead of rejected.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    engine: EngineSettings = Field(default_factory=EngineSettings)
    providers: list[ProviderSettings] = Field(default_factory=list)
    plugins: list[PluginInstanceSettings] = Field(default_factory=list)
    agents: AgentSettings = Field(default_factory=AgentSettings)
    permissions: PermissionSettings = Field(default_factory=PermissionSettings)
    heartbeat: HeartbeatSettings = Field(default_factory=HeartbeatSettings)
    proactive: ProactiveSettings = Field(default_factory=ProactiveSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    chat: ChatSettings = Field(default_factory=ChatSettings)
    files: FileSettings = Field(default_factory=FileSettings)

    def enabled_providers(self) -> list[ProviderSettings]:
        return [provider for provider in self.providers if provider.enabled]

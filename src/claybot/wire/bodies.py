"""Request bodies of the engine API.

Unknown fields are rejected, so typos are caught, and JSON types are strict: ``0`` is
not ``false`` and ``"5"`` is not ``5``, which is what the OpenAPI document promises.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal
from zoneinfo import available_timezones

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    JsonValue,
    ValidationInfo,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema
from typing_extensions import TypeAliasType

from claybot.config.auth import AUTH_TYPES
from claybot.config.settings import ProviderSettings
from claybot.cron import task
from claybot.db.keys import SCOPES
from claybot.scheduling.schedule import (
    CRON_DESCRIPTION,
    CRON_EXAMPLES,
    CRON_FORMAT,
    MAX_EXPRESSION_CHARS,
)

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
NAME_PATTERN = r"^[^\x00-\x1f/]+$"
NAME = Field(min_length=1, max_length=256, pattern=NAME_PATTERN)
MAX_PROVIDER_POSITION = 1000  # a place in the list of providers
# PostgreSQL's text holds no NUL character (SQLite's does; PostgreSQL refused it with an
# error answered as 503): text bound for the database refuses it at the door, on every
# backend, naming the field.
NO_NUL = r"^[^\x00]*$"
# Some character that no reader takes for a blank: a prompt is stored after a file's front
# matter and read back stripped, so one of blanks only would not load. Python's strip()
# also takes \x1c-\x1f and \x85 for blanks, JSON Schema's \s also \ufeff.
NOT_BLANK = r"[^\s\x1c-\x1f\x85\ufeff]"


class _CronExpressionSchema:
    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_EXPRESSION_CHARS,
            "format": CRON_FORMAT,
            "description": CRON_DESCRIPTION,
            "examples": list(CRON_EXAMPLES),
        }


# Built when the document is generated, not at import (the zone list reads ~600 files),
# off the engine's start path.
@cache
def zone_names() -> list[str]:
    return sorted(available_timezones())


class _TimeZoneSchema:
    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "type": "string",
            "enum": zone_names(),
            "description": "An IANA time zone of the engine's zone database, e.g. "
            "`Europe/Paris`; by default the engine's (settings: engine.timezone)",
        }


# Named aliases: each is one component of the document, however many bodies use it.
# Validation stays with the engine (CronSchedule.parse, parse_zone), which the
# schemas describe; the length limits are checked here too.
CronExpression = TypeAliasType(
    "CronExpression",
    Annotated[str, Field(min_length=1, max_length=MAX_EXPRESSION_CHARS), _CronExpressionSchema()],
)
TimeZone = TypeAliasType(
    "TimeZone", Annotated[str, Field(min_length=1, max_length=64), _TimeZoneSchema()]
)


def _json_integer(value: Any) -> Any:
    if isinstance(value, bool | str):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


class JsonInteger:
    """An integer as JSON has it: ``5`` or ``5.0``, not ``"5"`` or ``true``.

    Strict mode refuses ``5.0``, which JSON Schema counts as an integer (and Python's
    json module writes for a float); lax mode takes ``"5"`` and ``true``. Put it after
    the field's bounds in ``Annotated``, so the bounds stay ``minimum``/``maximum`` in
    the document.
    """

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        inner = handler(source)
        if inner["type"] == "int":
            inner = {**inner, "strict": False}
        return core_schema.no_info_before_validator_function(_json_integer, inner)


JSON_INTEGER = JsonInteger()


SCOPE_NAMES: list[JsonValue] = [*sorted(SCOPES)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Gate(task.Gate):
    """The gate of a cron or heartbeat task: the task file's own model, with strict JSON types.

    A model's strictness does not reach the models inside it, so the file's model
    (lenient, as YAML wants) is narrowed here rather than validated from a dict in
    the route, which reported its errors as raw pydantic text.
    """

    model_config = ConfigDict(strict=True)

    # task.Gate's bounds (a test keeps them equal), taking 5000.0 as JSON does.
    timeoutMs: Annotated[int, Field(ge=100, le=300_000), JSON_INTEGER] = 30_000


class AttachFile(Body):
    """A stored file (``POST /v1/engine/files``) a message carries, by its id."""

    id: str = Field(pattern=r"^[0-9a-f]{64}$", description="The id the upload answered")
    name: str | None = Field(default=None, max_length=255, description="Else the upload's")


class WithFiles(Body):
    """A message: its text, its files, or both."""

    # The rule below, in the document too, so that a generated client knows it.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": ["text"], "properties": {"text": {"minLength": 1}}},
                {"required": ["files"], "properties": {"files": {"minItems": 1}}},
            ]
        }
    )

    # Files first: ``text`` is checked knowing them (an empty text needs a file).
    files: list[AttachFile] = Field(
        default_factory=list, max_length=20, description="Files the message carries"
    )
    text: str = Field(default="", validate_default=True)

    @field_validator("text")
    @classmethod
    def _something(cls, text: str, info: ValidationInfo) -> str:
        if not text and not info.data.get("files"):
            raise ValueError("a message needs text (at least 1 character) or files")
        return text


class PostMessage(WithFiles):
    connector: Literal["local"] = "local"
    userId: str = NAME
    channelId: str = NAME
    messageId: str | None = Field(default=None, pattern=ID_PATTERN)


class ResetAgent(Body):
    message: str | None = Field(default=None, max_length=10_000)


class LoadPlugin(Body):
    pluginId: str = Field(min_length=1, max_length=64)
    instanceId: str | None = Field(default=None, min_length=1, max_length=64)
    # None keeps the stored settings of a configured instance (reload after unload).
    settings: dict[str, Any] | None = None


class UnloadPlugin(Body):
    instanceId: str = Field(min_length=1, max_length=64)


class SetAuth(Body):
    # The field `type` says what the entry holds: its value is one of the auth types.
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "if": {"properties": {"key": {"const": "type"}}, "required": ["key"]},
            "then": {"properties": {"value": {"enum": list(AUTH_TYPES)}}},
        },
    )
    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    key: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    value: str = Field(min_length=1, max_length=8192)

    @field_validator("value")
    @classmethod
    def _auth_type(cls, value: str, info: ValidationInfo) -> str:
        # Checked here too, so the CLI's own check refuses it before anything is
        # written. The value is not echoed: what goes to auth.json is usually a secret.
        if info.data.get("key") == "type" and value not in AUTH_TYPES:
            raise ValueError(f"an entry's type is one of {', '.join(AUTH_TYPES)}")
        return value


class CreateKey(Body):
    name: str = Field(min_length=1, max_length=128, pattern=NO_NUL)
    # The key store checks the scopes (its 422 names the field "scopes", as clients
    # know it); the document lists them.
    scopes: list[str] = Field(
        min_length=1, json_schema_extra={"items": {"type": "string", "enum": SCOPE_NAMES}}
    )
    rateLimitRpm: Annotated[int, Field(ge=1, le=1_000_000), JSON_INTEGER] = 60


class UpsertProvider(ProviderSettings):
    model_config = ConfigDict(strict=True)  # merged with the settings file's camelCase config

    # Where to put a new provider (a place past the end is the last); None: last.
    position: Annotated[int, Field(ge=0, le=MAX_PROVIDER_POSITION), JSON_INTEGER] | None = None


class WebchatMessage(WithFiles):
    userId: str = NAME
    channelId: str = Field(default="web", min_length=1, max_length=256, pattern=NAME_PATTERN)
    messageId: str | None = Field(default=None, pattern=ID_PATTERN)


class DecidePermission(Body):
    decision: Literal["allow", "deny"]
    by: str = Field(default="api", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9:._-]+$")


class AddCronTask(Body):
    name: str = Field(min_length=1, max_length=200)
    schedule: CronExpression
    prompt: str = Field(min_length=1, max_length=32_000, pattern=NOT_BLANK)
    timezone: TimeZone | None = None
    description: str = Field(default="", max_length=2000)
    agentId: str | None = Field(default=None, min_length=1, max_length=64)
    enabled: bool = True
    deleteAfterRun: bool = False
    gate: Gate | None = None
    misfire: Literal["skip", "run-once"] = "run-once"
    overlap: Literal["skip", "queue"] = "skip"


class AddHeartbeatTask(Body):
    title: str = Field(min_length=1, max_length=200)
    prompt: str = Field(min_length=1, max_length=32_000, pattern=NOT_BLANK)
    id: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")
    gate: Gate | None = None
    overwrite: bool = False


class RunHeartbeat(Body):
    ids: list[str] | None = Field(default=None, max_length=1000)

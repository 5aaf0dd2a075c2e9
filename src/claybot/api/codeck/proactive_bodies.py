"""The proactive agents' request bodies as the API takes and documents them.

``claybot.proactive.inputs`` checks names, schedules, zones and objectives in
validators, which a JSON schema cannot see, and takes integers strictly (refusing
``5000.0``, which JSON Schema counts as an integer). These subclasses keep every
validator and give the fields the same rules as schema keywords and the shared
components, so the document says what the service accepts; only the integers are
taken as JSON has them. The names stay the parents', as do the components.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, GetJsonSchemaHandler, JsonValue
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from claybot.proactive import inputs
from claybot.proactive.models import NAME_MAX_CHARS, OBJECTIVE_MAX_CHARS, RunnerName
from claybot.wire.base import drop_null_default
from claybot.wire.bodies import JSON_INTEGER, CronExpression, TimeZone


def character_class(codes: list[int]) -> str:
    """The inside of ``[...]`` for these code points, runs written as ranges."""
    parts: list[str] = []
    start = previous = codes[0]
    for code in [*codes[1:], -1]:
        if code != previous + 1:
            last = "" if start == previous else f"-\\u{previous:04x}"
            parts.append(f"\\u{start:04x}{last}")
            start = code
        previous = code
    return "".join(parts)


# Every character str.strip() removes, spelled out: regex engines disagree on "\s"
# (Python counts \x1c-\x1f and \x85, ECMAScript and Rust do not). Written out rather
# than computed from all 1.1 million code points at import (100 ms of every start);
# tests/ipc/test_proactive_bodies.py computes it and compares.
WHITESPACE = (
    "\\u0009-\\u000d\\u001c-\\u0020\\u0085\\u00a0\\u1680\\u2000-\\u200a"
    "\\u2028-\\u2029\\u202f\\u205f\\u3000"
)
_SPACE = f"[{WHITESPACE}]"
_CONTROL = "\\u0000-\\u001f\\u007f"
# A name is not blank and has no control characters once stripped.
NAME_PATTERN = (
    f"^{_SPACE}*[^{WHITESPACE}{_CONTROL}](?:[^{_CONTROL}]*[^{WHITESPACE}{_CONTROL}])?{_SPACE}*$"
)
# An objective and a cwd are not blank and have no NUL.
NOT_BLANK_PATTERN = f"^[^\\u0000]*[^{WHITESPACE}\\u0000][^\\u0000]*$"
# The claude runner (the default) would read an objective's leading dash as an option.
RUNNER_RULE: list[JsonValue] = [
    {"required": ["runner"], "properties": {"runner": {"const": "engine"}}},
    {"properties": {"objective": {"pattern": f"^{_SPACE}*[^{WHITESPACE}\\u0000-][^\\u0000]*$"}}},
]

Name = Annotated[
    str,
    Field(min_length=1, max_length=NAME_MAX_CHARS, json_schema_extra={"pattern": NAME_PATTERN}),
]
Objective = Annotated[
    str,
    Field(
        min_length=1,
        max_length=OBJECTIVE_MAX_CHARS,
        json_schema_extra={"pattern": NOT_BLANK_PATTERN},
    ),
]
Cwd = Annotated[
    str,
    Field(
        max_length=inputs.CWD_MAX_CHARS,
        description="The agent's working directory: an existing directory inside the "
        "workspace (settings: proactive.workspace), absolute or relative to it",
        json_schema_extra={"pattern": NOT_BLANK_PATTERN},
    ),
]
TimeoutMs = Annotated[int, Field(ge=inputs.TIMEOUT_MS_MIN, le=inputs.TIMEOUT_MS_MAX), JSON_INTEGER]
MaxRetries = Annotated[int, Field(ge=1, le=inputs.MAX_RETRIES_MAX), JSON_INTEGER]


class _NullRefused:
    """``None`` is a field left out; sent as a value it is refused, so the document shows
    no null (unlike ``SkipJsonSchema[None]``, this keeps the errors' field paths plain)."""

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        variants = [v for v in schema.get("anyOf", []) if v != {"type": "null"}]
        if "anyOf" in schema and len(variants) == 1:
            schema = {**{k: v for k, v in schema.items() if k != "anyOf"}, **variants[0]}
        return schema


NULL_REFUSED = _NullRefused()


# A field left out keeps the agent's value; null is refused.
LEFT_OUT = Field(default=None, json_schema_extra=drop_null_default)


class CreateAgentInput(inputs.CreateAgentInput):
    model_config = ConfigDict(json_schema_extra={"anyOf": RUNNER_RULE})

    name: Name
    objective: Objective
    schedule: CronExpression
    cwd: Cwd | None = None
    timeoutMs: TimeoutMs | None = None
    maxRetries: MaxRetries | None = None
    timezone: TimeZone | None = None


class UpdateAgentInput(inputs.UpdateAgentInput):
    """Only the fields present change; ``null`` is refused except for ``model`` (the default)."""

    # The rule holds when the request names the runner; otherwise the agent's decides.
    model_config = ConfigDict(json_schema_extra={"anyOf": RUNNER_RULE})

    name: Annotated[Name | None, NULL_REFUSED] = LEFT_OUT
    objective: Annotated[Objective | None, NULL_REFUSED] = LEFT_OUT
    schedule: Annotated[CronExpression | None, NULL_REFUSED] = LEFT_OUT
    cwd: Annotated[Cwd | None, NULL_REFUSED] = LEFT_OUT
    timeoutMs: Annotated[TimeoutMs | None, NULL_REFUSED] = LEFT_OUT
    maxRetries: Annotated[MaxRetries | None, NULL_REFUSED] = LEFT_OUT
    timezone: Annotated[TimeZone | None, NULL_REFUSED] = LEFT_OUT
    runner: Annotated[RunnerName | None, NULL_REFUSED] = LEFT_OUT

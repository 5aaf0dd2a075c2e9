"""The service's TypedDicts and the wire models they feed name the same fields, in order.

The routes validate the one into the other, and the WebSocket sends the TypedDicts as
they are: a field added to one and not the other would reach one kind of client only.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from claybot.proactive.inputs import UpdateAgentInput
from claybot.proactive.models import (
    AgentDetail,
    AgentSummary,
    ExecutionRecord,
    ExecutionResult,
    RunQueued,
)
from claybot.wire.proactive import (
    Execution,
    ProactiveAgentDetail,
    ProactiveAgentSummary,
    ProactiveRunQueued,
)


@pytest.mark.parametrize(
    ("typed", "model", "added"),
    [
        (AgentSummary, ProactiveAgentSummary, []),
        (AgentDetail, ProactiveAgentDetail, []),
        (ExecutionRecord, Execution, []),
        (RunQueued, ProactiveRunQueued, ["ok", "agentId"]),
    ],
)
def test_typed_answers_name_the_wire_fields_in_order(
    typed: Any, model: type[BaseModel], added: list[str]
) -> None:
    assert [*added, *typed.__annotations__] == list(model.model_fields)


def test_an_execution_has_an_error_only_on_failure() -> None:
    base: dict[str, Any] = {"executionId": "e", "agentId": "a", "startedAt": 1,
                            "completedAt": 2, "durationMs": 1, "exitCode": 0,
                            "outputLines": 3}  # fmt: skip
    ok = ExecutionResult(**base, result="success").to_wire()
    failed = ExecutionResult(**base, result="failure", error="boom").to_wire()
    assert "error" not in ok
    assert failed["error"] == "boom"
    assert list(failed) == list(Execution.model_fields)


def test_changes_hold_only_the_fields_sent() -> None:
    assert UpdateAgentInput.model_validate({}).changes() == {}
    assert UpdateAgentInput.model_validate({"model": None, "timeoutMs": 5000}).changes() == {
        "model": "",
        "timeoutMs": 5000,
    }
    everything = {"name": "n", "objective": "o", "schedule": "0 9 * * *", "cwd": "sub",
                  "model": "opus", "timeoutMs": 5000, "maxRetries": 2,
                  "timezone": "Europe/Paris", "runner": "engine"}  # fmt: skip
    assert UpdateAgentInput.model_validate(everything).changes() == everything

"""What the OpenAPI document says, read from a started engine's app in-process.

The conformance test checks the document against the API's answers; these pin the
promises a client reads from it directly.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from claybot.api.openai_errors import is_openai_path
from claybot.engine.engine import Engine
from claybot.providers.base import ProviderType
from claybot.providers.scripted import create as create_scripted
from claybot.scheduling.schedule import CronSchedule

Document = dict[str, Any]
ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
# codeck's web client reads ``error`` as text on the paths it calls (codeck_errors.py).
CODECK_ERROR_REF = {"$ref": "#/components/schemas/CodeckError"}


@pytest.fixture
async def document(api: httpx.AsyncClient) -> Document:
    response = await api.get("/openapi.json")
    assert response.status_code == 200
    spec: Document = response.json()
    return spec


def responses(document: Document, method: str, path: str) -> dict[str, Any]:
    operation: dict[str, Any] = document["paths"][path][method]
    answers: dict[str, Any] = operation["responses"]
    return answers


def test_the_error_body_is_a_component(document: Document) -> None:
    schemas = document["components"]["schemas"]
    assert schemas["ErrorBody"]["required"] == ["ok", "error"]
    ok = schemas["ErrorBody"]["properties"]["ok"]
    assert (ok["type"], ok["const"]) == ("boolean", False)
    detail = schemas["ErrorDetail"]
    assert detail["required"] == ["code", "message"]
    assert detail["properties"]["field"]["type"] == "string"  # left out, never null


@pytest.mark.parametrize(
    ("method", "path", "statuses"),
    [
        ("get", "/v1/engine/agents/{agentId}/history", {"404", "422"}),
        ("post", "/v1/engine/messages", {"400", "413", "422", "503"}),
        ("post", "/v1/engine/plugins/load", {"400", "404", "409", "413", "422", "502"}),
        ("delete", "/v1/engine/providers/{providerId}", {"404"}),
        ("post", "/v1/engine/keys", {"400", "413", "422", "503"}),
        ("post", "/v1/engine/permissions/{requestId}", {"404", "409", "422"}),
        ("post", "/v1/engine/heartbeat/tasks", {"409", "413", "422"}),
        ("delete", "/v1/engine/cron/tasks/{taskId}", {"404"}),
        ("post", "/api/agents", {"409", "413", "422", "503"}),
        ("post", "/api/agents/{agentId}/execute", {"404", "409"}),
        ("post", "/api/auth/login", {"401", "403", "422", "429"}),
        ("get", "/api/files", {"404", "422"}),
    ],
)
def test_routes_list_the_errors_they_answer(
    document: Document, method: str, path: str, statuses: set[str]
) -> None:
    answers = responses(document, method, path)
    assert statuses <= set(answers), sorted(answers)
    shape = CODECK_ERROR_REF if path.startswith("/api/") else ERROR_REF
    for status in statuses | {"500"}:
        assert answers[status]["content"]["application/json"]["schema"] == shape


def test_a_text_route_answers_its_errors_in_json(document: Document) -> None:
    answers = responses(document, "get", "/api/agents/{agentId}/logs")
    assert set(answers["200"]["content"]) == {"text/plain"}
    assert answers["404"]["content"] == {"application/json": {"schema": CODECK_ERROR_REF}}


def test_the_metrics_are_text_in_prometheus_format(document: Document) -> None:
    answers = responses(document, "get", "/metrics")
    assert answers["200"]["content"] == {"text/plain": {"schema": {"type": "string"}}}


def test_unavailable_answers_say_when_to_retry(document: Document) -> None:
    answer = responses(document, "post", "/v1/engine/messages")["503"]
    assert answer["headers"]["Retry-After"]["schema"]["type"] == "integer"


def test_no_route_claims_fastapis_validation_error_shape(document: Document) -> None:
    assert "HTTPValidationError" not in document["components"]["schemas"]
    # A route that cannot refuse its input does not claim a 422.
    assert "422" not in responses(document, "get", "/api/agents/{agentId}")


def test_schedules_and_zones_are_shared_components(document: Document) -> None:
    schemas = document["components"]["schemas"]
    cron = schemas["CronExpression"]
    # The language is stated in words under a format name; the engine (cronsim) judges.
    assert cron["type"] == "string" and cron["format"] == "cron"
    assert "day-of-week" in cron["description"] and "none of the months" in cron["description"]
    assert all(CronSchedule.parse(example) for example in cron["examples"])
    assert "Europe/Paris" in schemas["TimeZone"]["enum"]
    schedule = {"$ref": "#/components/schemas/CronExpression"}
    zone = {"$ref": "#/components/schemas/TimeZone"}
    cron_task = schemas["AddCronTask"]["properties"]
    assert cron_task["schedule"] == schedule
    assert cron_task["timezone"]["anyOf"][0] == zone
    create = schemas["CreateAgentInput"]["properties"]
    assert create["schedule"] == schedule
    assert create["timezone"]["anyOf"][0] == zone


def provider_types(document: Document) -> list[list[str]]:
    """The types the two ways of naming one allow: ``type``, or ``id`` without a type."""
    rule = document["components"]["schemas"]["UpsertProvider"]["anyOf"]
    return [rule[0]["properties"]["type"]["enum"], rule[1]["properties"]["id"]["enum"]]


def test_a_provider_names_a_registered_type(document: Document) -> None:
    builtin = ["anthropic", "local", "openai", "scripted"]
    assert provider_types(document) == [builtin, builtin]


async def test_a_type_a_plugin_registers_is_in_the_next_document(
    engine: Engine, api: httpx.AsyncClient, document: Document
) -> None:
    assert "echo-plugin" not in provider_types(document)[0]
    engine.provider_registry.register(ProviderType("echo-plugin", "Echo", create_scripted))
    again = (await api.get("/openapi.json")).json()
    assert "echo-plugin" in provider_types(again)[0]
    engine.provider_registry.unregister("echo-plugin")
    assert "echo-plugin" not in provider_types((await api.get("/openapi.json")).json())[0]


def test_a_proactive_edit_documents_no_null(document: Document) -> None:
    edit = document["components"]["schemas"]["UpdateAgentInput"]
    for name, field in edit["properties"].items():
        nullable = {"type": "null"} in field.get("anyOf", [])
        assert nullable == (name == "model"), name  # null means the default model
    assert edit["properties"]["timeoutMs"]["type"] == "integer"


def test_a_claude_objective_may_not_start_with_a_dash(document: Document) -> None:
    create = document["components"]["schemas"]["CreateAgentInput"]
    engine_runner, claude = create["anyOf"]
    assert engine_runner == {"required": ["runner"], "properties": {"runner": {"const": "engine"}}}
    assert "-]" in claude["properties"]["objective"]["pattern"]


# Server-sent event streams: their frames are described in words (README), not a schema.
STREAMS = {"/v1/engine/events", "/v1/engine/webchat/events"}


SCHEMAS = "#/components/schemas/"


def resolve(document: Document, schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].removeprefix(SCHEMAS)]
    return schema


def test_every_json_answer_has_a_schema_that_names_its_fields(document: Document) -> None:
    described = []
    for path, operations in document["paths"].items():
        if path in STREAMS:
            continue
        for method, operation in operations.items():
            for status, answer in operation["responses"].items():
                if not status.startswith("2"):
                    continue
                for media_type, content in answer["content"].items():
                    if media_type == "text/event-stream" and "properties" in content["schema"]:
                        # One event, as OpenAPI before 3.2 describes a stream: its data.
                        event = content["schema"]
                        assert event["properties"]["data"]["type"] == "string", path
                        assert event["required"] == ["data"], path
                        continue
                    if media_type != "application/json":  # text, event streams, files
                        assert content["schema"] == {"type": "string"}, (path, media_type)
                        continue
                    schema = resolve(document, content["schema"])
                    where = f"{method.upper()} {path} {status}"
                    assert schema.get("type") == "object", where
                    assert schema.get("properties"), f"{where}: a bare object"
                    if path.startswith("/api/v1/") or is_openai_path(path):
                        # Seed 002's and OpenAI's answers carry no `ok` (their clients read none).
                        continue
                    assert schema["properties"]["ok"]["const"] is True, where
                    assert "ok" in schema["required"], where
                    described.append(where)
    assert len(described) >= 40  # every route of the API, not a few that happened to match


def test_the_openai_door_documents_openais_error_shape_and_its_stream(document: Document) -> None:
    error_ref = {"$ref": "#/components/schemas/OpenAIError"}
    answers = responses(document, "post", "/v1/chat/completions")
    for status in ("400", "404", "413", "500", "503", "504", "507"):
        assert answers[status]["content"]["application/json"]["schema"] == error_ref, status
    detail = document["components"]["schemas"]["OpenAIErrorDetail"]
    assert set(detail["required"]) == {"message", "type", "param", "code"}
    ok = answers["200"]["content"]
    assert ok["application/json"]["schema"] == {"$ref": "#/components/schemas/ChatCompletion"}
    assert ok["text/event-stream"]["schema"]["properties"]["data"]["type"] == "string"
    assert (
        responses(document, "get", "/v1/models/{model}")["404"]["content"]["application/json"][
            "schema"
        ]
        == error_ref
    )

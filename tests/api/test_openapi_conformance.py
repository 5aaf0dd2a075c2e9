"""The engine API against its own OpenAPI document: every operation, every schemathesis check.

Schemathesis reads ``/openapi.json`` from the app in-process, generates requests
from it (valid ones, and invalid ones that must be refused), sends them to the same
app over ASGI, and checks each answer against the document: its status is listed,
its body and headers match, a valid request is not refused, an invalid one is not
accepted, an undeclared method gets 405 with ``Allow``, no answer is a 5xx.

The engine is real and started, on a temporary home, with the echo provider. Seed
002's routes (``/api/v1``) run twice: with the job database on the home's SQLite, as
every route does, and on PostgreSQL.
Schemathesis calls the app on an event loop of its own (one thread for the whole
run) and runs the app's lifespan there before each operation's test, ending it
after: so the app given to it starts a fresh ``Engine`` in its lifespan, on that
loop, which the engine's tasks and locks need. Each engine opens the same home, so
what one operation created (agents, tasks, keys) is there for the next, as after
a restart.

Every operation of the document is run but the two event streams (see below). The
proactive agents' WebSocket is not an operation of the document (OpenAPI has no
WebSocket), and POST /v1/engine/shutdown is run: ``create_app`` is given no
``request_shutdown`` here, so it answers without stopping anything.

Every JSON answer is also checked against a copy of the document in which the
response models allow no undeclared field (they allow them in the real one, so a
field added below the API still reaches clients): a field the engine sends and the
document does not name fails here.

Generation is deterministic (``derandomize``, no example database), so a failure
is reproduced by running the test again.

Each operation runs three phases: its documented examples, the coverage phase (each
bound of each field, one step past it, and each kind of invalid value, once), and
25 generated cases. The coverage phase sends large numbers only where the document
states a maximum: with none, ``offset`` was sent 0, 1 and -1, never 2**64, which
reached the database and was a 500. So every integer or number a request carries
must have both bounds (``test_every_number_a_request_carries_is_bounded``), and then
the coverage phase sends each maximum (to be answered) and one past it (refused).
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, reject, settings
from starlette.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

from claybot.api.jobs.routes import UPLOAD_PATH
from claybot.api.seed_errors import SEED_PREFIX
from claybot.config.home import HomePaths
from claybot.engine.engine import Engine, EngineOptions
from claybot.scheduling.schedule import CRON_FORMAT
from claybot.server.app import create_app
from tests.conftest import ECHO_SETTINGS, write_settings
from tests.cron.expressions import CRON_EXPRESSIONS
from tests.databases import create_postgres_database, drop_postgres_database

pytestmark = pytest.mark.timeout(180)

# Per operation, for the fuzzing phase; the examples and coverage phases add their own
# cases (each boundary and each kind of invalid input once).
MAX_EXAMPLES = 25

CONFIG = schemathesis.Config.from_str(
    """
[checks]
enabled = true

[generation]
deterministic = true
database = "none"
"""
)


class EngineUnderTest:
    """The engine API as an ASGI app whose lifespan starts a fresh ``Engine`` on ``home``
    (created by the first engine's start, removed after the module's last test);
    ``env``: the engine's environment, which names its database (none: the home's
    SQLite, and the process's environment)."""

    def __init__(self, home: HomePaths) -> None:
        self.home = home
        self.env: dict[str, str] | None = None
        self.engine = Engine(home, self._options())
        self.app: ASGIApp = create_app(self.engine)

    def _options(self) -> EngineOptions:
        # No fsync: this is about what the API answers, and thousands of requests write files.
        if self.env is None:
            return EngineOptions(port=0, durable=False)
        return EngineOptions(port=0, durable=False, env=self.env)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # Providers and plugins an operation added are left behind: a provider
                # made first could send the next operation's turns to the local model.
                write_settings(self.home, ECHO_SETTINGS)
                # An engine starts once; the next operation's lifespan gets a new one.
                self.engine = Engine(self.home, self._options())
                self.app = create_app(self.engine)
                await self.engine.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.engine.stop(drain_timeout_s=2)
                await send({"type": "lifespan.shutdown.complete"})
                return


# Schedules: the document names their format and states the language in words, as no
# pattern says it whole; a valid one is generated here (and cronsim judges it).
schemathesis.openapi.format(CRON_FORMAT, CRON_EXPRESSIONS)

TEMP = Path(tempfile.gettempdir())
APP = EngineUnderTest(HomePaths(TEMP / f"cb-openapi-{os.getpid()}"))
# The document the app serves, read in-process without its lifespan (from_asgi would
# run it, starting an engine while tests are only being collected); the document
# needs no started engine.
DOCUMENT: dict[str, Any] = TestClient(APP).get("/openapi.json").json()
schema = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG).exclude(
    # Server-sent event streams never end, so a generated request could only be cut
    # off by a timeout; tests/api/test_socket_api.py and the SSE tests cover them.
    path=["/v1/engine/events", "/v1/engine/webchat/events"],
)
schema.app = APP  # requests go to the app in-process, as with from_asgi

# Seed 002's routes again with the job database on PostgreSQL, which refuses what
# SQLite stores (a NUL character, a string longer than its column, an integer past
# 64 bits) and which the job store is meant for when engines and workers scale out.
ON_POSTGRES = EngineUnderTest(HomePaths(TEMP / f"cb-openapi-pg-{os.getpid()}"))
seed_schema = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG).include(
    path_regex=f"^{SEED_PREFIX}/"
)
seed_schema.app = ON_POSTGRES


PROACTIVE_BODIES = {"/api/agents", "/api/agents/{agentId}"}
FILE_UPLOADS = {UPLOAD_PATH, "/v1/engine/files"}  # multipart, with a part named "file"
CHAT = "/v1/chat/completions"


def closed_components(document: dict[str, Any]) -> dict[str, Any]:
    """The document's schemas with every response model closed to undeclared fields.

    Response models are the components that say ``additionalProperties: true`` and
    list properties; open maps (settings, options) list none and stay open.
    """
    schemas = copy.deepcopy(document["components"]["schemas"])
    for component in schemas.values():
        if component.get("additionalProperties") is True and component.get("properties"):
            component["additionalProperties"] = False
    return {"schemas": schemas}


CLOSED = closed_components(DOCUMENT)


def assert_every_field_is_documented(case: Any, response: Any) -> None:
    if not 200 <= response.status_code < 300:
        return
    answers = DOCUMENT["paths"][case.operation.path][case.operation.method.lower()]["responses"]
    content = answers[str(response.status_code)].get("content", {})
    media_type = response.headers.get("content-type", [""])[0]
    if "application/json" not in content or not media_type.startswith("application/json"):
        return  # a text answer, or an event stream (its events' schema is checked above)
    closed = {**content["application/json"]["schema"], "components": CLOSED}
    jsonschema.Draft202012Validator(closed).validate(response.json())


# Integers whose size no bound needs: compared in memory with the event bus's ids,
# never sent to a database (and the stream is not run above: it never ends).
UNBOUNDED = {("GET", "/v1/engine/events", "query.since")}


def numbers_without_bounds(schema: Any, where: str, seen: frozenset[str]) -> Iterator[str]:
    """Where, in a request's schema, an integer or a number lacks a minimum or a maximum,
    or an integer's bounds reach past what a signed 64-bit column holds."""
    if not isinstance(schema, dict):
        return
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name not in seen:
            component = DOCUMENT["components"]["schemas"][name]
            yield from numbers_without_bounds(component, where, seen | {name})
        return
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "integer" in kinds or "number" in kinds:
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        if low is None or high is None:
            yield f"{where}: no {'minimum' if low is None else 'maximum'}"
        elif "integer" in kinds and not -(2**63) <= low <= high <= 2**63 - 1:
            yield f"{where}: [{low}, {high}] is past 64 bits"
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(key, []):
            yield from numbers_without_bounds(branch, where, seen)
    for name, field in schema.get("properties", {}).items():
        yield from numbers_without_bounds(field, f"{where}.{name}", seen)
    for key in ("items", "additionalProperties"):
        yield from numbers_without_bounds(schema.get(key), f"{where}[]", seen)


def test_every_number_a_request_carries_is_bounded() -> None:
    found = []
    for path, operations in DOCUMENT["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                name = f"{parameter['in']}.{parameter['name']}"
                if (method.upper(), path, name) not in UNBOUNDED:
                    found += numbers_without_bounds(
                        parameter["schema"], f"{method.upper()} {path} {name}", frozenset()
                    )
            for media_type, content in operation.get("requestBody", {}).get("content", {}).items():
                where = f"{method.upper()} {path} body ({media_type})"
                found += numbers_without_bounds(content.get("schema"), where, frozenset())
    assert found == []


@pytest.fixture(scope="module", autouse=True)
def _remove_homes() -> Iterator[None]:
    yield
    for app in (APP, ON_POSTGRES):
        shutil.rmtree(app.home.home, ignore_errors=True)


@pytest.fixture(scope="module")
def job_database_on_postgres() -> Iterator[None]:
    """A PostgreSQL database for ON_POSTGRES's engines (the same one for each, as their
    home is), dropped after the module's last test."""
    url = create_postgres_database()
    ON_POSTGRES.env = {"PATH": "/usr/bin:/bin", "CLAYBOT_DATABASE_URL": url}
    yield
    drop_postgres_database(url)


SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@schema.parametrize()
@SETTINGS
def test_every_operation_conforms_to_the_document(case: Any) -> None:
    call_and_check(case)


@pytest.mark.postgres
@seed_schema.parametrize()
@SETTINGS
def test_seed_002s_operations_conform_on_postgresql(
    case: Any, job_database_on_postgres: None
) -> None:
    call_and_check(case)


def call_and_check(case: Any) -> None:
    """Send the case (made sendable where the document cannot say all) and check the
    answer, and that its JSON names no field the document does not."""
    if (
        case.operation.path in PROACTIVE_BODIES
        and case.meta.generation.mode.is_positive
        and isinstance(case.body, dict)
        and "cwd" in case.body
    ):
        # A proactive agent's cwd must be an existing directory inside the workspace:
        # state no schema can describe (the document says it in words). A valid body
        # gets the workspace itself, so the rest of it is what is tested.
        case.body["cwd"] = "."
    if (
        case.operation.path in FILE_UPLOADS
        and not case.meta.generation.mode.is_positive
        and isinstance(case.body, dict)
        and "file" in case.body
        and not isinstance(case.body["file"], str | bytes)
    ):
        # A multipart part is bytes: a "file" generated as null or a number goes as its
        # text (`null`), which is a valid file. The invalid request cannot be sent.
        reject()
    if (
        case.operation.path == CHAT
        and case.meta.generation.mode.is_positive
        and isinstance(case.body, dict)
        and isinstance(case.body.get("messages"), list)
    ):
        # Said to the agent are the user messages after the last assistant message, and
        # the model names an agent: what no schema can describe (the document says it in
        # words). A valid body ends with something to say to the caller's own agent, so
        # the rest of it is what is tested.
        ending = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "hello"}]
        if case.body["messages"][-2:] != ending:  # a case is called again as it is shrunk
            case.body["messages"] = [*case.body["messages"], *ending]
        case.body["model"] = "claybot"
    response = case.call_and_validate()
    assert_every_field_is_documented(case, response)

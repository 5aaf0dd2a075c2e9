"""The original ClayBot's own clients (seeds 000, 001 and 003) against a real engine.

The original is ``ex3ndr/claybot`` before it became daycare: revision ``df77cba``, the
parent of the rename (6d2b4e9); the clients' calls are the same since the seeds'
revision (c1931c0), with fields added. Paths below are that repository's, under
``packages/claybot/sources/`` (the CLI) and ``packages/claybot-dashboard/`` (the
dashboard).

- The CLI talks to the engine with Node's ``http.request`` on the Unix socket
  (``engine/ipc/client.ts``): ``requestSocket`` sends ``Host: localhost`` and
  ``Connection: keep-alive``, a JSON body chunked (``Transfer-Encoding: chunked``) and
  a POST without one with ``Content-Length: 0``, and reads the status code and the body.
  ``node_request`` below writes those bytes, as Node writes them, on the socket.
- The dashboard's browser code fetches ``/api/v1/engine/...`` and opens an
  ``EventSource`` there; its route ``app/api/[...path]/route.ts`` sends the request on to
  the socket (``lib/engine-socket.ts``) as ``/v1/engine/...`` with the browser's headers
  (less ``host``) and hands back the status, headers and body as they come. The tests
  send what that proxy sends (``PROXY_HEADERS``) and read the answer as the page does:
  ``response.ok``, then the JSON's wrapper field, then the fields each page reads, with
  the types it uses them as (a string it splits, an array whose ``length`` it takes, a
  value React renders, which must not be an object). The event stream is parsed as
  ``EventSource`` parses it, and only what reaches ``onmessage`` counts.

The history that holds a tool result is a real one: the scripted provider asks for a
real tool (``list_agents``) and the engine runs it.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h11
import pytest

from claybot.config.home import HomePaths
from tests.conftest import EngineProcess, write_settings

pytestmark = pytest.mark.slow

TOOL_TEXT = "please use a tool"
SPAWN_TEXT = "please spawn a helper"
RULES: list[dict[str, Any]] = [
    {
        "match": TOOL_TEXT,
        "response": {"toolCalls": [{"id": "call_list", "name": "list_agents", "arguments": {}}]},
    },
    {
        "match": SPAWN_TEXT,
        "response": {
            "toolCalls": [
                {
                    "id": "call_spawn",
                    "name": "start_background_agent",
                    "arguments": {"name": "helper", "prompt": "say done"},
                }
            ]
        },
    },
    {"match": "", "response": "done"},
]
SETTINGS: dict[str, Any] = {
    "providers": [{"id": "scripted", "model": "rules", "options": {"rules": RULES}}]
}

# What the dashboard's proxy sends on besides the path: the browser's headers (those of
# fetch() and of EventSource in a same-origin page), Next's forwarding headers; Node
# then adds Host and Connection. No ``host``: the proxy drops it.
PROXY_HEADERS: tuple[tuple[str, str], ...] = (
    ("accept", "*/*"),
    ("accept-encoding", "gzip, deflate, br, zstd"),
    ("accept-language", "en-US,en;q=0.9"),
    ("connection", "keep-alive"),
    ("referer", "http://localhost:7331/agents"),
    ("sec-fetch-dest", "empty"),
    ("sec-fetch-mode", "cors"),
    ("sec-fetch-site", "same-origin"),
    ("user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/126.0"),
    ("x-forwarded-for", "::1"),
    ("x-forwarded-host", "localhost:7331"),
    ("x-forwarded-port", "7331"),
    ("x-forwarded-proto", "http"),
)
EVENT_SOURCE_HEADERS: tuple[tuple[str, str], ...] = (
    ("accept", "text/event-stream"),
    ("cache-control", "no-cache"),
    *((name, value) for name, value in PROXY_HEADERS if name != "accept"),
)
JSON_HEADERS = (("Content-Type", "application/json"),)  # client.ts: setAuth, loadPlugin...


# -- Node's http.request on a Unix socket ---------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def ok(self) -> bool:
        """``response.ok`` (fetch), and the CLI's ``statusCode >= 200 && < 300``."""
        return 200 <= self.status < 300

    def json(self) -> Any:
        return json.loads(self.body)


def _request_bytes(
    method: str, path: str, headers: Sequence[tuple[str, str]], body: bytes | None
) -> tuple[bytes, h11.Connection]:
    """The request as Node writes it, and an h11 client told the same, to read the answer."""
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
    lines += ["Host: localhost", "Connection: keep-alive"]
    framing: list[tuple[str, str]] = []
    if body:
        framing = [("Transfer-Encoding", "chunked")]  # write() before end(): chunked
    elif method == "POST":
        framing = [("Content-Length", "0")]  # end() with no body
    lines += [f"{name}: {value}" for name, value in framing]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode()
    if body:
        raw += b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    conn = h11.Connection(h11.CLIENT)
    sent = [*headers, ("Host", "localhost"), *framing]
    conn.send(h11.Request(method=method, target=path, headers=sent))
    if body:
        conn.send(h11.Data(data=body))
    conn.send(h11.EndOfMessage())
    return raw, conn


@contextmanager
def node_stream(
    socket_path: Path,
    method: str,
    path: str,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes | None = None,
    timeout_s: float = 30.0,
) -> Iterator[tuple[h11.Response, Iterator[bytes]]]:
    """The answer's head and its body as it comes, on one connection."""
    raw, conn = _request_bytes(method, path, headers, body)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(socket_path))
        sock.sendall(raw)

        def events() -> Iterator[h11.Event]:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(sock.recv(65536))
                    continue
                yield event
                if isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    return

        stream = events()
        head = next(stream)
        assert isinstance(head, h11.Response), head

        def body_chunks() -> Iterator[bytes]:
            for event in stream:
                if isinstance(event, h11.Data):
                    yield bytes(event.data)

        yield head, body_chunks()


def node_request(
    socket_path: Path,
    method: str,
    path: str,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes | None = None,
) -> Reply:
    with node_stream(socket_path, method, path, headers, body) as (head, chunks):
        data = b"".join(chunks)
    answer_headers = {k.decode().lower(): v.decode() for k, v in head.headers}
    return Reply(head.status_code, answer_headers, data)


def cli_json(value: Any) -> bytes:
    """``JSON.stringify`` of the CLI's body (its ``undefined`` fields left out)."""
    return json.dumps({k: v for k, v in value.items() if v is not None}).encode()


def dashboard_get(engine: EngineProcess, browser_path: str) -> Reply:
    """``fetch(browser_path)`` through the dashboard's proxy: ``/api`` is its route's."""
    assert browser_path.startswith("/api/")
    return node_request(engine.paths.socket, "GET", browser_path[4:], PROXY_HEADERS)


def fetch_json(engine: EngineProcess, browser_path: str) -> Any:
    """``fetchJSON`` (lib/engine-client.ts:131): throws unless ``response.ok``."""
    reply = dashboard_get(engine, browser_path)
    assert reply.ok, (reply.status, reply.body)
    assert "content-encoding" not in reply.headers  # the proxy passes the bytes as they are
    return reply.json()


# -- EventSource, as a browser parses the stream ---------------------------------------------


LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass
class EventSourceParser:
    """The WHATWG event stream interpretation: fields, ``data`` lines joined, an event
    dispatched on a blank line, of type ``message`` unless ``event`` named another
    (``onmessage`` sees only those)."""

    decoder: Any = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")())
    pending: str = ""
    data: list[str] = field(default_factory=list)
    event_type: str = ""
    last_event_id: str = ""

    def feed(self, chunk: bytes) -> list[tuple[str, str, str]]:
        """The events ``chunk`` completes: (type, data, lastEventId)."""
        text = self.pending + self.decoder.decode(chunk)
        parts, start = [], 0
        for end in LINE_END.finditer(text):
            if end.group() == "\r" and end.end() == len(text):
                break  # may be the first half of a CRLF
            parts.append(text[start : end.start()])
            start = end.end()
        self.pending = text[start:]
        dispatched = []
        for line in parts:
            if line == "":
                if self.data:
                    dispatched.append(
                        (self.event_type or "message", "\n".join(self.data), self.last_event_id)
                    )
                self.data, self.event_type = [], ""
                continue
            if line.startswith(":"):
                continue  # a comment: a keep-alive
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                self.data.append(value)
            elif name == "event":
                self.event_type = value
            elif name == "id" and "\0" not in value:
                self.last_event_id = value
        return dispatched


@contextmanager
def event_source(
    engine: EngineProcess, last_event_id: str | None = None
) -> Iterator[Iterator[tuple[dict[str, Any], str]]]:
    """``new EventSource("/api/v1/engine/events")`` through the proxy: what its
    ``onmessage`` gets, ``JSON.parse(event.data)``, with the stream's lastEventId."""
    headers = list(EVENT_SOURCE_HEADERS)
    if last_event_id is not None:
        headers.append(("last-event-id", last_event_id))  # what a reconnect sends
    with node_stream(engine.paths.socket, "GET", "/v1/engine/events", headers) as (
        head,
        chunks,
    ):
        assert head.status_code == 200
        content_type = dict(head.headers)[b"content-type"].decode()
        assert content_type.split(";")[0].strip() == "text/event-stream"

        def messages() -> Iterator[tuple[dict[str, Any], str]]:
            parser = EventSourceParser()
            for chunk in chunks:
                for kind, data, last_id in parser.feed(chunk):
                    if kind == "message":  # onmessage; a named event goes elsewhere
                        yield json.loads(data), last_id

        yield messages()


def until(
    messages: Iterator[tuple[dict[str, Any], str]], event_type: str
) -> tuple[dict[str, Any], str]:
    """The next event of ``event_type``, and the stream's lastEventId after it."""
    for message, last_id in messages:
        if message["type"] == event_type:
            return message, last_id
    raise AssertionError(f"the stream ended before a {event_type!r} event")


# -- what the pages do with the values they read ---------------------------------------------


def renderable(value: Any) -> bool:
    """A value React renders as a child: a string or number (or nothing); an object or
    array of objects throws ("Objects are not valid as a React child")."""
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_status_as_dashboard_reads_it(status: dict[str, Any]) -> None:
    """``components/dashboard.tsx`` (161-211), ``connectors/page.tsx`` (35-49, 113-129),
    ``providers/page.tsx`` (36-41, 106-139), ``tools/page.tsx`` (36-49): ``.length`` of
    each list, and the fields of each entry."""
    for plugin in status["plugins"]:
        assert isinstance(plugin["id"], str) and isinstance(plugin["pluginId"], str)
        assert isinstance(plugin["name"], str)
    for connector in status["connectors"]:
        assert isinstance(connector["id"], str) and isinstance(connector["name"], str)
        assert isinstance(connector["loadedAt"], str)  # new Date(connector.loadedAt)
        assert renderable(connector.get("pluginId"))
    for key in ("inferenceProviders", "imageProviders"):
        for provider in status[key]:
            assert isinstance(provider["id"], str) and isinstance(provider["name"], str)
            assert renderable(provider.get("label"))
    assert isinstance(status["tools"], list)
    for tool in status["tools"]:
        assert isinstance(tool, str)  # tool.split(".")


def check_agent_summary(agent: dict[str, Any]) -> None:
    """``AgentSummary`` as ``agents/page.tsx`` (82, 298-319), ``dashboard.tsx`` (924-972)
    and ``lib/agent-types.ts`` (10-34) read it."""
    assert isinstance(agent["agentId"], str)
    assert is_number(agent["updatedAt"])  # b.updatedAt - a.updatedAt
    assert agent["lifecycle"] in ("active", "sleeping")
    descriptor = agent["descriptor"]
    match descriptor["type"]:
        case "user":
            for key in ("connector", "userId", "channelId"):
                assert isinstance(descriptor[key], str)
        case "cron":
            assert isinstance(descriptor["id"], str)
        case "heartbeat":
            pass
        case "subagent":
            for key in ("id", "parentAgentId", "name"):
                assert isinstance(descriptor[key], str)
        case other:
            raise AssertionError(f"a descriptor type the dashboard shows as system: {other}")


def check_files(files: Any) -> None:
    """``renderFilesSection`` (agents/[agentId]/page.tsx:403-425): ``files.length``, each
    file's ``name``, ``path`` (also the row's key), ``mimeType`` and ``size``."""
    assert isinstance(files, list)
    for file in files:
        assert isinstance(file["name"], str) and isinstance(file["mimeType"], str)
        assert isinstance(file["path"], str) and file["path"]
        assert is_number(file["size"])


def check_record(record: dict[str, Any]) -> None:
    """One history record as ``agents/[agentId]/page.tsx`` reads it: ``recordStats``
    (105-125), ``formatRecordSummary`` (314-341), ``renderRecordDetails`` (343-401),
    ``buildToolResultMeta`` and ``parseToolMessage`` (456-484)."""
    assert is_number(record.get("at")) or record["type"] == "damaged"
    match record["type"]:
        case "user_message":
            assert isinstance(record["text"], str)
            check_files(record["files"])
        case "assistant_message":
            assert isinstance(record["text"], str)
            check_files(record["files"])
            assert isinstance(record["toolCalls"], list)  # toolCalls.length
            for call in record["toolCalls"]:
                assert isinstance(call, dict)
                assert renderable(call.get("id")) and renderable(call.get("name"))
        case "tool_result":
            assert isinstance(record["toolCallId"], str)
            output = record["output"]
            check_files(output["files"])  # record.output.files.length
            message = output["toolMessage"]
            assert isinstance(message, dict)  # Record<string, unknown>, shown as JSON
            for key in ("name", "status", "role", "type"):
                assert renderable(message.get(key))
        case "reset":
            assert renderable(record.get("message"))
        case "note":
            assert isinstance(record["text"], str)  # truncateText(record.text)


# -- the engine ---------------------------------------------------------------------------------


def wait_for(check: Any, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError("timed out")


def post_and_wait(engine: EngineProcess, body: dict[str, Any]) -> str:
    """Post on the local connector and wait for the turn's final record: the agent's id."""
    with engine.client() as client:
        posted = client.post("/v1/engine/messages", json=body)
        assert posted.status_code == 202, posted.text
        agent_id: str = posted.json()["agentId"]
        message_id = posted.json()["messageId"]

        def replied() -> bool:
            records = client.get(f"/v1/engine/agents/{agent_id}/history").json()["records"]
            return any(
                r["type"] == "assistant_message" and r["messageId"] == message_id and r["final"]
                for r in records
            )

        wait_for(replied)
    return agent_id


@dataclass
class World:
    engine: EngineProcess
    tool_agent: str  # its history holds a tool call and its result
    file_agent: str  # its history holds a message with a file
    parent_agent: str  # it started a background agent


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    home = Path(f"/tmp/cb-conf-claybot-{os.getpid()}")
    subprocess.run(["rm", "-rf", str(home)], check=False)
    paths = HomePaths(home)
    write_settings(paths, SETTINGS)
    engine = EngineProcess(paths)
    engine.start()
    try:
        tool_agent = post_and_wait(engine, {"userId": "u1", "channelId": "c", "text": TOOL_TEXT})
        with engine.client() as client:
            uploaded = client.post(
                "/v1/engine/files", files={"file": ("notes.txt", b"some notes\n", "text/plain")}
            )
            assert uploaded.status_code == 201, uploaded.text
            file_id = uploaded.json()["file"]["id"]
        file_agent = post_and_wait(
            engine,
            {
                "userId": "u2",
                "channelId": "c",
                "text": "a file",
                "files": [{"id": file_id, "name": "notes.txt"}],
            },
        )
        parent = post_and_wait(engine, {"userId": "u3", "channelId": "c", "text": SPAWN_TEXT})
        yield World(engine, tool_agent, file_agent, parent)
    finally:
        engine.terminate()
        subprocess.run(["rm", "-rf", str(home)], check=False)


# -- the CLI ------------------------------------------------------------------------------------


def test_cli_status(world: World) -> None:
    """``commands/status.ts:17``: ``GET /v1/engine/status``; a 2xx answer's body is
    ``JSON.parse``d and printed."""
    reply = node_request(world.engine.paths.socket, "GET", "/v1/engine/status")
    assert reply.ok
    assert reply.json()["ok"] is True


def test_cli_start_finds_a_running_engine(world: World) -> None:
    """``commands/start.ts:123`` (``isEngineRunning``): ``GET /v1/engine/status``; a 2xx
    answer means an engine is running."""
    reply = node_request(world.engine.paths.socket, "GET", "/v1/engine/status")
    assert reply.ok


def test_cli_providers_lists_the_connected_providers(world: World) -> None:
    """``commands/providers.ts:140`` (``fetchConnectedProviders``): ``GET
    /v1/engine/status``; reads ``status.providers`` as ids and ``status.inferenceProviders``
    as ``{id, label}``, keeps the inference providers whose id is among those ids and
    offers them to choose the default from."""
    reply = node_request(world.engine.paths.socket, "GET", "/v1/engine/status")
    assert reply.ok
    status = reply.json()["status"]  # `if (!payload?.status) return [];`
    loaded = status["providers"]
    # new Set(providers).has(provider.id): only strings can equal an id in a Set.
    assert all(isinstance(provider_id, str) for provider_id in loaded)
    inference = status["inferenceProviders"]
    connected = [p for p in inference if not loaded or p["id"] in loaded]
    assert [(p["id"], p.get("label")) for p in connected] == [("scripted", "Scripted (rules)")]


def test_cli_auth_set(world: World) -> None:
    """``engine/ipc/client.ts:59`` (``setAuth``, from ``commands/auth.ts:9``): ``POST
    /v1/engine/auth`` with ``{id, key, value}`` as JSON, chunked; any 2xx is success, and
    the value is stored."""
    body = cli_json({"id": "openai", "key": "apiKey", "value": "sk-conformance"})
    reply = node_request(world.engine.paths.socket, "POST", "/v1/engine/auth", JSON_HEADERS, body)
    assert reply.ok, reply.body
    assert b"sk-conformance" not in reply.body
    stored = json.loads(world.engine.paths.auth.read_text())
    assert stored["openai"]["apiKey"] == "sk-conformance"


def test_cli_plugins_load_and_unload(world: World) -> None:
    """``engine/ipc/client.ts:73`` (``loadPlugin``, from ``commands/plugins.ts:8``):
    ``POST /v1/engine/plugins/load`` with ``{pluginId, instanceId}`` (``instanceId`` left
    out when not given); and ``engine/ipc/client.ts:87`` (``unloadPlugin``, from
    ``commands/plugins.ts:15``): ``POST /v1/engine/plugins/unload`` with ``{instanceId}``.
    Any 2xx is success; anything else is thrown with the body."""
    socket_path = world.engine.paths.socket
    load = cli_json({"pluginId": "clock", "instanceId": None})
    reply = node_request(socket_path, "POST", "/v1/engine/plugins/load", JSON_HEADERS, load)
    assert reply.ok, reply.body
    status = node_request(socket_path, "GET", "/v1/engine/status").json()["status"]
    assert [p["id"] for p in status["plugins"]] == ["clock"]
    unload = cli_json({"instanceId": "clock"})
    reply = node_request(socket_path, "POST", "/v1/engine/plugins/unload", JSON_HEADERS, unload)
    assert reply.ok, reply.body
    status = node_request(socket_path, "GET", "/v1/engine/status").json()["status"]
    assert status["plugins"] == []
    again = node_request(socket_path, "POST", "/v1/engine/plugins/unload", JSON_HEADERS, unload)
    assert not again.ok and again.body  # thrown as `new Error(response.body)`


@pytest.fixture
def configured_engine(paths: HomePaths) -> Iterator[tuple[EngineProcess, Path]]:
    """An engine whose settings.json names a socket of its own (``engine.socketPath``)."""
    configured = Path(f"{paths.home}-sock") / "claybot.sock"
    write_settings(paths, {**SETTINGS, "engine": {"socketPath": str(configured)}})
    process = EngineProcess(paths)
    process.start()
    yield process, configured
    if process.process is not None and process.process.poll() is None:
        process.terminate()
    subprocess.run(["rm", "-rf", str(configured.parent)], check=False)


def test_cli_reload_after_editing_settings(
    configured_engine: tuple[EngineProcess, Path],
) -> None:
    """``engine/ipc/client.ts:101`` (``reloadEngine``, from
    ``commands/engineReloadRequest.ts:11``, which ``commands/add.ts:181`` and ``:243``,
    ``commands/remove.ts:116`` and ``:138`` and ``commands/providers.ts:125`` call after
    writing settings.json): ``POST /v1/engine/reload``, no body, on the socket that
    settings.json's ``engine.socketPath`` names; a 2xx answer means the engine runs the
    new settings ("Reloaded engine"), anything else "Restart the engine to apply"."""
    engine, configured = configured_engine
    assert configured.exists()
    settings_path = engine.paths.settings
    original = json.loads(settings_path.read_text())

    def reload() -> Reply:
        return node_request(configured, "POST", "/v1/engine/reload")

    def status() -> dict[str, Any]:
        body: dict[str, Any] = node_request(configured, "GET", "/v1/engine/status").json()
        return body["status"]

    # `claybot add` (a plugin): the entry is written, then the engine reloads.
    added = {"instanceId": "clock", "pluginId": "clock", "enabled": True, "settings": {}}
    settings_path.write_text(json.dumps({**original, "plugins": [added]}))
    assert reload().ok
    assert "current_time" in status()["tools"]
    # `claybot providers` (a default provider first, with its model).
    second = {"id": "backup", "type": "scripted", "model": "echo", "enabled": True}
    first = {**original["providers"][0], "enabled": True}
    settings_path.write_text(
        json.dumps({**original, "plugins": [added], "providers": [second, first]})
    )
    assert reload().ok
    assert status()["providers"] == ["backup", "scripted"]
    # `claybot remove` (the plugin).
    settings_path.write_text(json.dumps({**original, "providers": [second, first]}))
    assert reload().ok
    assert "current_time" not in status()["tools"] and status()["plugins"] == []
    # A settings.json the engine cannot use: not 2xx, and nothing changes.
    settings_path.write_text('{"providers": [{"id": ""}]}')
    refused = reload()
    assert not refused.ok and refused.body
    assert status()["providers"] == ["backup", "scripted"]


def test_cli_start_restarts_a_running_engine(
    configured_engine: tuple[EngineProcess, Path],
) -> None:
    """``commands/start.ts:136`` (``requestEngineShutdown``): ``POST
    /v1/engine/shutdown``, no body; a 2xx answer, then ``start.ts:58``
    (``waitForEngineShutdown``) polls ``GET /v1/engine/status`` until it fails, for 2 s at
    most, before it removes the socket files and starts."""
    engine, configured = configured_engine
    assert configured.exists()
    reply = node_request(engine.paths.socket, "POST", "/v1/engine/shutdown")
    assert reply.ok
    deadline = time.monotonic() + 2.0
    stopped = False
    while time.monotonic() < deadline and not stopped:
        try:
            node_request(engine.paths.socket, "GET", "/v1/engine/status")
        except OSError:
            stopped = True
        time.sleep(0.1)  # start.ts:159, delay(100)
    assert stopped, "the engine still answered 2 s after the shutdown request"
    assert engine.process is not None and engine.process.wait(30) == 0
    assert not configured.exists()  # the engine removed the socket settings.json named


# -- the dashboard ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "page",
    [
        "components/dashboard.tsx:67",
        "app/connectors/page.tsx:21",
        "app/providers/page.tsx:22",
        "app/tools/page.tsx:22",
    ],
)
def test_dashboard_status(world: World, page: str) -> None:
    """``lib/engine-client.ts:140`` (``fetchEngineStatus``), called from each ``page``:
    ``GET /api/v1/engine/status``; the page takes ``data.status`` (``{}`` when missing)
    and shows its plugins, connectors, providers and tools."""
    data = fetch_json(world.engine, "/api/v1/engine/status")
    status = data["status"]
    check_status_as_dashboard_reads_it(status)
    assert [c["id"] for c in status["connectors"]][:1] == ["local"]
    assert [p["id"] for p in status["inferenceProviders"]] == ["scripted"]
    assert {"list_agents", "start_background_agent"} <= set(status["tools"])


@pytest.mark.parametrize("page", ["components/dashboard.tsx:72", "app/automations/page.tsx:23"])
def test_dashboard_cron_tasks(world: World, page: str) -> None:
    """``lib/engine-client.ts:145`` (``fetchCronTasks``), called from ``page``: ``GET
    /api/v1/engine/cron/tasks``; ``data.tasks``, each shown by ``id``, ``name``,
    ``description``/``prompt``, ``schedule``, ``enabled``, ``deleteAfterRun`` and
    ``lastRunAt`` (``dashboard.tsx:696-728``, ``automations/page.tsx:110-126``)."""
    name = re.sub(r"[^A-Za-z0-9]+", " ", page)
    with world.engine.client() as client:
        created = client.post(
            "/v1/engine/cron/tasks",
            json={"name": f"Daily {name}", "schedule": "0 9 * * *", "prompt": "say hi"},
        )
        assert created.status_code == 201, created.text
        task_id = created.json()["task"]["taskId"]
        ran = client.post(f"/v1/engine/cron/tasks/{task_id}/run")
        assert ran.status_code in (200, 202), ran.text

    def listed() -> dict[str, Any] | None:
        tasks = fetch_json(world.engine, "/api/v1/engine/cron/tasks")["tasks"]
        mine = [task for task in tasks if task.get("id") == task_id]
        return mine[0] if mine and mine[0]["lastRunAt"] else None

    task = wait_for(listed)
    assert task["name"] == f"Daily {name}" and task["schedule"] == "0 9 * * *"
    assert isinstance(task["description"], str) and task["prompt"] == "say hi"
    assert task["enabled"] is True and task["deleteAfterRun"] is False
    assert isinstance(task["lastRunAt"], str)  # formatShortDate(new Date(lastRunAt))
    for task in fetch_json(world.engine, "/api/v1/engine/cron/tasks")["tasks"]:
        assert isinstance(task["id"], str) and renderable(task["lastRunAt"])


def test_dashboard_heartbeat_tasks(world: World) -> None:
    """``lib/engine-client.ts:150`` (``fetchHeartbeatTasks``), from
    ``components/dashboard.tsx:77``: ``GET /api/v1/engine/heartbeat/tasks``; ``data.tasks``,
    each shown by ``id``, ``title`` and ``lastRunAt`` (``dashboard.tsx:754-768``)."""
    with world.engine.client() as client:
        created = client.post(
            "/v1/engine/heartbeat/tasks", json={"title": "Check in", "prompt": "check"}
        )
        assert created.status_code == 201, created.text
    tasks = fetch_json(world.engine, "/api/v1/engine/heartbeat/tasks")["tasks"]
    task = next(task for task in tasks if task["title"] == "Check in")
    assert isinstance(task["id"], str) and renderable(task["lastRunAt"])


def test_dashboard_background_agents(world: World) -> None:
    """``lib/engine-client.ts:155`` (``fetchBackgroundAgents``), from
    ``components/dashboard.tsx:82``: ``GET /api/v1/engine/agents/background``;
    ``data.agents``, each shown by ``agentId``, ``name``, ``parentAgentId``, ``status``,
    ``lifecycle``, ``pending`` and ``updatedAt`` (``dashboard.tsx:795-822``)."""
    agents = fetch_json(world.engine, "/api/v1/engine/agents/background")["agents"]
    helper = next(agent for agent in agents if agent["parentAgentId"] == world.parent_agent)
    assert helper["name"] == "helper" and isinstance(helper["agentId"], str)
    assert helper["status"] in ("running", "queued", "idle")
    assert helper["lifecycle"] in ("active", "sleeping")
    assert is_number(helper["pending"]) and is_number(helper["updatedAt"])


@pytest.mark.parametrize(
    "page",
    [
        "components/dashboard.tsx:87",
        "app/agents/page.tsx:37",
        "app/agents/[agentId]/page.tsx:50",
    ],
)
def test_dashboard_agents(world: World, page: str) -> None:
    """``lib/engine-client.ts:160`` (``fetchAgents``), called from ``page``: ``GET
    /api/v1/engine/agents``; ``data.agents``, each an ``AgentSummary`` (the detail page
    finds its agent among them by ``agentId``)."""
    agents = fetch_json(world.engine, "/api/v1/engine/agents")["agents"]
    for agent in agents:
        check_agent_summary(agent)
    ids = {agent["agentId"] for agent in agents}
    assert {world.tool_agent, world.file_agent, world.parent_agent} <= ids
    assert "subagent" in {agent["descriptor"]["type"] for agent in agents}


def test_dashboard_agent_history_with_a_tool_result(world: World) -> None:
    """``lib/engine-client.ts:166`` (``fetchAgentHistory``), from
    ``app/agents/[agentId]/page.tsx:50``: ``GET /api/v1/engine/agents/{id}/history`` (the
    id ``encodeURIComponent``-ed); ``data.records``, each read by its type. A tool result's
    ``output.files.length`` is counted (page.tsx:121) and ``output.toolMessage`` shown
    (page.tsx:391, 457): without them the page throws."""
    records = fetch_json(world.engine, f"/api/v1/engine/agents/{world.tool_agent}/history")[
        "records"
    ]
    for record in records:
        check_record(record)
    calls = [r for r in records if r["type"] == "assistant_message" and r["toolCalls"]]
    assert [call["name"] for call in calls[0]["toolCalls"]] == ["list_agents"]
    result = next(r for r in records if r["type"] == "tool_result")
    assert result["toolCallId"] == calls[0]["toolCalls"][0]["id"]
    assert result["output"]["files"] == []
    message = result["output"]["toolMessage"]
    assert message["role"] == "toolResult" and message["isError"] is False
    assert world.tool_agent in message["content"][0]["text"]  # list_agents' real answer


def test_dashboard_agent_history_with_a_file(world: World) -> None:
    """``lib/engine-client.ts:166`` (``fetchAgentHistory``), from
    ``app/agents/[agentId]/page.tsx:50``: a user message's ``files`` are shown by
    ``name``, ``path`` (the row's key), ``mimeType`` and ``size`` (page.tsx:403-425)."""
    records = fetch_json(world.engine, f"/api/v1/engine/agents/{world.file_agent}/history")[
        "records"
    ]
    for record in records:
        check_record(record)
    message = next(r for r in records if r["type"] == "user_message")
    [file] = message["files"]
    assert file["name"] == "notes.txt" and file["size"] == len(b"some notes\n")
    assert Path(file["path"]).read_bytes() == b"some notes\n"  # where the bytes are


@pytest.mark.parametrize(
    ("method", "browser_path", "body"),
    [
        ("POST", "/api/v1/engine/plugins/load", b'{"pluginId":"clock"}'),
        ("POST", "/api/v1/engine/keys", b'{"name":"mine","scopes":["admin"]}'),
        ("POST", "/api/v1/engine/shutdown", None),
        ("DELETE", "/api/v1/engine/auth/openai", None),
    ],
)
def test_dashboard_proxy_only_reads(
    world: World, method: str, browser_path: str, body: bytes | None
) -> None:
    """``app/api/[...path]/route.ts:70-88`` passes every method on to the socket, and
    the dashboard's web server has no login: whoever reaches its port could change the
    engine. The dashboard itself only reads, so a request relayed with a browser's and
    the proxy's headers may only read; it is refused (403) and changes nothing."""
    headers = [*PROXY_HEADERS, ("origin", "http://localhost:7331"), *JSON_HEADERS]
    path = browser_path[4:]
    reply = node_request(world.engine.paths.socket, method, path, headers, body)
    assert reply.status == 403
    assert reply.json()["error"]["code"] == "relayed_write_refused"
    with world.engine.client() as client:
        assert client.get("/v1/engine/status").status_code == 200
        assert [p["id"] for p in client.get("/v1/engine/plugins").json()["loaded"]] == []
        assert [k["name"] for k in client.get("/v1/engine/keys").json()["keys"]] == []


@pytest.mark.parametrize(
    "page",
    [
        "components/dashboard.tsx:110",
        "app/agents/page.tsx:54",
        "app/agents/[agentId]/page.tsx:71",
    ],
)
def test_dashboard_event_stream(world: World, page: str) -> None:
    """``new EventSource("/api/v1/engine/events")`` in ``page``: ``onmessage`` parses
    each event's ``data`` as JSON with ``type`` and ``payload``. The first is ``init``,
    whose ``payload`` holds ``status``, ``cron``, ``heartbeat`` and ``backgroundAgents``
    (dashboard.tsx:122-128); then ``agent.created``, ``agent.reset`` and ``agent.restored``
    (with ``payload.agentId``, [agentId]/page.tsx:87-92), ``cron.task.added``,
    ``cron.task.ran``, ``heartbeat.task.ran``, ``plugin.loaded`` and ``plugin.unloaded``
    make the pages fetch again (dashboard.tsx:131-153)."""
    engine = world.engine
    with event_source(engine) as messages:
        init, _ = next(messages)
        assert init["type"] == "init"
        payload = init["payload"]
        check_status_as_dashboard_reads_it(payload["status"])
        for key in ("cron", "heartbeat", "backgroundAgents"):
            assert isinstance(payload[key], list), key  # .length, .map
        for agent in payload["backgroundAgents"]:
            assert agent["lifecycle"] in ("active", "sleeping") and is_number(agent["pending"])

        with engine.client() as client:
            user = "stream-" + re.sub(r"[^A-Za-z0-9]+", "-", page)
            posted = client.post(
                "/v1/engine/messages", json={"userId": user, "channelId": "c", "text": "hi"}
            )
            agent_id = posted.json()["agentId"]
            assert until(messages, "agent.created")[0]["payload"]["agentId"] == agent_id
            assert client.post(f"/v1/engine/agents/{agent_id}/reset").status_code == 200
            assert until(messages, "agent.reset")[0]["payload"]["agentId"] == agent_id
            created = client.post(
                "/v1/engine/cron/tasks",
                json={"name": f"Stream {user}", "schedule": "0 9 * * *", "prompt": "hi"},
            )
            until(messages, "cron.task.added")
            client.post(f"/v1/engine/cron/tasks/{created.json()['task']['taskId']}/run")
            until(messages, "cron.task.ran")
            client.post(
                "/v1/engine/heartbeat/tasks",
                json={"title": f"Beat {user}", "prompt": "check", "overwrite": True},
            )
            client.post("/v1/engine/heartbeat/run", json={})
            until(messages, "heartbeat.task.ran")
            client.post("/v1/engine/plugins/load", json={"pluginId": "clock"})
            until(messages, "plugin.loaded")
            client.post("/v1/engine/plugins/unload", json={"instanceId": "clock"})
            until(messages, "plugin.unloaded")


def test_dashboard_event_stream_reconnects(world: World) -> None:
    """``EventSource`` reconnects by itself after ``onerror`` (``dashboard.tsx:116``, and
    each page's ``source.onerror``), sending the ``Last-Event-ID`` it last saw: the stream
    starts again with ``init``, then goes on after that event."""
    engine = world.engine
    with event_source(engine) as messages:
        next(messages)
        with engine.client() as client:
            client.post("/v1/engine/messages", json={"userId": "r1", "channelId": "c", "text": "a"})
        first, last_id = until(messages, "agent.created")
    assert last_id  # the stream's `id:` lines
    with engine.client() as client:
        client.post("/v1/engine/messages", json={"userId": "r2", "channelId": "c", "text": "b"})
    with event_source(engine, last_event_id=last_id) as messages:
        init, _ = next(messages)
        assert init["type"] == "init"
        created, _ = until(messages, "agent.created")
        assert created["payload"]["agentId"] != first["payload"]["agentId"]

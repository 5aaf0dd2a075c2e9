"""A file ``send_file`` sends reaches its connector exactly once, also when the engine is
SIGKILLed after the tool ran and before the connector took the file; and the webchat
stream carries the file's reference to the browser as it is.

The connector is a real plugin, installed in a site folder the engine process is given:
it holds the first message with files until the test kills the engine, and logs every
message it is handed.
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from claybot.config.home import HomePaths
from tests.agents.test_subagents import call, rules_settings
from tests.api.test_webchat_stream import frames
from tests.conftest import EngineProcess, write_settings
from tests.plugins.test_catalog import install

pytestmark = pytest.mark.slow

HELD_CONNECTOR = """
import asyncio
import json
import os

from claybot.plugin_api import CamelModel, InboundMessage, PluginDefinition


class HeldSettings(CamelModel):
    log: str  # one line per message handed to the connector
    hold: str  # written when the first message with files is held


class HeldConnector:
    def __init__(self, api):
        self._api = api

    @property
    def id(self):
        return self._api.instance_id

    async def load(self):
        self._api.registrar.register_connector(self)
        self._posting = asyncio.get_running_loop().create_task(self._post())

    async def _post(self):
        # As a platform's poller does, once the engine takes messages; the same message
        # id after a restart is accepted once.
        message = InboundMessage(self.id, "ann", "c", "send me the report", message_id="m-1")
        while True:
            try:
                await self._api.post_message(message)
                return
            except RuntimeError:  # the engine is still starting
                await asyncio.sleep(0.05)

    async def unload(self):
        pass

    async def stop(self):
        pass

    async def send(self, message):
        settings = self._api.settings
        if message.files and not os.path.exists(settings.hold):
            # Whole or not at all: the test reads the id as soon as the file exists.
            with open(settings.hold + ".part", "w") as file:
                file.write(message.id)
            os.replace(settings.hold + ".part", settings.hold)
            await asyncio.Event().wait()  # until the engine is killed
        with open(settings.log, "a") as file:
            file.write(json.dumps(message.to_dict()) + "\\n")


def definition():
    return PluginDefinition(
        id="held-connector",
        name="Held connector",
        description="Holds the first file it is given; logs what it delivers.",
        settings_model=HeldSettings,
        create=HeldConnector,
    )
"""


def installed_connector(site: Path) -> dict[str, str]:
    """The plugin installed in ``site``; the environment an engine process finds it with."""
    install(
        site,
        "claybot-test-held",
        "[claybot.plugins]\nheld-connector = claybot_test_held:definition\n",
        {"claybot_test_held": textwrap.dedent(HELD_CONNECTOR)},
    )
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def wait_until(predicate: Any, timeout_s: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def logged(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_sent_file_reaches_the_connector_once_across_a_sigkill(
    paths: HomePaths, tmp_path: Path
) -> None:
    folder = paths.workspace.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    report = folder / "report.pdf"
    report.write_bytes(b"%PDF-1.4\n% the quarterly report\n")
    log, hold = tmp_path / "delivered.jsonl", tmp_path / "held"
    settings = rules_settings(
        [
            {
                "match": "send me the report",
                "response": call("send_file", path=str(report), caption="Your report"),
            },
            {"match": "Sent report.pdf", "response": "There it is."},
        ],
        plugins=[
            {
                "instanceId": "held",
                "pluginId": "held-connector",
                "settings": {"log": str(log), "hold": str(hold)},
            },
        ],
    )
    write_settings(paths, settings)
    process = EngineProcess(paths, extra_env=installed_connector(tmp_path / "site"))
    process.start()
    try:
        wait_until(hold.exists, what=f"the file to reach the connector: {process.output()}")
        process.kill()  # the file was recorded and handed on, and the connector never took it
        held_id = hold.read_text()
        assert logged(log) == []
        process.start()
        wait_until(
            lambda: any(m["text"] == "There it is." for m in logged(log)),
            what=f"the final reply after the restart: {process.output()}",
        )
        time.sleep(0.5)  # a second delivery would be on its way by now
        with process.client() as client:
            (agent,) = client.get("/v1/engine/agents").json()["agents"]
            records = client.get(
                f"/v1/engine/agents/{agent['agentId']}/history", params={"limit": 1000}
            ).json()["records"]
            delivered = logged(log)
            files = [m for m in delivered if m.get("files")]
            assert len(files) == 1, delivered  # exactly once, across both runs
            (sent,) = files
            (reference,) = sent["files"]
            served = client.get(f"/v1/engine/files/{reference['id']}")
            assert served.content == report.read_bytes()
    finally:
        process.terminate()
    assert sent["id"] == held_id and sent["text"] == "Your report"
    assert [m["text"] for m in delivered] == ["Your report", "There it is."]
    (recorded,) = [r for r in records if r["type"] == "assistant_message" and r["files"]]
    # Beside the reference, where the store keeps its bytes (what seed 000's dashboard shows).
    files = [{k: v for k, v in f.items() if k != "path"} for f in recorded["files"]]
    assert recorded["outgoingId"] == held_id and files == [reference]
    # The tool ran once: its result was durable before the file went out.
    results = [r for r in records if r["type"] == "tool_result"]
    assert [(r["toolName"], r["output"]["isError"]) for r in results] == [("send_file", False)]


def test_the_webchat_stream_carries_the_file(paths: HomePaths) -> None:
    folder = paths.workspace.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    notes = folder / "notes.txt"
    notes.write_bytes(b"milk, eggs\n")
    rules = [
        {"match": "my notes", "response": call("send_file", path=str(notes))},
        {"match": "Sent notes.txt", "response": "Sent."},
    ]
    write_settings(paths, rules_settings(rules))
    process = EngineProcess(paths)
    process.start()
    try:
        with (
            process.client() as client,
            client.stream("GET", "/v1/engine/webchat/events", params={"userId": "bob"}) as stream,
        ):
            received = frames(stream)
            assert next(received)["type"] == "init"
            posted = client.post(
                "/v1/engine/webchat/messages", json={"userId": "bob", "text": "my notes"}
            )
            assert posted.status_code == 202, posted.text
            outgoing = []
            while not outgoing or not outgoing[-1]["final"]:
                frame = next(received)
                if frame["type"] == "agent.outgoing":
                    outgoing.append(frame["payload"]["message"])
            (file,) = outgoing[0]["files"]
            served = client.get(f"/v1/engine/files/{file['id']}")
    finally:
        process.terminate()
    assert [m["text"] for m in outgoing] == ["", "Sent."]
    assert (file["name"], file["size"]) == ("notes.txt", len(b"milk, eggs\n"))
    assert "files" not in outgoing[1]
    assert served.content == b"milk, eggs\n"

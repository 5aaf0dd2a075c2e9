"""`claybot chat` answers with the local model: no API key, and no network at all."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from claybot.config.home import HomePaths
from tests.conftest import EngineProcess

pytestmark = pytest.mark.slow

# Any variable that could hand the engine a real provider is removed.
KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "CLAYBOT_DATABASE_URL",
)


def _network_namespace_available() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    return probe.returncode == 0


class OfflineEngine(EngineProcess):
    """The engine in a network namespace holding only loopback (when the OS allows it)."""

    def __init__(self, paths: HomePaths) -> None:
        super().__init__(paths)
        for name in KEY_VARIABLES:
            self.env.pop(name, None)
        self.offline = _network_namespace_available()

    def start(self, timeout_s: float = 120.0) -> None:
        if not self.offline:
            print("unshare -n is not permitted here: running without a network namespace")
            super().start(timeout_s)
            return
        self.paths.socket.unlink(missing_ok=True)
        command = f"ip link set lo up && exec {sys.executable} -m claybot start --port 0"
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                ["unshare", "-n", "sh", "-c", command],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready(timeout_s)


def test_chat_answers_with_the_local_model_offline(paths: HomePaths) -> None:
    paths.home.mkdir(parents=True, exist_ok=True)  # no settings.json: the default provider
    engine = OfflineEngine(paths)
    engine.start()
    try:
        with engine.client() as client:
            status = client.get("/v1/engine/status").json()
        assert [p["id"] for p in status["inferenceProviders"]] == ["local"]
        env = {**engine.env}
        result = subprocess.run(
            [sys.executable, "-m", "claybot", "chat", "--user", "offline", "--channel", "test"],
            input="Hello! What is the capital of France?\nAnd what did I just ask you?\n",
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        with engine.client() as client:
            agents = client.get("/v1/engine/agents").json()["agents"]
            agent = next(a for a in agents if a["descriptor"]["userId"] == "offline")
            records = client.get(f"/v1/engine/agents/{agent['agentId']}/history").json()["records"]
        replies = [r for r in records if r["type"] == "assistant_message"]
        assert len(replies) == 2
        assert all(r["text"].strip() and not r.get("error") for r in replies), replies
        assert all(r["tokens"]["provider"] == "local" for r in replies)
        for reply in replies:
            assert reply["text"].strip()[:40] in result.stdout  # chat printed what the model said
    finally:
        engine.terminate()

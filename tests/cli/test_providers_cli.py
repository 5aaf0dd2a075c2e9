"""Providers a user can see: `providers test`, what `providers add` checks, `local`
kept as the last fallback, and a missing key named as such."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from claybot.config.home import HomePaths
from tests.cli.test_cli import cli
from tests.conftest import EngineProcess, write_settings
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import LoopbackServer

pytestmark = pytest.mark.slow


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    vendor = FakeOpenAI()
    with LoopbackServer(vendor):
        yield vendor


def closed_port() -> int:
    """A port nothing listens on: bound, never listening, held for the test."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def providers_of(paths: HomePaths) -> list[tuple[str, bool]]:
    settings = json.loads(paths.settings.read_text())
    return [(p["id"], p.get("enabled", True)) for p in settings["providers"]]


def test_provider_test_shows_the_answer_through_the_engine(
    engine_process: EngineProcess,
) -> None:
    engine_process.start()
    result = cli(engine_process.paths, "providers", "test", "scripted")
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert "scripted answered in" in said
    assert "echo: Reply with one short sentence: are you there?" in said
    answer = json.loads(cli(engine_process.paths, "providers", "test", "scripted", "--json").stdout)
    assert answer["answered"] is True and answer["providerId"] == "scripted"


def test_provider_test_reports_the_reason_in_the_vendors_words(
    paths: HomePaths, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    write_settings(
        paths,
        {
            "providers": [
                {"id": "openai", "options": {"baseUrl": fake_openai.api_base, "maxRetries": 0}},
                {"id": "nokey", "type": "anthropic"},
            ]
        },
    )
    fake_openai.reply_error(404, "The model `gpt-5.4-mini` does not exist", "not_found_error")
    # No engine: the provider is built from the files for this one call.
    result = cli(paths, "providers", "test", "openai")
    assert result.returncode == 1
    said = " ".join(result.stderr.split())
    assert "openai did not answer: HTTP 404: The model `gpt-5.4-mini` does not exist" in said
    result = cli(paths, "providers", "test", "nokey")
    assert result.returncode == 1
    assert "nokey did not answer: no API key" in " ".join(result.stderr.split())
    result = cli(paths, "providers", "test", "nope")
    assert result.returncode == 1 and "no provider with id starting 'nope'" in result.stderr


def test_provider_test_answers_from_a_real_vendor_call_offline(
    paths: HomePaths, fake_openai: FakeOpenAI
) -> None:
    write_settings(
        paths, {"providers": [{"id": "openai", "options": {"baseUrl": fake_openai.api_base}}]}
    )
    fake_openai.reply_text("Yes, I am here.")
    result = cli(paths, "providers", "test", "openai")
    assert result.returncode == 0, result.stderr
    assert "Yes, I am here." in result.stdout
    [request] = fake_openai.requests
    assert request.body["messages"][-1]["content"].endswith("are you there?")


def test_adding_a_provider_warns_when_its_base_url_does_not_answer(paths: HomePaths) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    result = cli(
        paths, "providers", "add", "ollama", "--type", "openai", "--option", f"baseUrl={url}"
    )
    assert result.returncode == 0, result.stderr  # added all the same: it may start later
    said = " ".join(result.stderr.split())
    assert "warning: cannot reach 127.0.0.1:" in said and "is the server running?" in said


def test_local_stays_the_last_fallback_until_it_is_removed(
    paths: HomePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    paths.home.mkdir(parents=True, exist_ok=True)
    assert cli(paths, "providers", "add", "openai").returncode == 0
    assert providers_of(paths) == [("openai", True), ("local", True)]
    assert cli(paths, "providers", "add", "anthropic", "--type", "openai").returncode == 0
    assert providers_of(paths) == [("openai", True), ("anthropic", True), ("local", True)]
    assert (
        cli(paths, "providers", "add", "first", "--type", "openai", "--position", "0").returncode
        == 0
    )
    assert [pid for pid, _ in providers_of(paths)] == ["first", "openai", "anthropic", "local"]
    # Removed explicitly: it stays out, and later additions do not bring it back.
    assert cli(paths, "providers", "remove", "local", "--yes").returncode == 0
    assert cli(paths, "providers", "add", "more", "--type", "openai").returncode == 0
    assert [pid for pid, _ in providers_of(paths)] == ["first", "openai", "anthropic", "more"]


def test_a_turn_without_a_usable_provider_names_the_missing_key(
    paths: HomePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    write_settings(paths, {"providers": [{"id": "openai"}]})
    engine = EngineProcess(paths)
    engine.env.pop("OPENAI_API_KEY", None)
    engine.start()
    try:
        result = cli(paths, "chat", "--user", "ann", stdin="hello\n")
        assert result.returncode == 0, result.stderr
        said = " ".join(result.stdout.split())
        assert "openai: no API key" in said and "no provider is configured" not in said
        # The engine's log names the provider and the reason too.
        log = (paths.home / "logs" / "engine.log").read_text()
        lines = [json.loads(line) for line in log.splitlines() if "provider.unavailable" in line]
        assert lines
        for line in lines:
            assert line["provider"] == "openai" and line["reason"].startswith("no API key")
            assert "openai" in line["message"] and "no API key" in line["message"]
    finally:
        engine.terminate()

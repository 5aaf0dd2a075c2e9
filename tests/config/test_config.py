from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from claybot.config.auth import AuthFile
from claybot.config.home import HomePaths, resolve_home
from claybot.config.settings import ProviderSettings, Settings
from claybot.config.store import ConfigError, ConfigStore


def test_home_resolution_order(tmp_path: Path) -> None:
    env = {"CLAYBOT_HOME": str(tmp_path / "env")}
    assert resolve_home(tmp_path / "flag", env) == tmp_path / "flag"
    assert resolve_home(None, env) == tmp_path / "env"
    assert resolve_home(None, {}) == Path("~/.claybot").expanduser().resolve()


def test_missing_files_read_as_defaults(tmp_path: Path) -> None:
    store = ConfigStore(HomePaths(tmp_path))
    assert store.read_settings() == Settings()
    assert store.read_auth().root == {}


def test_settings_round_trip_in_camel_case_and_keep_unknown_sections(tmp_path: Path) -> None:
    paths = HomePaths(tmp_path)
    paths.settings.write_text(
        json.dumps(
            {
                "engine": {"port": 9000},
                "providers": [
                    {
                        "id": "ollama",
                        "type": "openai",
                        "model": "llama3",
                        "options": {"baseUrl": "x"},
                    }
                ],
                "plugins": [
                    {"instanceId": "clock", "pluginId": "clock", "settings": {"timezone": "UTC"}}
                ],
                "agents": {"maxConcurrent": 8},
                "cron": {"future": True},
            }
        )
    )
    store = ConfigStore(paths)
    settings = store.read_settings()
    assert settings.engine.port == 9000 and settings.agents.max_concurrent == 8
    assert settings.providers[0].provider_type == "openai"
    store.write_settings(settings)
    written = json.loads(paths.settings.read_text())
    assert written["cron"] == {"future": True}
    assert written["agents"]["maxConcurrent"] == 8
    assert written["plugins"][0]["instanceId"] == "clock"
    assert stat.S_IMODE(paths.settings.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"engine": {"port": "high"}}), "engine.port"),
        (json.dumps({"providers": [{"model": "x"}]}), "providers.0.id"),
        (json.dumps({"agents": {"maxConcurrent": 0}}), "agents.maxConcurrent"),
        (json.dumps({"engine": {"prot": 1}}), "engine.prot"),
    ],
)
def test_an_invalid_settings_file_is_reported_with_file_and_field_and_left_alone(
    tmp_path: Path, content: str, problem: str
) -> None:
    paths = HomePaths(tmp_path)
    paths.settings.write_text(content)
    with pytest.raises(ConfigError) as caught:
        ConfigStore(paths).read_settings()
    assert str(paths.settings) in str(caught.value)
    assert problem in str(caught.value)
    assert paths.settings.read_text() == content  # never silently replaced


def test_auth_is_written_0600_and_redacts(tmp_path: Path) -> None:
    paths = HomePaths(tmp_path)
    store = ConfigStore(paths)
    auth = store.read_auth().with_field("openai", "apiKey", "sk-secret")
    store.write_auth(auth)
    assert stat.S_IMODE(paths.auth.stat().st_mode) == 0o600
    entry = store.read_auth().get("openai")
    assert entry is not None and entry.secret("apiKey") == "sk-secret"
    assert "sk-secret" not in json.dumps(entry.redacted())
    token = AuthFile({}).with_field("telegram", "token", "123:abc").get("telegram")
    assert token is not None and token.type == "token"


def test_an_invalid_auth_file_is_reported(tmp_path: Path) -> None:
    paths = HomePaths(tmp_path)
    paths.auth.write_text(json.dumps({"openai": {"type": "password"}}))
    with pytest.raises(ConfigError, match=r"openai\.type"):
        ConfigStore(paths).read_auth()


def test_provider_ids_are_validated() -> None:
    with pytest.raises(ValueError):
        ProviderSettings(id="../evil")

"""Redacted views of settings: by the settings model's schema and by key names."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, Secret, SecretStr
from pydantic.dataclasses import dataclass as pydantic_dataclass

from claybot.config.redaction import (
    REDACTED,
    SECRET,
    is_secret_name,
    redact_by_model,
    redact_named,
    redact_value,
)
from claybot.config.settings import CamelModel, ProviderSettings


@pytest.mark.parametrize(
    "name",
    [
        "apiKey", "api_key", "apikey", "X-Api-Key", "OPENAI_API_KEY", "key", "privateKey",
        "token", "TOKEN", "accessToken", "GITHUB_PAT", "password", "db_passwd",
        "clientSecret", "secretAccessKey", "Authorization", "Proxy-Authorization", "Cookie",
        "credentials",
    ],
)  # fmt: skip
def test_names_of_secrets(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["maxTokens", "tokenizer", "keyId", "keys", "monkey", "baseUrl", "model", "timeoutS", ""],
)
def test_names_that_are_not_secrets(name: str) -> None:
    assert not is_secret_name(name)


def test_values_under_secret_names_are_redacted_at_any_depth() -> None:
    options: dict[str, Any] = {
        "apiKey": "sk-1",
        "maxTokens": 100,
        "nested": [{"token": {"a": "b", "n": None}}, {"plain": "kept"}],
        "urls": [
            "https://user:pw@host:8443/v1?token=t&x=1",
            "https://host/v1?x=1",
            "not a url with ://",
        ],
        "args": ["--api-key", "k1", "--token=k2", "--verbose", "--password"],
    }
    assert redact_named(options) == {
        "apiKey": REDACTED,
        "maxTokens": 100,
        "nested": [{"token": {"a": REDACTED, "n": None}}, {"plain": "kept"}],
        "urls": [
            f"https://user:{REDACTED}@host:8443/v1?token={REDACTED}&x=1",
            "https://host/v1?x=1",
            "not a url with ://",
        ],
        "args": ["--api-key", REDACTED, f"--token={REDACTED}", "--verbose", "--password"],
    }


class Inner(BaseModel):
    password: SecretStr | None = None
    env: dict[str, str] = Field(default_factory=dict, json_schema_extra=SECRET)
    label: str = ""


class Outer(BaseModel):
    inner: Inner | None = None
    many: list[Inner] = Field(default_factory=list)
    by_name: dict[str, Inner] = Field(default_factory=dict)
    secret_list: list[str] = Field(default_factory=list, json_schema_extra=SECRET)
    plain: str = ""


def test_what_the_model_marks_secret_is_redacted_wherever_the_model_is_used() -> None:
    inner = {"password": "p", "env": {"A": "1"}, "label": "kept"}
    settings = {
        "inner": inner,
        "many": [inner, {"label": "only"}],
        "by_name": {"x": inner},
        "secret_list": ["a", "b"],
        "plain": "kept",
    }
    hidden = {"password": REDACTED, "env": {"A": REDACTED}, "label": "kept"}
    assert redact_by_model(Outer, settings) == {
        "inner": hidden,
        "many": [hidden, {"label": "only"}],
        "by_name": {"x": hidden},
        "secret_list": [REDACTED, REDACTED],
        "plain": "kept",
    }
    assert redact_by_model(Outer, {"inner": None}) == {"inner": None}


def test_a_hidden_value_keeps_its_shape() -> None:
    assert redact_value({"a": "1", "b": [2, {"c": None}]}) == {
        "a": REDACTED,
        "b": [REDACTED, {"c": None}],
    }


def test_a_provider_shows_its_options_redacted_and_keeps_the_real_ones() -> None:
    provider = ProviderSettings(id="p", options={"apiKey": "sk-1", "baseUrl": "http://h"})
    assert provider.to_public_dict()["options"] == {"apiKey": REDACTED, "baseUrl": "http://h"}
    assert provider.options["apiKey"] == "sk-1"
    assert provider.to_json_dict()["options"]["apiKey"] == "sk-1"


@pydantic_dataclass
class Login:
    user: str
    password: SecretStr


class Aliased(CamelModel):
    bot_token: str = Field(json_schema_extra=SECRET)
    keys: list[Annotated[str, Field(json_schema_extra=SECRET)]] = []
    login: Login | None = None
    pin: Secret[int] | None = None
    pair: tuple[str, SecretStr] | None = None


def test_the_model_is_read_by_its_aliases_into_annotations_and_dataclasses() -> None:
    settings = {
        "botToken": "t",
        "keys": ["a", "b"],
        "login": {"user": "u", "password": "p"},
        "pin": 1234,
        "pair": ["x", "y"],
        "unknown": "kept",  # no field says it is secret (and its name does not)
    }
    assert redact_by_model(Aliased, settings) == {
        "botToken": REDACTED,
        "keys": [REDACTED, REDACTED],
        "login": {"user": "u", "password": REDACTED},
        "pin": REDACTED,
        "pair": ["x", REDACTED],
        "unknown": "kept",
    }
    # Stored settings are not validated first: a value of another shape than its field's
    # is left to the names' net (``public_settings``), never an error.
    odd = {"login": "odd", "keys": "odd", "botToken": ["t"]}
    assert redact_by_model(Aliased, odd) == {**odd, "botToken": [REDACTED]}

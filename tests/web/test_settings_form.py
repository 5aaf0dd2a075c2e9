"""A settings model becomes a form's fields, and a form's answer becomes typed settings."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, Secret, SecretStr

from claybot.config.redaction import SECRET
from claybot.plugin_api import CamelModel
from claybot.web.settings_form import (
    WHOLE,
    FormField,
    fields_of,
    initial_values,
    submitted_values,
    values_of,
)


class Color(StrEnum):
    RED = "red"
    BLUE = "blue"


class Server(BaseModel):
    name: str


class Example(CamelModel):
    bot_token: str = Field(json_schema_extra=SECRET, description="From @BotFather.")
    password: SecretStr | None = None
    name: str = "claybot"
    retries: int = Field(default=3, ge=0, le=10)
    timeout_s: float = 2.5
    verbose: bool = False
    mode: Literal["fast", "safe"] = "safe"
    color: Color | None = None
    limit_mb: int | None = None
    servers: list[Server] = Field(default_factory=list)
    labels: dict[str, str] = {"a": "b"}


def by_name(fields: list[FormField]) -> dict[str, FormField]:
    return {field.name: field for field in fields}


def answer(**values: str) -> dict[str, str]:
    return {f"setting.{name}": value for name, value in values.items()}


def test_each_property_becomes_a_field_of_its_kind() -> None:
    fields = by_name(fields_of(Example))
    assert list(fields) == ["botToken", "password", "name", "retries", "timeoutS", "verbose",
                            "mode", "color", "limitMb", "servers", "labels"]  # fmt: skip
    kinds = {name: field.kind for name, field in fields.items()}
    assert kinds == {
        "botToken": "string", "password": "string", "name": "string", "retries": "integer",
        "timeoutS": "number", "verbose": "boolean", "mode": "enum", "color": "enum",
        "limitMb": "integer", "servers": "json", "labels": "json",
    }  # fmt: skip
    token = fields["botToken"]
    assert token.required and token.secret and token.help == "From @BotFather."
    assert token.label == "Bot token" and token.input_name == "setting.botToken"
    assert fields["password"].secret and not fields["password"].required  # SecretStr, optional
    assert not fields["name"].secret and fields["name"].default == "claybot"
    assert (fields["retries"].minimum, fields["retries"].maximum) == (0, 10)
    assert fields["timeoutS"].label == "Timeout (s)" and fields["limitMb"].label == "Limit (MB)"
    assert fields["mode"].choices == ("fast", "safe")
    assert fields["color"].choices == ("red", "blue")  # through $defs, the null branch dropped
    assert not fields["color"].has_default or fields["color"].default is None
    assert fields["servers"].hint == "As JSON."


def test_an_explicit_title_is_kept() -> None:
    class Titled(BaseModel):
        token_url: str = Field(title="Where tokens come from")
        base_url: str

    fields = by_name(fields_of(Titled))
    assert fields["token_url"].label == "Where tokens come from"
    assert fields["base_url"].label == "Base URL"


def test_a_form_shows_the_defaults_but_never_a_secret() -> None:
    fields = fields_of(Example)
    shown = initial_values(fields)
    assert shown["name"] == "claybot" and shown["retries"] == "3" and shown["timeoutS"] == "2.5"
    assert shown["verbose"] == "" and shown["mode"] == "safe"
    assert shown["labels"] == '{\n  "a": "b"\n}'
    assert "botToken" not in shown and shown.get("password", "") == ""
    typed = answer(botToken="123:secret", name="x", retries="nope")
    again = submitted_values(fields, typed)
    assert again == {"name": "x", "retries": "nope"}  # as typed; the secret left out


def test_an_answer_becomes_typed_settings() -> None:
    fields = fields_of(Example)
    settings, problems = values_of(
        fields,
        answer(botToken="123:abc", name="bot", retries="5", timeoutS="0.5", verbose="on",
               mode="fast", color="blue", limitMb="", servers='[{"name": "a"}]',
               labels='{"x": "y"}'),
    )  # fmt: skip
    assert problems == []
    assert settings == {
        "botToken": "123:abc", "name": "bot", "retries": 5, "timeoutS": 0.5, "verbose": True,
        "mode": "fast", "color": "blue", "servers": [{"name": "a"}], "labels": {"x": "y"},
    }  # fmt: skip
    assert Example.model_validate(settings).retries == 5  # what the engine will check


def test_defaults_and_empty_boxes_are_not_sent() -> None:
    fields = fields_of(Example)
    typed = answer(botToken="t", name="claybot", retries="3", timeoutS="2.5", mode="safe",
                   password="", labels='{"a": "b"}')  # fmt: skip
    settings, problems = values_of(fields, typed)
    assert problems == []
    # An unchecked box is False, which is the default: not sent either.
    assert settings == {"botToken": "t"}
    # A required value left empty is not invented: the engine names it as missing.
    settings, problems = values_of(fields, answer(verbose="on"))
    assert settings == {"verbose": True} and problems == []


def test_values_that_are_not_of_their_type_are_problems() -> None:
    fields = fields_of(Example)
    settings, problems = values_of(
        fields,
        answer(botToken="t", retries="2.5", timeoutS="nan", mode="turbo", servers="[oops"),
    )
    assert settings == {"botToken": "t"}
    assert [(p.field, p.message) for p in problems] == [
        ("retries", "Retries: must be a whole number"),
        ("timeoutS", "Timeout (s): must be a finite number"),
        ("mode", "Mode: must be one of the choices"),
        ("servers", "Servers: is not valid JSON"),
    ]


def test_non_string_choices_round_trip() -> None:
    class Levels(BaseModel):
        level: Literal[1, 2, 3] = 1

    fields = fields_of(Levels)
    assert fields[0].kind == "enum" and [fields[0].choice_text(c) for c in fields[0].choices] == [
        "1",
        "2",
        "3",
    ]
    assert values_of(fields, answer(level="3")) == ({"level": 3}, [])


def test_a_model_that_takes_any_keys_is_one_json_object() -> None:
    class Anything(BaseModel):
        model_config = ConfigDict(extra="allow")

    fields = fields_of(Anything)
    assert [(field.name, field.kind) for field in fields] == [(WHOLE, "json")]
    settings, problems = values_of(fields, {"setting.": '{"anything": [1]}'})
    assert settings == {"anything": [1]} and problems == []
    _, problems = values_of(fields, {"setting.": "[1]"})
    assert [p.message for p in problems] == ["the settings must be a JSON object"]
    assert values_of(fields, {}) == ({}, [])


def test_a_model_with_no_settings_has_no_fields() -> None:
    class Nothing(BaseModel):
        pass

    assert fields_of(Nothing) == []


def test_optional_and_annotated_fields_keep_their_input_and_bounds() -> None:
    class Wrapped(BaseModel):
        pin: Secret[int] | None = None
        level: Annotated[int, Field(ge=1, le=9)] | None = None
        home: HttpUrl | None = None

    fields = by_name(fields_of(Wrapped))
    assert (fields["pin"].kind, fields["pin"].secret) == ("integer", True)
    assert (fields["level"].kind, fields["level"].minimum, fields["level"].maximum) == (
        "integer",
        1,
        9,
    )
    assert (fields["home"].kind, fields["home"].label) == ("string", "Home")

"""A plugin's settings form, generated from its settings' JSON schema, and the form's
answer turned back into settings. Pure: no I/O, no engine.

The schema is the one the plugin's pydantic model gives (``PluginDefinition
.settings_schema``). Each top-level property becomes one input: a text, number or
password box, a checkbox or a list of choices; what has no input of its own (a nested
object, a list, a union of shapes) is a JSON text box. A schema that cannot be read
(a model without one) asks for the whole settings as JSON.

Typing the answer is all that happens here: checking it is the plugin's model's job,
when the engine loads the instance, so the rules live in one place. A value left as
its default is not sent, so an instance keeps following the plugin's default (the
engine stores only what was given).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

FieldKind = Literal["string", "integer", "number", "boolean", "enum", "json"]
FIELD_PREFIX = "setting."  # form names, apart from the form's own (csrf, instanceId)
WHOLE = ""  # the one field of a form whose schema could not be read: all the settings
_NO_DEFAULT: Any = object()


@dataclass(frozen=True)
class FormField:
    name: str  # the settings' key, as the schema spells it
    label: str
    kind: FieldKind
    required: bool = False
    help: str = ""
    secret: bool = False  # writeOnly in the schema: a password box, never shown back
    default: Any = _NO_DEFAULT
    choices: tuple[Any, ...] = ()  # an enum's values
    minimum: float | None = None
    maximum: float | None = None

    @property
    def input_name(self) -> str:
        return FIELD_PREFIX + self.name

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT

    @property
    def hint(self) -> str:
        """The help shown under the input: the schema's description, and how to write
        a value that has no input of its own."""
        if self.kind != "json":
            return self.help
        return f"{self.help} As JSON." if self.help else "As JSON."

    def choice_text(self, choice: Any) -> str:
        """How a choice reads in the form, and the value its option posts."""
        return choice if isinstance(choice, str) else json.dumps(choice)


def fields_of(schema: Mapping[str, Any] | None) -> list[FormField]:
    """The form's inputs, in the schema's order of properties."""
    if not isinstance(schema, Mapping):
        return [FormField(WHOLE, "Settings (JSON)", "json", help="A JSON object.")]
    definitions = schema.get("$defs")
    definitions = definitions if isinstance(definitions, Mapping) else {}
    root = _resolved(schema, definitions)
    properties = root.get("properties")
    if not isinstance(properties, Mapping):
        if root.get("additionalProperties") in (None, False):
            return []  # a model with no settings
        return [FormField(WHOLE, "Settings (JSON)", "json", help="A JSON object.")]
    required = set(root.get("required") or ())
    return [
        _field(name, node, name in required, definitions)
        for name, node in properties.items()
        if isinstance(name, str) and isinstance(node, Mapping)
    ]


def _resolved(node: Mapping[str, Any], definitions: Mapping[str, Any]) -> Mapping[str, Any]:
    """``node`` with a local ``$ref`` followed (its own keys win, as pydantic writes them)."""
    reference = node.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        target = definitions.get(reference.removeprefix("#/$defs/"))
        if isinstance(target, Mapping):
            return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _without_null(node: Mapping[str, Any], definitions: Mapping[str, Any]) -> Mapping[str, Any]:
    """An optional field's own shape: ``anyOf: [X, {type: null}]`` is X."""
    branches = node.get("anyOf")
    if isinstance(branches, list):
        kept = [b for b in branches if isinstance(b, Mapping) and b.get("type") != "null"]
        if len(kept) == 1:
            own = {key: value for key, value in node.items() if key != "anyOf"}
            return {**_resolved(kept[0], definitions), **own}
    return node


def _field(
    name: str, node: Mapping[str, Any], required: bool, definitions: Mapping[str, Any]
) -> FormField:
    shape = _without_null(_resolved(node, definitions), definitions)
    kind: FieldKind = "json"
    choices: tuple[Any, ...] = ()
    if isinstance(shape.get("enum"), list) and shape["enum"]:
        kind, choices = "enum", tuple(shape["enum"])
    elif "const" in shape:
        kind, choices = "enum", (shape["const"],)
    elif shape.get("type") in ("string", "integer", "number", "boolean"):
        kind = shape["type"]
    return FormField(
        name=name,
        label=_label(name, node.get("title") or shape.get("title")),
        kind=kind,
        required=required,
        help=str(node.get("description") or shape.get("description") or ""),
        secret=node.get("writeOnly") is True or shape.get("writeOnly") is True,
        default=node.get("default", _NO_DEFAULT),
        choices=choices,
        minimum=_bound(shape, "minimum"),
        maximum=_bound(shape, "maximum"),
    )


def _bound(shape: Mapping[str, Any], key: str) -> float | None:
    value = shape.get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_UNITS = {"s": "(s)", "ms": "(ms)", "mb": "(MB)", "kb": "(KB)", "gb": "(GB)"}
_ACRONYMS = {"url": "URL", "urls": "URLs", "api": "API", "http": "HTTP", "mcp": "MCP", "ip": "IP"}


def _label(name: str, title: object) -> str:
    """The schema's title, unless it is the one pydantic makes from the key (``maxBytes``
    gives "Maxbytes"): then the key's words, "Max bytes"; a unit at the end in brackets."""
    if isinstance(title, str) and title and title not in (name.title(), _snake_title(name)):
        return title
    words = [word.lower() for word in _WORD.findall(name)] or [name]
    if len(words) > 1 and words[-1] in _UNITS:
        words[-1] = _UNITS[words[-1]]
    text = " ".join(_ACRONYMS.get(word, word) for word in words)
    return text[:1].upper() + text[1:]


def _snake_title(name: str) -> str:
    return name.replace("_", " ").title()


def initial_values(fields: list[FormField]) -> dict[str, str]:
    """What the form shows before anything was typed: each default, as text."""
    return {field.name: _as_text(field, field.default) for field in fields if field.has_default}


def _as_text(field: FormField, value: Any) -> str:
    if field.secret or value is None:
        return ""
    if field.kind == "boolean":
        return "on" if value is True else ""
    if field.kind == "enum":
        return field.choice_text(value)
    if field.kind == "json":
        return json.dumps(value, indent=2)
    return str(value)


def submitted_values(fields: list[FormField], form: Mapping[str, str]) -> dict[str, str]:
    """The answer as the form shows it again (after a refusal): secrets left out."""
    return {
        field.name: form.get(field.input_name, "")
        for field in fields
        if not field.secret and field.input_name in form
    }


@dataclass(frozen=True)
class FormProblem:
    field: str
    message: str


def values_of(
    fields: list[FormField], form: Mapping[str, str]
) -> tuple[dict[str, Any], list[FormProblem]]:
    """The settings a form's answer gives, typed by the schema, and the inputs that
    could not be read as their type. An empty box or a value left at its default is
    not sent; an unchecked box is ``False``."""
    settings: dict[str, Any] = {}
    problems: list[FormProblem] = []
    for field in fields:
        raw = form.get(field.input_name)
        if field.kind == "boolean":
            value: Any = raw is not None and raw.lower() in ("on", "true", "1")
        elif raw is None or not raw.strip():
            continue
        else:
            try:
                value = _typed(field, raw.strip() if field.kind != "string" else raw)
            except ValueError as exc:
                problems.append(FormProblem(field.name, f"{field.label}: {exc}"))
                continue
        if field.name == WHOLE:
            if not isinstance(value, dict):
                problems.append(FormProblem(field.name, "the settings must be a JSON object"))
                continue
            settings.update(value)
        elif not (field.has_default and value == field.default and not field.required):
            settings[field.name] = value
    return settings, problems


def _typed(field: FormField, raw: str) -> Any:
    if field.kind == "integer":
        try:
            return int(raw)
        except ValueError:
            raise ValueError("must be a whole number") from None
    if field.kind == "number":
        try:
            number = float(raw)
        except ValueError:
            raise ValueError("must be a number") from None
        if not math.isfinite(number):
            raise ValueError("must be a finite number")
        return number
    if field.kind == "enum":
        for choice in field.choices:
            if field.choice_text(choice) == raw:
                return choice
        raise ValueError("must be one of the choices")
    if field.kind == "json":
        try:
            return json.loads(raw)
        except ValueError:
            raise ValueError("is not valid JSON") from None
    return raw

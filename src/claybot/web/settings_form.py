"""A plugin's settings form, generated from its settings model, and the form's answer
turned back into settings. Pure: no I/O, no engine.

The model is the plugin's pydantic model (``PluginDefinition.settings_model``). Each
field becomes one input: a text, number or password box, a checkbox or a list of
choices; what has no input of its own (a nested model, a list, a union of shapes) is
a JSON text box. A model with no fields that takes any keys asks for the whole
settings as JSON.

Typing the answer is all that happens here: checking it is the plugin's model's job,
when the engine loads the instance, so the rules live in one place. A value left as
its default is not sent, so an instance keeps following the plugin's default (the
engine stores only what was given).
"""

from __future__ import annotations

import datetime
import inspect
import json
import math
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import PurePath
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from uuid import UUID

import annotated_types
from pydantic import AnyUrl, BaseModel, Secret, SecretBytes, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError, PydanticUndefined, to_jsonable_python

from claybot.config.redaction import is_secret_field

FieldKind = Literal["string", "integer", "number", "boolean", "enum", "json"]
FIELD_PREFIX = "setting."  # form names, apart from the form's own (csrf, instanceId)
WHOLE = ""  # the one field of a form for a model that takes any keys: all the settings
_NO_DEFAULT: Any = object()


@dataclass(frozen=True)
class FormField:
    name: str  # the settings' key, as the model spells it (its alias)
    label: str
    kind: FieldKind
    required: bool = False
    help: str = ""
    secret: bool = False  # marked secret in the model: a password box, never shown back
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
        """The help shown under the input: the field's description, and how to write
        a value that has no input of its own."""
        if self.kind != "json":
            return self.help
        return f"{self.help} As JSON." if self.help else "As JSON."

    def choice_text(self, choice: Any) -> str:
        """How a choice reads in the form, and the value its option posts."""
        return choice if isinstance(choice, str) else json.dumps(choice)


def fields_of(model: type[BaseModel]) -> list[FormField]:
    """The form's inputs, in the order of the model's fields."""
    fields = model.model_fields
    if not fields:
        if model.model_config.get("extra") == "allow":  # takes any keys: a JSON object
            return [FormField(WHOLE, "Settings (JSON)", "json", help="A JSON object.")]
        return []  # a model with no settings
    return [_field(name, field) for name, field in fields.items()]


def _field(name: str, field: FieldInfo) -> FormField:
    shape, marks = _shape(field.annotation)
    marks = [*field.metadata, *marks]
    kind: FieldKind = "json"
    choices: tuple[Any, ...] = ()
    if get_origin(shape) is Literal:
        kind, choices = "enum", get_args(shape)
    elif isinstance(shape, type) and issubclass(shape, Enum):
        kind, choices = "enum", tuple(member.value for member in shape)
    elif isinstance(shape, type):
        kind = next((kind for kind, typed in _KINDS if issubclass(shape, typed)), "json")
    key = field.validation_alias if isinstance(field.validation_alias, str) else name
    return FormField(
        name=key,
        label=_label(key, field.title),
        kind=kind,
        required=field.is_required(),
        help=field.description or _docstring(shape),
        secret=is_secret_field(field),
        default=_default(field),
        choices=choices,
        minimum=_bound(marks, annotated_types.Ge),
        maximum=_bound(marks, annotated_types.Le),
    )


# The input a type is typed in, in this order (a bool is an int). What has none (a
# nested model, a list, a mapping, a union of shapes) is typed as JSON.
_KINDS: tuple[tuple[FieldKind, tuple[type, ...]], ...] = (
    ("boolean", (bool,)),
    ("integer", (int,)),
    ("number", (float,)),
    ("string", (str, SecretStr, SecretBytes, AnyUrl, PurePath, UUID)),
    ("string", (datetime.date, datetime.time, datetime.timedelta)),
)


def _shape(annotation: Any) -> tuple[Any, list[Any]]:
    """A field's own type: an optional field's ``X | None`` is X, ``Annotated[X, ...]`` is X
    (with the constraints it adds), ``Secret[X]`` is X."""
    marks: list[Any] = []
    while True:
        origin = get_origin(annotation)
        arguments = get_args(annotation)
        if origin is Annotated:
            for mark in arguments[1:]:
                if isinstance(mark, FieldInfo):
                    marks.extend(mark.metadata)
                elif isinstance(mark, annotated_types.GroupedMetadata):  # an Interval
                    marks.extend(mark)
                else:
                    marks.append(mark)
            annotation = arguments[0]
        elif origin is Secret:  # typed as what it hides (and secret: a password box)
            annotation = arguments[0]
        elif origin is Union or origin is types.UnionType:
            kept = [branch for branch in arguments if branch is not type(None)]
            if len(kept) != 1:
                return annotation, marks
            annotation = kept[0]
        else:
            return annotation, marks


def _default(field: FieldInfo) -> Any:
    """The default as JSON, as the form shows and posts it; none for a computed one."""
    if field.default is PydanticUndefined:
        return _NO_DEFAULT
    try:
        return to_jsonable_python(field.default)
    except PydanticSerializationError:
        return _NO_DEFAULT


def _docstring(shape: Any) -> str:
    """A nested model's or an enum's docstring, which says what its values mean."""
    if not (isinstance(shape, type) and issubclass(shape, BaseModel | Enum)):
        return ""
    return inspect.cleandoc(shape.__doc__) if shape.__doc__ else ""


def _bound(marks: list[Any], kind: type[annotated_types.Ge | annotated_types.Le]) -> float | None:
    for mark in marks:
        if isinstance(mark, kind):
            value = mark.ge if isinstance(mark, annotated_types.Ge) else mark.le
            if isinstance(value, int | float) and not isinstance(value, bool):
                return value
    return None


_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_UNITS = {"s": "(s)", "ms": "(ms)", "mb": "(MB)", "kb": "(KB)", "gb": "(GB)"}
_ACRONYMS = {"url": "URL", "urls": "URLs", "api": "API", "http": "HTTP", "mcp": "MCP", "ip": "IP"}


def _label(name: str, title: str | None) -> str:
    """The field's title if it has one; else the key's words (``maxBytes`` gives "Max
    bytes"), a unit at the end in brackets."""
    if title:
        return title
    words = [word.lower() for word in _WORD.findall(name)] or [name]
    if len(words) > 1 and words[-1] in _UNITS:
        words[-1] = _UNITS[words[-1]]
    text = " ".join(_ACRONYMS.get(word, word) for word in words)
    return text[:1].upper() + text[1:]


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
    """The settings a form's answer gives, typed by the model, and the inputs that
    could not be read as their type. An empty box or a value left at its default is
    not sent; an unchecked box is ``False``. A dict rather than a model: the values
    are a plugin's settings, whose own model (known only at run time) the engine
    validates them with when it loads the instance."""
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

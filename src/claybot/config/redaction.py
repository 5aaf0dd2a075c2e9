"""Secrets in settings, and the views of settings that hide them. Pure.

settings.json keeps the real values and the engine runs with them; what leaves the
engine (API responses, events, logs, CLI output) is a redacted view. Two ways mark
a value as secret:

- the settings model says so: a field declared with ``json_schema_extra=SECRET``
  (``writeOnly`` in its JSON schema, the JSON Schema word for "may be set, is never
  read back"), or typed ``SecretStr``; ``redact_by_model`` follows the model's fields
  into nested models, lists, mappings and the branches of unions;
- its key says so, for free-form options no model describes (a provider's
  ``options``) and as a second net under every model: ``apiKey``, ``token``,
  ``password``, ``clientSecret``, ``Authorization``, ``OPENAI_API_KEY``...

A redacted value keeps its shape: a mapping keeps its keys (which variables an MCP
server gets is not secret, their values are), a list its length.
"""

from __future__ import annotations

import re
import types
from collections.abc import Collection, Mapping
from typing import Annotated, Any, Union, get_args, get_origin
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, Secret, SecretBytes, SecretStr
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo

REDACTED = "[redacted]"
# Spread into Field(json_schema_extra=...) to mark a settings field as secret.
SECRET: JsonDict = {"writeOnly": True}

# A key naming a secret anywhere in it ("clientSecret", "Proxy-Authorization")...
_SECRET_WORDS = frozenset(
    {"authorization", "bearer", "cookie", "credential", "credentials", "passphrase", "passwd"}
    | {"password", "secret"}
)
# ...or at its end ("apiKey", "OPENAI_API_KEY", "botToken"; not "maxTokens", "keyId").
_SECRET_LAST_WORDS = frozenset({"apikey", "jwt", "key", "pat", "token"})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def is_secret_name(name: str) -> bool:
    """Whether a key such as ``apiKey``, ``api_key`` or ``X-Api-Key`` names a secret."""
    words = [word.lower() for word in _WORD.findall(name)]
    return bool(words) and (
        words[-1] in _SECRET_LAST_WORDS or any(word in _SECRET_WORDS for word in words)
    )


def redact_value(value: Any) -> Any:
    """``value`` with every scalar in it replaced by ``REDACTED``; None stays None."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return {key: redact_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(item) for item in value]
    return REDACTED


def redact_named(value: Any) -> Any:
    """``value`` with what sits under secret-naming keys redacted, at any depth.

    Two more places hold a value under a name: URLs lose the password of their user
    part and their secret-naming query parameters (``https://user:pw@host/?token=x``),
    and command lines the value of a secret-naming option (``--api-key x``,
    ``--token=x``).
    """
    if isinstance(value, Mapping):
        return {
            key: redact_value(item)
            if isinstance(key, str) and is_secret_name(key)
            else redact_named(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return _redact_arguments([redact_named(item) for item in value])
    if isinstance(value, str) and "://" in value:
        return _redact_url(value)
    return value


def is_secret_field(field: FieldInfo) -> bool:
    """Whether a model's field is marked secret: ``json_schema_extra=SECRET``, or a
    secret type (``SecretStr``, ``SecretBytes``, ``Secret[...]``)."""
    extra = field.json_schema_extra
    return (isinstance(extra, Mapping) and extra.get("writeOnly") is True) or is_secret_type(
        field.annotation
    )


def is_secret_type(annotation: Any) -> bool:
    """``SecretStr``, ``SecretBytes``, ``Secret[...]``, or one of them optional."""
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        kept = [branch for branch in get_args(annotation) if branch is not type(None)]
        return len(kept) == 1 and is_secret_type(kept[0])
    if origin is Annotated:
        return is_secret_type(get_args(annotation)[0])
    kind = origin or annotation
    return isinstance(kind, type) and issubclass(kind, SecretStr | SecretBytes | Secret)


def _fields_of(annotation: Any) -> dict[str, FieldInfo] | None:
    """The fields of a pydantic model or pydantic dataclass; None for any other type."""
    if not isinstance(annotation, type):
        return None
    fields = getattr(annotation, "__pydantic_fields__", None)
    return fields if isinstance(fields, dict) else None


def _by_key(fields: dict[str, FieldInfo]) -> dict[str, FieldInfo]:
    """Fields by each key settings may spell them with: the name and its aliases."""
    keyed: dict[str, FieldInfo] = {}
    for name, field in fields.items():
        for key in (name, field.alias, field.validation_alias, field.serialization_alias):
            if isinstance(key, str):
                keyed.setdefault(key, field)
    return keyed


def redact_by_model(model: type[BaseModel], value: Any) -> Any:
    """``value`` (settings as stored, not validated) with what ``model`` marks secret redacted."""
    return _by_type(model, value)


def public_settings(model: type[BaseModel], value: Any) -> Any:
    """The view of settings that may leave the engine."""
    return redact_named(redact_by_model(model, value))


def _by_type(annotation: Any, value: Any) -> Any:
    if is_secret_type(annotation):
        return redact_value(value)
    origin = get_origin(annotation)
    arguments = get_args(annotation)
    if origin is Annotated:
        marks = [mark for mark in arguments[1:] if isinstance(mark, FieldInfo)]
        if any(is_secret_field(mark) for mark in marks):
            return redact_value(value)
        return _by_type(arguments[0], value)
    # Optional and union fields: each branch redacts what it would mark. A branch that
    # does not fit the value redacts nothing it does not name, so erring means hiding.
    if origin is Union or origin is types.UnionType:
        for branch in arguments:
            value = _by_type(branch, value)
        return value
    fields = _fields_of(annotation)
    if fields is not None:
        if not isinstance(value, Mapping):
            return value
        fields = _by_key(fields)
        return {
            key: _by_field(fields[key], item) if key in fields else item
            for key, item in value.items()
        }
    if isinstance(value, Mapping) and arguments and _is_a(origin, Mapping):
        return {key: _by_type(arguments[-1], item) for key, item in value.items()}
    if isinstance(value, list) and arguments and _is_a(origin, Collection):
        if origin is tuple and arguments[-1] is not Ellipsis:  # tuple[A, B]: by position
            return [_by_type(arguments[min(n, len(arguments) - 1)], item)
                    for n, item in enumerate(value)]  # fmt: skip
        return [_by_type(arguments[0], item) for item in value]
    return value


def _by_field(field: FieldInfo, value: Any) -> Any:
    return redact_value(value) if is_secret_field(field) else _by_type(field.annotation, value)


def _is_a(origin: Any, kinds: Any) -> bool:
    return isinstance(origin, type) and issubclass(origin, kinds)


def _redact_arguments(items: list[Any]) -> list[Any]:
    redacted = list(items)
    for index, item in enumerate(items):
        if not isinstance(item, str) or not item.startswith("-"):
            continue
        name, equals, _ = item.partition("=")
        if not is_secret_name(name.lstrip("-")):
            continue
        if equals:
            redacted[index] = f"{name}={REDACTED}"
        elif index + 1 < len(items) and isinstance(items[index + 1], str):
            redacted[index + 1] = REDACTED
    return redacted


def _redact_url(text: str) -> str:
    try:
        parts = urlsplit(text)
        password = parts.password
    except ValueError:
        return text
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    secret_query = any(is_secret_name(name) for name, _ in pairs)
    if not parts.scheme or not parts.netloc or (password is None and not secret_query):
        return text
    netloc = parts.netloc
    if password is not None:
        netloc = f"{parts.username or ''}:{REDACTED}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if secret_query:
        query = urlencode(
            [(name, REDACTED if is_secret_name(name) else item) for name, item in pairs],
            safe="[]",
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))

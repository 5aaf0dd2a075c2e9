"""Secrets in settings, and the views of settings that hide them. Pure.

settings.json keeps the real values and the engine runs with them; what leaves the
engine (API responses, events, logs, CLI output) is a redacted view. Two ways mark
a value as secret:

- the settings model says so: a field declared with ``json_schema_extra=SECRET``,
  or typed ``SecretStr``, is ``writeOnly`` in its JSON schema (the JSON Schema word
  for "may be set, is never read back"), and ``redact_by_schema`` follows the schema;
- its key says so, for free-form options no model describes (a provider's
  ``options``) and as a second net under every model: ``apiKey``, ``token``,
  ``password``, ``clientSecret``, ``Authorization``, ``OPENAI_API_KEY``...

A redacted value keeps its shape: a mapping keeps its keys (which variables an MCP
server gets is not secret, their values are), a list its length.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic.config import JsonDict

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


def redact_by_schema(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` with what its JSON schema marks ``writeOnly`` redacted."""
    definitions = schema.get("$defs")
    return _by_schema(schema, value, definitions if isinstance(definitions, Mapping) else {})


def public_settings(schema: Mapping[str, Any] | None, value: Any) -> Any:
    """The view of settings that may leave the engine.

    Without a schema nothing can say which values are secret, so all of them are hidden.
    """
    if schema is None:
        return redact_value(value)
    return redact_named(redact_by_schema(schema, value))


def _by_schema(node: Mapping[str, Any], value: Any, definitions: Mapping[str, Any]) -> Any:
    if node.get("writeOnly") is True:
        return redact_value(value)
    reference = node.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        target = definitions.get(reference.removeprefix("#/$defs/"))
        if isinstance(target, Mapping):
            value = _by_schema(target, value, definitions)
    # Optional and union fields: each branch redacts what it would mark. A branch that
    # does not fit the value redacts nothing it does not name, so erring means hiding.
    for combinator in ("allOf", "anyOf", "oneOf"):
        for branch in node.get(combinator) or ():
            if isinstance(branch, Mapping):
                value = _by_schema(branch, value, definitions)
    if isinstance(value, Mapping):
        properties = node.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        extra = node.get("additionalProperties")
        redacted = {}
        for key, item in value.items():
            item_schema = properties.get(key, extra)
            if isinstance(item_schema, Mapping):
                item = _by_schema(item_schema, item, definitions)
            redacted[key] = item
        return redacted
    items = node.get("items")
    if isinstance(value, list) and isinstance(items, Mapping):
        return [_by_schema(items, item, definitions) for item in value]
    return value


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

"""What every provider reads from its settings: typed options, the endpoint and its key,
and vendor errors put in words (without the key). Importing it imports no vendor SDK."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
from claybot.providers.base import Endpoint, ProviderConfigError

DEFAULT_TIMEOUT_S = 60.0
# Low on purpose: the router falls through to the next provider instead of waiting.
DEFAULT_MAX_RETRIES = 1
# Local servers (Ollama, llama-server, vLLM) ignore the key, but the SDKs insist on one.
PLACEHOLDER_KEY = "no-key-needed"
MAX_ERROR_CHARS = 300

T = TypeVar("T")


def option(settings: ProviderSettings, name: str, kind: Callable[[Any], T], default: T) -> T:
    """``settings.options[name]`` converted by ``kind``; a bad value names the field."""
    raw = settings.options.get(name)
    if raw is None:
        return default
    try:
        return kind(raw)
    except (TypeError, ValueError):
        raise ProviderConfigError(
            settings.id, f"options.{name} must be a {kind.__name__}, got {raw!r}"
        ) from None


def resolve_endpoint(
    settings: ProviderSettings,
    auth: AuthEntry | None,
    env: Mapping[str, str],
    *,
    vendor_host: str,
    key_variable: str,
    url_variable: str,
) -> Endpoint:
    """Where requests go, and with which key.

    The key is the auth entry's ``apiKey``, else the key variable. A key from the
    environment only goes where it belongs: the vendor's own API or the URL variable's
    endpoint, never to an ``options.baseUrl`` elsewhere (an OpenRouter or Ollama entry
    must not receive the OpenAI key). Any other endpoint without a key gets a
    placeholder, since local servers need none.
    """
    configured = option(settings, "baseUrl", str, "") or None
    base_url = configured or env.get(url_variable) or None
    key = auth.secret("apiKey") if auth is not None else None
    if key:
        return Endpoint(base_url, key, "auth.json")
    if configured is None or urlsplit(configured).hostname == vendor_host:
        key = env.get(key_variable)
    if key:
        return Endpoint(base_url, key, f"${key_variable}")
    if base_url and urlsplit(base_url).hostname != vendor_host:
        return Endpoint(base_url, PLACEHOLDER_KEY)
    raise ProviderConfigError(
        settings.id,
        f"no API key: run `claybot auth set {settings.id} apiKey <key>` or set {key_variable} "
        "(a local server that needs no key only needs options.baseUrl)",
    )


def vendor_message(body: object) -> str | None:
    """The human part of an error body: ``{"error": {"message": ...}}`` or plain text."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    if isinstance(body, str) and body.strip():
        return body.strip()
    return None


def redact(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


def endpoint_of(url: str) -> str:
    """scheme://host:port of a URL, leaving out any credentials and path."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"

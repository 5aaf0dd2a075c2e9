"""Each enabled provider: it has a key where its type needs one, and its endpoint answers.

The endpoint is probed with one plain GET of its base URL, without the key: any HTTP
answer (404 included) means the server is there; no model is called, so nothing is
paid for. The key is found exactly as the provider finds it (``ProviderType.locate``).
"""

from __future__ import annotations

import httpx

from claybot.config.settings import ProviderSettings
from claybot.doctor.context import DoctorContext
from claybot.doctor.finding import Finding, fail, ok, warn
from claybot.providers.base import ProviderConfigError, ProviderType
from claybot.providers.options import endpoint_of, redact
from claybot.providers.registry import DEFAULT_PROVIDER, builtin_provider_types

MAX_REASON_CHARS = 200


def check_providers(context: DoctorContext) -> list[Finding]:
    if context.settings is None:
        return []  # config.settings says why
    types = {provider_type.type: provider_type for provider_type in builtin_provider_types()}
    configured = context.settings.providers
    if not context.settings.enabled_providers():
        note = "no provider is enabled" if configured else "no provider is configured"
        return [ok("provider.local", f"{note}: the engine answers with `local` (see local.*)")]
    findings: list[Finding] = []
    for provider in configured:
        if not provider.enabled:
            findings.append(ok(f"provider.{provider.id}", "disabled: not checked"))
            continue
        findings += _provider(context, provider, types.get(provider.provider_type))
    return findings


def _provider(
    context: DoctorContext, provider: ProviderSettings, provider_type: ProviderType | None
) -> list[Finding]:
    check = f"provider.{provider.id}"
    if provider_type is None:
        return [
            warn(
                check,
                f"type {provider.provider_type!r} is not built in (a plugin may add it): "
                "not checked",
                f"claybot plugins list (is the plugin that adds it installed?), or "
                f"claybot providers disable {provider.id}",
            )
        ]
    if provider_type.locate is None:
        detail = f"type {provider_type.type}: needs no key and no network"
        if provider_type.type == DEFAULT_PROVIDER.provider_type:
            detail += " (the model is checked under local.*)"
        return [ok(check, detail)]
    auth = context.auth.get(provider.id) if context.auth is not None else None
    try:
        endpoint = provider_type.locate(provider, auth, context.env)
    except ProviderConfigError as exc:
        return [fail(f"{check}.key", str(exc), f"claybot auth set {provider.id} apiKey")]
    key = f"key from {endpoint.key_source}" if endpoint.key_source else "no key needed"
    findings = [ok(f"{check}.key", f"{key} ({provider_type.label})")]
    url = endpoint.base_url or ""
    where = endpoint_of(url)
    try:
        with httpx.Client(timeout=context.limits.probe_timeout_s) as client:
            answer = client.get(url)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        reason = redact(f"{type(exc).__name__}: {exc}", endpoint.key)[:MAX_REASON_CHARS]
        findings.append(
            fail(
                f"{check}.endpoint",
                f"{where} does not answer ({reason})",
                f"start the server at {where}, or `claybot providers disable {provider.id}`",
            )
        )
    else:
        findings.append(
            ok(f"{check}.endpoint", f"{where} answers (HTTP {answer.status_code} to a GET)")
        )
    return findings

"""Inference providers as settings.json has them (secrets redacted), and the known types."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from claybot.wire.base import Answer, Ok, Omitted


class PublicProvider(Answer):
    """A provider entry of settings.json; options whose names say secret are redacted."""

    id: str
    type: str | Omitted = Field(default=None, description="Left out: the id names the type")
    enabled: bool
    model: str | Omitted = None
    options: dict[str, Any]


class ProviderTypeSummary(Answer):
    type: str
    label: str
    description: str


class ProviderList(Ok):
    """The providers in priority order, after the change."""

    providers: list[PublicProvider]
    failures: dict[str, str] = Field(
        default_factory=dict, description="Why a provider could not be built, by id"
    )


class ProviderListing(ProviderList):
    types: list[ProviderTypeSummary]


class ProviderTested(Ok):
    """One small real call to the provider: its answer, or why there was none."""

    providerId: str
    answered: bool
    answer: str = Field(description="The model's reply; empty when it did not answer")
    reason: str = Field(description="Why it did not answer; empty when it did")
    model: str
    latencyMs: float


class AuthEntrySummary(Answer):
    type: str
    fields: list[str] = Field(description="The fields' names; their values are never shown")


class AuthListing(Ok):
    """auth.json's entries by id, without a single value."""

    entries: dict[str, AuthEntrySummary]


class AuthRemoved(Ok):
    id: str
    key: str | Omitted = Field(default=None, description="Left out: the whole entry went")


class AuthFieldSet(Ok):
    """The credential was written to auth.json; its value is never echoed."""

    id: str
    key: str

"""The dashboard's socket routes: login links and sessions."""

from __future__ import annotations

from pydantic import Field

from claybot.wire.base import Answer, Ok


class DashboardLink(Ok):
    url: str = Field(description="Open it in a browser: it logs in once, within expiresInS")
    expiresInS: int


class DashboardSession(Answer):
    id: str
    createdAt: str = Field(description="ISO 8601, UTC")
    expiresAt: str = Field(description="ISO 8601, UTC")
    lastSeenAt: str = Field(description="ISO 8601, UTC")
    via: str = Field(description="How it began: `login link`, or `API key <prefix>`")
    scopes: list[str] = Field(description="What its pages may do: a link's has `admin`")


class DashboardSessions(Ok):
    sessions: list[DashboardSession]

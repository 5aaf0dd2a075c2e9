"""The dashboard's Settings pages: plugins, providers, credentials and the engine log."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(include_in_schema=False)

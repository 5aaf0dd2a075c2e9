"""The dashboard's Jobs pages (seed 002's jobs, through the engine's own job database)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(include_in_schema=False)

"""Identifier generation (cuid2), injectable where tests need determinism."""

from __future__ import annotations

from collections.abc import Callable

from cuid2 import Cuid, is_cuid

IdFactory = Callable[[], str]

_generator = Cuid()


def new_id() -> str:
    return str(_generator.generate())


def looks_like_id(value: str) -> bool:
    return bool(is_cuid(value))

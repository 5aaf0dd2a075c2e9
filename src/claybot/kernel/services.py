"""The services a door (the HTTP API, the dashboard) reaches, each found by its type.

The engine provides them as it builds them; a route names the one it needs in its
signature (``api/deps.py`` turns the type into a FastAPI dependency), and a test
provides its own twin in the engine's place. A service that exists only while the
engine runs (the agents, say) is provided as a factory that raises until then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["ServiceMissing", "ServiceRegistry"]

T = TypeVar("T")


class ServiceMissing(LookupError):
    """No service of this type was provided."""


class ServiceRegistry:
    def __init__(self) -> None:
        self._factories: dict[type[Any], Callable[[], Any]] = {}

    def provide(self, kind: type[T], factory: Callable[[], T]) -> None:
        """Make ``factory()`` the ``kind`` service (it replaces one provided before)."""
        self._factories[kind] = factory

    def get(self, kind: type[T]) -> T:
        factory = self._factories.get(kind)
        if factory is None:
            raise ServiceMissing(f"no {kind.__name__} service was provided")
        service = factory()
        if not isinstance(service, kind):
            raise TypeError(f"the {kind.__name__} service is a {type(service).__name__}")
        return service

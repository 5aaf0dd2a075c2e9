"""The service registry the doors reach the engine's services through."""

from __future__ import annotations

import pytest

from claybot.kernel.services import ServiceMissing, ServiceRegistry


class Desk:
    pass


class Clerk:
    pass


def test_a_service_is_found_by_its_type_each_time_from_its_factory() -> None:
    services = ServiceRegistry()
    desks = iter([Desk(), Desk()])
    services.provide(Desk, lambda: next(desks))
    first, second = services.get(Desk), services.get(Desk)
    assert isinstance(first, Desk) and isinstance(second, Desk)
    assert first is not second  # asked each time: a service that exists only while running


def test_a_service_not_provided_is_named_in_the_error() -> None:
    with pytest.raises(ServiceMissing, match="no Desk service"):
        ServiceRegistry().get(Desk)


def test_a_factory_that_answers_with_another_type_is_refused() -> None:
    services = ServiceRegistry()
    services.provide(Desk, lambda: Clerk())  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match="the Desk service is a Clerk"):
        services.get(Desk)


def test_a_factory_that_raises_raises_at_the_request_not_at_provide() -> None:
    services = ServiceRegistry()

    def not_started() -> Desk:
        raise RuntimeError("the engine is not started")

    services.provide(Desk, not_started)
    with pytest.raises(RuntimeError, match="not started"):
        services.get(Desk)

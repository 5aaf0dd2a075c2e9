"""Three guards every test runs under (a pytest plugin, loaded by conftest.py).

- **No network outside loopback.** Everything a test talks to (fake vendors, fake
  Telegram, the engine's own socket) lives on this machine; a connection or name
  lookup for anything else fails at once with ``NetworkBlocked`` instead of
  waiting for a timeout or, worse, reaching a real service. Engine subprocesses
  are outside this guard; their providers point at loopback fakes.
- **Nothing blocks the event loop.** Loops run in asyncio debug mode
  (``asyncio_debug`` in pyproject.toml), whose slow-callback threshold is 100 ms
  (``SLOW_CALLBACK_S``): a step that holds the loop longer is recorded
  with the test that caused it, and listed at the end of the run. Set
  ``CLAYBOT_STRICT_LOOP=1`` to fail such a test instead (on a quiet machine: a
  shared, busy one also stretches steps that do not block).
- **Every event is what its type says.** Each event an in-process engine emits
  whose type is an ``EventType`` is checked against its payload type
  (``claybot.kernel.event_types``), extra keys refused: a payload that drifts
  from its description fails the test that emitted it.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import TypeAdapter

from claybot.kernel.event_types import PAYLOAD_TYPES, EventType
from claybot.kernel.events import EventBus

_PAYLOAD_ADAPTERS = {kind: TypeAdapter(model) for kind, model in PAYLOAD_TYPES.items()}
_ENGINE_TYPES = frozenset(kind.value for kind in EventType)


def check_event_payload(type: str, payload: Any) -> None:
    """Raise ``pydantic.ValidationError`` if an engine event's payload is not its type."""
    adapter = _PAYLOAD_ADAPTERS.get(EventType(type)) if type in _ENGINE_TYPES else None
    if adapter is not None:
        adapter.validate_python(payload, strict=True)


@pytest.fixture(autouse=True)
def events_match_their_types(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    emit = EventBus.emit
    wrong: list[str] = []

    def checked_emit(self: EventBus, type: str, payload: dict[str, Any] | None = None) -> Any:
        try:
            check_event_payload(type, payload or {})
        except ValueError as exc:  # pydantic's ValidationError; the emitter may swallow it
            wrong.append(f"{type}: {exc}")
            raise
        return emit(self, type, payload)

    monkeypatch.setattr(EventBus, "emit", checked_emit)
    yield
    if wrong:
        pytest.fail("an event's payload is not its type: " + wrong[0])


SLOW_CALLBACK_S = 0.1
LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


class NetworkBlocked(ConnectionRefusedError):
    """A test tried to reach a host that is not this machine."""


def _is_loopback(host: object) -> bool:
    if not isinstance(host, (str, bytes)):
        return False
    name = host.decode() if isinstance(host, bytes) else host
    if name.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _check(address: Any) -> None:
    if isinstance(address, (str, bytes)):
        return  # a Unix socket path
    host = address[0] if isinstance(address, tuple) and address else address
    if not _is_loopback(host):
        raise NetworkBlocked(f"tests may only reach loopback, not {address!r}")


@pytest.fixture(autouse=True)
def no_network_beyond_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    connect = socket.socket.connect
    connect_ex = socket.socket.connect_ex
    getaddrinfo = socket.getaddrinfo

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if self.family != socket.AF_UNIX:
            _check(address)
        connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        if self.family != socket.AF_UNIX:
            _check(address)
        return connect_ex(self, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not _is_loopback(host):
            raise NetworkBlocked(f"tests may only look up loopback names, not {host!r}")
        return getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)


# -- the event loop watch ---------------------------------------------------------------


class _SlowSteps(logging.Handler):
    """Collects asyncio's "Executing <step> took 0.150 seconds" warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Executing ") and " took " in message:
            self.seen.append(message)


SLOW_STEPS: list[tuple[str, str]] = []


@pytest.fixture(autouse=True)
def loop_is_never_blocked(request: pytest.FixtureRequest) -> Iterator[None]:
    handler = _SlowSteps()
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    if request.node.get_closest_marker("blocks_loop_on_purpose"):
        return
    SLOW_STEPS.extend((request.node.nodeid, step) for step in handler.seen)
    if handler.seen and os.environ.get("CLAYBOT_STRICT_LOOP") == "1":
        pytest.fail("the event loop was blocked:\n" + "\n".join(handler.seen), pytrace=False)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not SLOW_STEPS:
        return
    terminalreporter.section(f"event loop blocked for more than {SLOW_CALLBACK_S * 1000:.0f} ms")
    for nodeid, step in SLOW_STEPS:
        terminalreporter.write_line(f"{nodeid}: {_summary(step)}")


def _summary(step: str) -> str:
    """``<coroutine or callback> at <file:line>: 0.150 s`` out of asyncio's long repr."""
    took = re.search(r" took ([0-9.]+) seconds", step)
    what = re.search(r"coro=<(\S+?\(\))", step) or re.search(
        r"Executing <Handle ([^>]+?)(?: created|>)", step
    )
    name = what.group(1) if what else step[10:120]
    return f"{name}: {took.group(1) if took else '?'} s"

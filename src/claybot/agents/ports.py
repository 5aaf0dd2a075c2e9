"""What the agent runtime needs from outside, as small protocols.

The engine plugs in the real ones (connectors, the configured providers); tests
and a job runner plug in their own. The runtime calls out through these and
never back into the engine.
"""

from __future__ import annotations

from typing import Protocol

from claybot.agents.turn import TurnOutcome
from claybot.connectors.base import OutgoingMessage
from claybot.providers.base import InferenceRequest, InferenceResult
from claybot.providers.router import CallObserver


class Outbox(Protocol):
    """Delivery of an agent's outgoing message (through its connector, if it has one)."""

    @property
    def holding(self) -> bool:
        """True once the engine is stopping: nothing is handed to anyone any more (the
        event streams are closed, the connectors going), so a reply made now is kept
        for the next start instead of being sent into the void."""
        ...

    async def deliver(self, message: OutgoingMessage) -> None: ...


class ProviderRouter(Protocol):
    """One inference call, over whichever providers are configured; streamed to the
    observer when there is one."""

    async def complete(
        self, request: InferenceRequest, observer: CallObserver | None = None
    ) -> InferenceResult: ...


class TurnMeter(Protocol):
    """What the runtime counts as it goes (the engine's metrics): kept to a counter's
    cost, since every message passes here."""

    def messages_accepted(self, count: int) -> None:
        """``count`` messages became durable in their inboxes (resets are not counted)."""
        ...

    def turn_ended(self, outcome: TurnOutcome, seconds: float) -> None:
        """A message's turn ended, ``seconds`` after its agent started on it."""
        ...


class _Unmetered:
    def messages_accepted(self, count: int) -> None:
        pass

    def turn_ended(self, outcome: TurnOutcome, seconds: float) -> None:
        pass


UNMETERED: TurnMeter = _Unmetered()

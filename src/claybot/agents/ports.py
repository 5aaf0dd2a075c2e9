"""What the agent runtime needs from outside, as small protocols.

The engine plugs in the real ones (connectors, the configured providers); tests
and a job runner plug in their own. The runtime calls out through these and
never back into the engine.
"""

from __future__ import annotations

from typing import Protocol

from claybot.connectors.base import OutgoingMessage
from claybot.providers.base import InferenceRequest, InferenceResult
from claybot.providers.router import CallObserver


class Outbox(Protocol):
    """Delivery of an agent's outgoing message (through its connector, if it has one)."""

    async def deliver(self, message: OutgoingMessage) -> None: ...


class ProviderRouter(Protocol):
    """One inference call, over whichever providers are configured; streamed to the
    observer when there is one."""

    async def complete(
        self, request: InferenceRequest, observer: CallObserver | None = None
    ) -> InferenceResult: ...

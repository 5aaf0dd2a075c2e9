"""Delivery of agents' outgoing messages through the loaded connectors."""

from __future__ import annotations

import logging
from typing import Protocol

from claybot.connectors.base import Connector, OutgoingMessage

log = logging.getLogger(__name__)


class Connectors(Protocol):
    def get(self, connector_id: str) -> Connector | None: ...


class ConnectorOutbox:
    """Hands a message to its connector; one that fails is logged, never raised.

    A message without a loaded connector (the ``local`` one of the CLI and socket
    API, or a background agent's) is not sent anywhere: its clients follow the
    ``agent.outgoing`` events the runtime emits.
    """

    def __init__(self, connectors: Connectors) -> None:
        self._connectors = connectors
        self.holding = False

    def hold(self) -> None:
        """From now on nothing goes out: the engine is stopping (see ``Outbox.holding``)."""
        self.holding = True

    async def deliver(self, message: OutgoingMessage) -> None:
        connector = self._connectors.get(message.connector)
        if connector is None:
            return
        try:
            await connector.send(message)
        except Exception:
            log.exception(
                "connector send failed",
                extra={"action": "connector.send_failed", "connector": message.connector},
            )

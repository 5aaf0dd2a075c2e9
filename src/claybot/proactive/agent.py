"""A proactive agent as the service holds it: its files plus what lives only in memory."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from claybot.proactive.models import AgentConfig, AgentState
from claybot.proactive.output import LiveBuffer
from claybot.scheduling.schedule import CronSchedule


@dataclass
class LoadedAgent:
    config: AgentConfig
    state: AgentState
    schedule: CronSchedule
    live: LiveBuffer = field(default_factory=LiveBuffer)
    save_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    deleted: bool = False

    @property
    def id(self) -> str:
        return self.config.id

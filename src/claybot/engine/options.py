"""What an engine is started with, besides its home (tests and benchmarks set these)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from claybot.kernel.clock import Clock, SystemClock
from claybot.plugins import PluginCatalog

if TYPE_CHECKING:
    from claybot.net.egress import EgressProxy


@dataclass
class EngineOptions:
    port: int | None = None  # overrides settings.engine.port (0 picks a free port)
    durable: bool = True  # False skips fsync (benchmarks of the pure path only)
    catalog: PluginCatalog | None = None  # default: built-ins + the claybot.plugins entry points
    # The runner opens the database once its listeners are up (engine.database.open()).
    defer_database: bool = False
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Clock = field(default_factory=SystemClock)  # what schedules read (tests move it)
    watch_files: bool = True  # pick up TASK.md edits without a restart
    # Jobs' egress proxy; None: the one that lets through public addresses only. Tests
    # (no internet here) pass one whose address rule takes a loopback server for public;
    # no setting, flag or job reaches this.
    egress: EgressProxy | None = None

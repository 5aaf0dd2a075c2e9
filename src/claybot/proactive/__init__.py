"""Proactive agents (seed 004): scheduled objectives run by the Claude CLI or the engine."""

from claybot.proactive.service import ProactiveService, ServiceLimits

__all__ = ["ProactiveService", "ServiceLimits"]

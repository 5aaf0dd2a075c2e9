"""The engine's metrics, in Prometheus' text format (``GET /metrics``).

Each engine has a registry of its own, never prometheus_client's global one: several
engines run in one test process, and each must count only itself. What is counted
comes three ways, the cheapest that can see it:

- events on the bus: ``provider.fallback`` and ``cron.task.started``. One listener
  looks up each event's type in a dict and leaves every other event alone;
- a hook where nothing is emitted: the agent runtime's ``TurnMeter`` (messages
  accepted, turns ended) and the router's ``CallMeter`` (each provider call). Every
  message passes these, so each is a counter increment and a histogram observation
  on a label child made once, never a lookup by label values;
- read when scraped: the inbox depth, the readers the bus dropped, and jobs by
  status (one GROUP BY, left out when the database does not answer quickly).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from claybot.agents.turn import TurnOutcome
from claybot.jobs.model import JobStatus
from claybot.kernel.event_types import EventType
from claybot.kernel.events import Event, EventBus

log = logging.getLogger(__name__)

# The text format generate_latest writes (Prometheus' classic one).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# A scrape waits this long for the job counts at most, then answers without them.
JOB_COUNT_TIMEOUT_S = 2.0

TurnOutcomeLabel = Literal["ok", "failed", "stopped", "asked"]
TURN_OUTCOMES: tuple[TurnOutcomeLabel, ...] = ("ok", "failed", "stopped", "asked")
# An echo turn takes a millisecond; a model's with tools, minutes.
TURN_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
PROVIDER_CALL_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
# A run is a few ms late when all is well; hours when it was caught up after downtime.
CRON_LATENESS_BUCKETS_S = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400)

JobCounts = Callable[[], Awaitable[dict[str, int]]]


def outcome_label(outcome: TurnOutcome) -> TurnOutcomeLabel:
    """How a turn ended, as the ``outcome`` label says it."""
    if outcome.stopped:
        return "stopped"
    if outcome.failed:
        return "failed"
    if outcome.ended_by == "ask":
        return "asked"
    return "ok"


class EngineMetrics:
    """The engine's registry, and what feeds it (a ``TurnMeter`` and a ``CallMeter``)."""

    def __init__(self, events: EventBus, *, pending: Callable[[], int], jobs: JobCounts) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self._accepted = Counter(
            "claybot_messages_accepted",
            "Messages accepted into agents' inboxes (durable, so each will be processed)",
            registry=registry,
        )
        turns = Counter(
            "claybot_turns",
            "Agents' turns that ended, by outcome: ok (answered), failed (every provider "
            "failed, or an error), stopped (/stop), asked (a tool ended it to wait for an "
            "answer)",
            ["outcome"],
            registry=registry,
        )
        self._turns = {outcome: turns.labels(outcome) for outcome in TURN_OUTCOMES}
        self._turn_seconds = Histogram(
            "claybot_turn_duration_seconds",
            "How long an agent's turn ran, from the start of its processing to its end "
            "(the time its message waited in the inbox is not included)",
            buckets=TURN_BUCKETS_S,
            registry=registry,
        )
        self._call_seconds = Histogram(
            "claybot_provider_call_duration_seconds",
            "How long one inference call to one provider took, failed calls included",
            ["provider"],
            buckets=PROVIDER_CALL_BUCKETS_S,
            registry=registry,
        )
        self._provider_errors = Counter(
            "claybot_provider_errors",
            "Inference calls a provider failed (the router then tries the next one)",
            ["provider"],
            registry=registry,
        )
        self._calls: dict[str, tuple[Any, Any]] = {}  # provider id -> its label children
        self._fallbacks = Counter(
            "claybot_provider_fallbacks",
            "Calls handed from a failed provider to the next one (provider.fallback events)",
            ["from", "to"],
            registry=registry,
        )
        self._cron_lateness = Histogram(
            "claybot_cron_lateness_seconds",
            "How late a cron run started after its scheduled time (cron.task.started)",
            buckets=CRON_LATENESS_BUCKETS_S,
            registry=registry,
        )
        registry.register(_ReadWhenScraped(pending, events))
        self._jobs = jobs
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            EventType.PROVIDER_FALLBACK: self._fallback,
            EventType.CRON_TASK_STARTED: self._cron_started,
        }
        events.add_listener(self._on_event)

    # -- the runtime's TurnMeter -----------------------------------------------------------

    def messages_accepted(self, count: int) -> None:
        self._accepted.inc(count)

    def turn_ended(self, outcome: TurnOutcome, seconds: float) -> None:
        self._turns[outcome_label(outcome)].inc()
        self._turn_seconds.observe(seconds)

    # -- the router's CallMeter ------------------------------------------------------------

    def provider_called(self, provider_id: str, seconds: float, *, failed: bool) -> None:
        children = self._calls.get(provider_id)
        if children is None:
            children = (
                self._call_seconds.labels(provider_id),
                self._provider_errors.labels(provider_id),  # 0 from its first call on
            )
            self._calls[provider_id] = children
        children[0].observe(seconds)
        if failed:
            children[1].inc()

    # -- events ------------------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        handler = self._handlers.get(event.type)
        if handler is not None:
            handler(event.payload)

    def _fallback(self, payload: dict[str, Any]) -> None:
        # A listener runs inside emit: a malformed payload is skipped, never raised.
        failed, next_one = payload.get("from"), payload.get("to")
        if isinstance(failed, str) and isinstance(next_one, str):
            self._fallbacks.labels(failed, next_one).inc()

    def _cron_started(self, payload: dict[str, Any]) -> None:
        lateness_ms = payload.get("latenessMs")
        if isinstance(lateness_ms, int | float):
            self._cron_lateness.observe(max(0.0, lateness_ms / 1000))

    # -- the scrape --------------------------------------------------------------------------

    async def exposition(self) -> bytes:
        """Every metric in the text format, the job counts read now."""
        jobs = await self._job_counts()
        return generate_latest(self.registry) + generate_latest(_Families(_job_families(jobs)))

    async def _job_counts(self) -> dict[str, int] | None:
        """Jobs by status; None when the database cannot answer (or not in time)."""
        try:
            async with asyncio.timeout(JOB_COUNT_TIMEOUT_S):
                return await self._jobs()
        except Exception as exc:  # the scrape answers with the rest; the gauge says why not
            log.debug("no job counts for the metrics: %s", exc, extra={"action": "metrics.jobs"})
            return None


class _ReadWhenScraped(Collector):
    """What is cheaper to read when asked than to keep counting."""

    def __init__(self, pending: Callable[[], int], bus: EventBus) -> None:
        self._pending = pending
        self._bus = bus

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "claybot_inbox_pending",
            "Messages and resets accepted and not yet processed: waiting in agents' "
            "inboxes, or their turn running",
            value=self._pending(),
        )
        dropped = CounterMetricFamily(
            "claybot_event_readers_dropped",
            "Event streams ended for being too slow: stalled (stopped reading) or "
            "overflowed (fell the whole event buffer behind); they may reconnect",
            labels=["reason"],
        )
        for reason, count in self._bus.readers_dropped.items():
            dropped.add_metric([reason], count)
        yield dropped


class _Families(Collector):
    """Metric families made for one scrape, in the shape generate_latest reads."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self._families


def _job_families(counts: dict[str, int] | None) -> list[Metric]:
    up = GaugeMetricFamily(
        "claybot_jobs_store_up",
        "1 if the job database answered this scrape's count, 0 if not (claybot_jobs is "
        "then left out)",
        value=0 if counts is None else 1,
    )
    if counts is None:
        return [up]
    jobs = GaugeMetricFamily(
        "claybot_jobs", "Jobs in the job database, by status", labels=["status"]
    )
    for status in JobStatus:
        jobs.add_metric([status.value], counts.get(status.value, 0))
    return [up, jobs]

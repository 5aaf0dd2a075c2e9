"""The engine's metrics, in Prometheus' text format (``GET /metrics``).

Each engine has a registry of its own, never prometheus_client's global one: several
engines run in one test process, and each must count only itself. What is counted
comes three ways, the cheapest that can see it:

- events on the bus: ``provider.fallback`` and ``cron.task.started``. One listener
  looks up each event's type in a dict and leaves every other event alone;
- a hook where nothing is emitted: the agent runtime's ``TurnMeter`` (messages
  accepted, turns ended) and the router's ``CallMeter`` (each provider call). Every
  message passes these, so they count in plain ints and bucket lists (``Tally``,
  ``Buckets``) that a collector turns into metric families when scraped:
  prometheus_client's own Counter and Histogram take a lock and run checks on every
  increment, some thirty calls a message, and the engine counts on one thread;
- read when scraped: the inbox depth, the readers the bus dropped, and jobs by
  status (one GROUP BY, left out when the database does not answer quickly).
"""

from __future__ import annotations

import asyncio
import logging
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, Literal

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

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


Labels = tuple[str, ...]  # label values, in the order of the metric's label names
PLAIN: tuple[Labels] = ((),)  # the one series of a metric without labels


class Tally:
    """A counter by label values; ``shown`` are listed (at 0) before they are counted."""

    __slots__ = ("counts",)

    def __init__(self, shown: Iterable[Labels] = ()) -> None:
        self.counts: dict[Labels, float] = dict.fromkeys(shown, 0)

    def inc(self, labels: Labels = (), amount: float = 1) -> None:
        self.counts[labels] = self.counts.get(labels, 0) + amount

    def family(self, name: str, documentation: str, labels: list[str]) -> CounterMetricFamily:
        counted = CounterMetricFamily(name, documentation, labels=labels)
        for values, count in self.counts.items():
            counted.add_metric(list(values), count)
        return counted


class Buckets:
    """A histogram's bucket counts, sum and count, by label values: an observation is a
    bisection and two additions."""

    __slots__ = ("bounds", "series")

    def __init__(self, bounds: tuple[float, ...], shown: Iterable[Labels] = ()) -> None:
        self.bounds = bounds
        # label values -> (the count in each bucket, the last one +Inf; [the sum])
        self.series: dict[Labels, tuple[list[int], list[float]]] = {}
        for labels in shown:
            self._new(labels)

    def _new(self, labels: Labels) -> tuple[list[int], list[float]]:
        series = self.series[labels] = ([0] * (len(self.bounds) + 1), [0.0])
        return series

    def observe(self, value: float, labels: Labels = ()) -> None:
        series = self.series.get(labels)
        if series is None:
            series = self._new(labels)
        series[0][bisect_left(self.bounds, value)] += 1  # a bucket counts values <= its bound
        series[1][0] += value

    def family(self, name: str, documentation: str, labels: list[str]) -> HistogramMetricFamily:
        histogram = HistogramMetricFamily(name, documentation, labels=labels)
        bounds = [*map(floatToGoString, self.bounds), "+Inf"]
        for values, (counts, total) in self.series.items():
            cumulative, buckets = 0, []
            for bound, count in zip(bounds, counts, strict=True):
                cumulative += count
                buckets.append((bound, float(cumulative)))
            histogram.add_metric(list(values), buckets, total[0])
        return histogram


class EngineMetrics(Collector):
    """The engine's registry, and what feeds it (a ``TurnMeter`` and a ``CallMeter``)."""

    def __init__(self, events: EventBus, *, pending: Callable[[], int], jobs: JobCounts) -> None:
        self.registry = CollectorRegistry()
        self._accepted = Tally(PLAIN)
        self._turns = Tally((outcome,) for outcome in TURN_OUTCOMES)
        self._turn_seconds = Buckets(TURN_BUCKETS_S, PLAIN)
        self._call_seconds = Buckets(PROVIDER_CALL_BUCKETS_S)  # by provider, from its first call
        self._provider_errors = Tally()
        self._fallbacks = Tally()
        self._cron_lateness = Buckets(CRON_LATENESS_BUCKETS_S, PLAIN)
        self.registry.register(self)
        self.registry.register(_ReadWhenScraped(pending, events))
        self._jobs = jobs
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            EventType.PROVIDER_FALLBACK: self._fallback,
            EventType.CRON_TASK_STARTED: self._cron_started,
        }
        events.add_listener(self._on_event)

    def collect(self) -> Iterator[Metric]:
        yield self._accepted.family(
            "claybot_messages_accepted",
            "Messages accepted into agents' inboxes (durable, so each will be processed)",
            [],
        )
        yield self._turns.family(
            "claybot_turns",
            "Agents' turns that ended, by outcome: ok (answered), failed (every provider "
            "failed, or an error), stopped (/stop), asked (a tool ended it to wait for an "
            "answer)",
            ["outcome"],
        )
        yield self._turn_seconds.family(
            "claybot_turn_duration_seconds",
            "How long an agent's turn ran, from the start of its processing to its end "
            "(the time its message waited in the inbox is not included)",
            [],
        )
        yield self._call_seconds.family(
            "claybot_provider_call_duration_seconds",
            "How long one inference call to one provider took, failed calls included",
            ["provider"],
        )
        yield self._provider_errors.family(
            "claybot_provider_errors",
            "Inference calls a provider failed (the router then tries the next one)",
            ["provider"],
        )
        yield self._fallbacks.family(
            "claybot_provider_fallbacks",
            "Calls handed from a failed provider to the next one (provider.fallback events)",
            ["from", "to"],
        )
        yield self._cron_lateness.family(
            "claybot_cron_lateness_seconds",
            "How late a cron run started after its scheduled time (cron.task.started)",
            [],
        )

    # -- the runtime's TurnMeter -----------------------------------------------------------

    def messages_accepted(self, count: int) -> None:
        self._accepted.inc((), count)

    def turn_ended(self, outcome: TurnOutcome, seconds: float) -> None:
        self._turns.inc((outcome_label(outcome),))
        self._turn_seconds.observe(seconds)

    # -- the router's CallMeter ------------------------------------------------------------

    def provider_called(self, provider_id: str, seconds: float, *, failed: bool) -> None:
        labels = (provider_id,)
        self._call_seconds.observe(seconds, labels)
        self._provider_errors.inc(labels, 1 if failed else 0)  # 0 from its first call on

    # -- events ------------------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        handler = self._handlers.get(event.type)
        if handler is not None:
            handler(event.payload)

    def _fallback(self, payload: dict[str, Any]) -> None:
        # A listener runs inside emit: a malformed payload is skipped, never raised.
        failed, next_one = payload.get("from"), payload.get("to")
        if isinstance(failed, str) and isinstance(next_one, str):
            self._fallbacks.inc((failed, next_one))

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

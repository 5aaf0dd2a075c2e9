"""The engine's metrics, in Prometheus' text format (``GET /metrics``).

Each engine counts for itself, never in prometheus_client's global registry: several
engines run in one test process, and each must count only itself. What is counted
comes three ways, the cheapest that can see it:

- events on the bus: ``provider.fallback`` and ``cron.task.started``. One listener
  looks up each event's type in a dict and leaves every other event alone;
- a hook where nothing is emitted: the agent runtime's ``TurnMeter`` (messages
  accepted, turns ended) and the router's ``CallMeter`` (each provider call). Every
  message passes these, so they count in plain ints and bucket lists (``Tally``,
  ``Buckets``), made into metric families only when scraped
  (``claybot.engine.metrics_text``, which alone imports prometheus_client; the route
  imports it at the first scrape). prometheus_client's own Counter and Histogram take
  a lock and run checks on every increment, some thirty calls a message, and the
  engine counts on one thread;
- read when scraped: the inbox depth, the readers the bus dropped, and jobs by
  status (one GROUP BY, left out when the database does not answer quickly).
"""

from __future__ import annotations

import asyncio
import logging
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal

from claybot.agents.turn import TurnOutcome
from claybot.kernel.event_types import EventType
from claybot.kernel.events import Event, EventBus

log = logging.getLogger(__name__)

# Prometheus' classic text format, which the scrape answers in.
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


class EngineMetrics:
    """What the engine counts, and what feeds it (a ``TurnMeter`` and a ``CallMeter``)."""

    def __init__(self, events: EventBus, *, pending: Callable[[], int], jobs: JobCounts) -> None:
        self.accepted = Tally(PLAIN)
        self.turns = Tally((outcome,) for outcome in TURN_OUTCOMES)
        self.turn_seconds = Buckets(TURN_BUCKETS_S, PLAIN)
        self.call_seconds = Buckets(PROVIDER_CALL_BUCKETS_S)  # by provider, from its first call
        self.provider_errors = Tally()
        self.fallbacks = Tally()
        self.cron_lateness = Buckets(CRON_LATENESS_BUCKETS_S, PLAIN)
        self.pending = pending  # read when scraped, like the bus's dropped readers
        self.bus = events
        self._jobs = jobs
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            EventType.PROVIDER_FALLBACK: self._fallback,
            EventType.CRON_TASK_STARTED: self._cron_started,
        }
        events.add_listener(self._on_event)

    # -- the runtime's TurnMeter -----------------------------------------------------------

    def messages_accepted(self, count: int) -> None:
        self.accepted.inc((), count)

    def turn_ended(self, outcome: TurnOutcome, seconds: float) -> None:
        self.turns.inc((outcome_label(outcome),))
        self.turn_seconds.observe(seconds)

    # -- the router's CallMeter ------------------------------------------------------------

    def provider_called(self, provider_id: str, seconds: float, *, failed: bool) -> None:
        labels = (provider_id,)
        self.call_seconds.observe(seconds, labels)
        self.provider_errors.inc(labels, 1 if failed else 0)  # 0 from its first call on

    # -- events ------------------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        handler = self._handlers.get(event.type)
        if handler is not None:
            handler(event.payload)

    def _fallback(self, payload: dict[str, Any]) -> None:
        # A listener runs inside emit: a malformed payload is skipped, never raised.
        failed, next_one = payload.get("from"), payload.get("to")
        if isinstance(failed, str) and isinstance(next_one, str):
            self.fallbacks.inc((failed, next_one))

    def _cron_started(self, payload: dict[str, Any]) -> None:
        lateness_ms = payload.get("latenessMs")
        if isinstance(lateness_ms, int | float):
            self.cron_lateness.observe(max(0.0, lateness_ms / 1000))

    # -- the scrape --------------------------------------------------------------------------

    async def job_counts(self) -> dict[str, int] | None:
        """Jobs by status; None when the database cannot answer (or not in time)."""
        try:
            async with asyncio.timeout(JOB_COUNT_TIMEOUT_S):
                return await self._jobs()
        except Exception as exc:  # the scrape answers with the rest; the gauge says why not
            log.debug("no job counts for the metrics: %s", exc, extra={"action": "metrics.jobs"})
            return None

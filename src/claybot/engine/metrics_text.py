"""The engine's metrics as Prometheus' text format: metric families built from what
``EngineMetrics`` counted, written by prometheus_client. The route imports this at
the first scrape: prometheus_client is not needed before."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from claybot.engine.metrics import Buckets, EngineMetrics, Tally
from claybot.jobs.model import JobStatus


async def exposition(metrics: EngineMetrics) -> bytes:
    """Every metric in the text format, the job counts read now."""
    return render(metrics, await metrics.job_counts())


def render(metrics: EngineMetrics, jobs: dict[str, int] | None) -> bytes:
    """Every family; ``jobs`` (by status) is None when the database did not answer."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families([*_counted(metrics), *_read_now(metrics), *_job_families(jobs)]))
    return generate_latest(registry)


def _counted(metrics: EngineMetrics) -> list[Metric]:
    return [
        _counter(
            metrics.accepted,
            "claybot_messages_accepted",
            "Messages accepted into agents' inboxes (durable, so each will be processed)",
            [],
        ),
        _counter(
            metrics.turns,
            "claybot_turns",
            "Agents' turns that ended, by outcome: ok (answered), failed (every provider "
            "failed, or an error), stopped (/stop), asked (a tool ended it to wait for an "
            "answer)",
            ["outcome"],
        ),
        _histogram(
            metrics.turn_seconds,
            "claybot_turn_duration_seconds",
            "How long an agent's turn ran, from the start of its processing to its end "
            "(the time its message waited in the inbox is not included)",
            [],
        ),
        _histogram(
            metrics.call_seconds,
            "claybot_provider_call_duration_seconds",
            "How long one inference call to one provider took, failed calls included",
            ["provider"],
        ),
        _counter(
            metrics.provider_errors,
            "claybot_provider_errors",
            "Inference calls a provider failed (the router then tries the next one)",
            ["provider"],
        ),
        _counter(
            metrics.fallbacks,
            "claybot_provider_fallbacks",
            "Calls handed from a failed provider to the next one (provider.fallback events)",
            ["from", "to"],
        ),
        _histogram(
            metrics.cron_lateness,
            "claybot_cron_lateness_seconds",
            "How late a cron run started after its scheduled time (cron.task.started)",
            [],
        ),
    ]


def _counter(tally: Tally, name: str, documentation: str, labels: list[str]) -> Metric:
    family = CounterMetricFamily(name, documentation, labels=labels)
    for values, count in tally.counts.items():
        family.add_metric(list(values), count)
    return family


def _histogram(buckets: Buckets, name: str, documentation: str, labels: list[str]) -> Metric:
    family = HistogramMetricFamily(name, documentation, labels=labels)
    bounds = [*map(floatToGoString, buckets.bounds), "+Inf"]
    for values, (counts, total) in buckets.series.items():
        cumulative, samples = 0, []
        for bound, count in zip(bounds, counts, strict=True):
            cumulative += count
            samples.append((bound, float(cumulative)))
        family.add_metric(list(values), samples, total[0])
    return family


def _read_now(metrics: EngineMetrics) -> list[Metric]:
    """What is cheaper to read when asked than to keep counting."""
    pending = GaugeMetricFamily(
        "claybot_inbox_pending",
        "Messages and resets accepted and not yet processed: waiting in agents' "
        "inboxes, or their turn running",
        value=metrics.pending(),
    )
    dropped = CounterMetricFamily(
        "claybot_event_readers_dropped",
        "Event streams ended for being too slow: stalled (stopped reading) or "
        "overflowed (fell the whole event buffer behind); they may reconnect",
        labels=["reason"],
    )
    for reason, count in metrics.bus.readers_dropped.items():
        dropped.add_metric([reason], count)
    return [pending, dropped]


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


class _Families(Collector):
    """Metric families made for one scrape, in the shape generate_latest reads."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self._families

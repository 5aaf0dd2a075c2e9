"""The engine's metrics over a bus of their own: what each event adds to which metric."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from claybot.agents.turn import TurnOutcome
from claybot.engine.metrics import EngineMetrics, outcome_label
from claybot.engine.metrics_text import exposition
from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventBus


async def no_jobs() -> dict[str, int]:
    return {"queued": 2, "running": 1}


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text.decode())
        for sample in family.samples
    }


@pytest.mark.parametrize(
    ("outcome", "label"),
    [
        (TurnOutcome("hi"), "ok"),
        (TurnOutcome("Inference failed: ...", failed=True), "failed"),
        (TurnOutcome("Stopped.", stopped=True), "stopped"),
        (TurnOutcome("Which file?", ended_by="ask"), "asked"),
        (TurnOutcome("done", ended_by="finish"), "ok"),
    ],
)
def test_a_turn_outcome_has_one_label(outcome: TurnOutcome, label: str) -> None:
    assert outcome_label(outcome) == label


async def test_fallbacks_cron_lateness_and_dropped_readers_come_from_the_bus() -> None:
    bus = EventBus(buffer_size=2)
    pending = [3]
    metrics = EngineMetrics(bus, pending=lambda: pending[0], jobs=no_jobs)
    fallback = {"from": "first", "to": "second", "reason": "boom", "agentId": "a", "messageId": "m"}
    bus.emit(EventType.PROVIDER_FALLBACK, fallback)
    bus.emit(EventType.PROVIDER_FALLBACK, {**fallback, "agentId": None, "messageId": None})
    started = {"taskId": "t", "scheduledAt": "2026-01-01T03:00:00+00:00", "agentId": "a"}
    bus.emit(EventType.CRON_TASK_STARTED, {**started, "latenessMs": 1500.0})
    slow = bus.subscribe()
    for _ in range(3):
        bus.emit("test")  # the ring holds 2: slow is a whole buffer behind
    assert slow.take(10) == [] and slow.overflowed
    slow.take(10)  # a closed reader is counted once
    bus.subscribe().drop("stalled")

    scraped = samples(await exposition(metrics))
    assert scraped[("claybot_provider_fallbacks_total", (("from", "first"), ("to", "second")))] == 2
    assert scraped[("claybot_cron_lateness_seconds_count", ())] == 1
    assert scraped[("claybot_cron_lateness_seconds_sum", ())] == 1.5
    assert scraped[("claybot_cron_lateness_seconds_bucket", (("le", "5.0"),))] == 1
    assert scraped[("claybot_cron_lateness_seconds_bucket", (("le", "1.0"),))] == 0
    assert scraped[("claybot_event_readers_dropped_total", (("reason", "overflowed"),))] == 1
    assert scraped[("claybot_event_readers_dropped_total", (("reason", "stalled"),))] == 1
    assert scraped[("claybot_inbox_pending", ())] == 3
    assert scraped[("claybot_jobs", (("status", "queued"),))] == 2
    assert scraped[("claybot_jobs", (("status", "cancelled"),))] == 0  # every status, always


async def test_the_scrape_answers_without_jobs_when_their_count_fails() -> None:
    async def unreachable() -> dict[str, int]:
        raise OSError("connection refused")

    metrics = EngineMetrics(EventBus(), pending=lambda: 0, jobs=unreachable)
    scraped = samples(await exposition(metrics))
    assert scraped[("claybot_jobs_store_up", ())] == 0
    assert not [key for key in scraped if key[0] == "claybot_jobs"]
    assert scraped[("claybot_messages_accepted_total", ())] == 0


async def test_turns_and_provider_calls_fill_their_buckets_as_prometheus_counts_them() -> None:
    metrics = EngineMetrics(EventBus(), pending=lambda: 0, jobs=no_jobs)
    for seconds in (0.005, 0.0051, 700.0):  # on a bound, just past it, past the last
        metrics.turn_ended(TurnOutcome("hi"), seconds)
    metrics.turn_ended(TurnOutcome("no", failed=True), 0.2)
    metrics.provider_called("first", 0.02, failed=True)
    metrics.provider_called("second", 0.03, failed=False)
    metrics.messages_accepted(4)

    scraped = samples(await exposition(metrics))
    turn = "claybot_turn_duration_seconds"
    assert scraped[(f"{turn}_bucket", (("le", "0.005"),))] == 1  # a bucket holds its bound
    assert scraped[(f"{turn}_bucket", (("le", "0.01"),))] == 2
    assert scraped[(f"{turn}_bucket", (("le", "0.25"),))] == 3
    assert scraped[(f"{turn}_bucket", (("le", "600.0"),))] == 3
    assert scraped[(f"{turn}_bucket", (("le", "+Inf"),))] == 4
    assert scraped[(f"{turn}_count", ())] == 4
    assert scraped[(f"{turn}_sum", ())] == pytest.approx(700.2101)
    assert scraped[("claybot_turns_total", (("outcome", "ok"),))] == 3
    assert scraped[("claybot_turns_total", (("outcome", "failed"),))] == 1
    assert scraped[("claybot_turns_total", (("outcome", "asked"),))] == 0  # listed from the start
    assert scraped[("claybot_messages_accepted_total", ())] == 4
    calls = "claybot_provider_call_duration_seconds_count"
    assert scraped[(calls, (("provider", "first"),))] == 1
    assert scraped[(calls, (("provider", "second"),))] == 1
    assert scraped[("claybot_provider_errors_total", (("provider", "first"),))] == 1
    assert scraped[("claybot_provider_errors_total", (("provider", "second"),))] == 0

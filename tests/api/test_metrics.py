"""GET /metrics: Prometheus' text format, read back with prometheus_client's own parser,
from a real engine over its Unix socket and TCP, and from engines in-process.

Each test scrapes before and after what it does and asserts the differences, so
nothing depends on what the engine counted while it started.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from claybot.config.home import HomePaths
from tests.cli.test_cli import cli
from tests.conftest import ECHO_SETTINGS, EngineProcess, running_engine, write_settings

# (sample name, its labels as sorted pairs) -> value
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

# "first" answers greetings; what it cannot answer falls to "second", which answers
# what mentions the fallback; anything else fails on both.
TWO_PROVIDERS: dict[str, Any] = {
    "providers": [
        {
            "id": "first",
            "type": "scripted",
            "model": "rules",
            "options": {"rules": [{"match": "hello", "response": "hi there"}]},
        },
        {
            "id": "second",
            "type": "scripted",
            "model": "rules",
            "options": {"rules": [{"match": "fallback", "response": "caught"}]},
        },
    ],
    "jobs": {"workers": 0},  # a job stays queued: its count is exact
}


def parse(response: httpx.Response) -> Samples:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


async def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def poll(
    scrape: Callable[[], Awaitable[Samples]], condition: Callable[[Samples], bool], what: str
) -> Samples:
    """Scrape until ``condition`` holds (a turn's end is counted just after its reply)."""
    deadline = time.monotonic() + 30
    while True:
        samples = await scrape()
        if condition(samples):
            return samples
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def post(client: httpx.AsyncClient, text: str, user: str = "ann") -> None:
    response = await client.post(
        "/v1/engine/messages", json={"userId": user, "channelId": "metrics", "text": text}
    )
    assert response.status_code == 202, response.text


@pytest.mark.slow
def test_the_counters_move_by_what_the_engine_did(paths: HomePaths) -> None:
    write_settings(paths, TWO_PROVIDERS)
    engine = EngineProcess(paths)
    engine.start()
    try:
        with engine.client() as client:

            def scrape() -> Samples:
                return parse(client.get("/metrics"))

            def send(text: str, user: str = "ann") -> None:
                body = {"userId": user, "channelId": "metrics", "text": text}
                response = client.post("/v1/engine/messages", json=body)
                assert response.status_code == 202, response.text

            before = scrape()
            send("hello")  # first answers
            send("fallback please")  # first fails, second answers
            send("boom", user="bob")  # both fail: the turn fails
            deadline = time.monotonic() + 30
            while moved(before, after := scrape(), "claybot_turn_duration_seconds_count") < 3:
                assert time.monotonic() < deadline, "timed out waiting for three turns to end"
                time.sleep(0.02)
            job = client.post("/api/v1/jobs", json={"task": "count me"})
            assert job.status_code == 201, job.text
            with_job = scrape()
    finally:
        engine.terminate()

    assert moved(before, after, "claybot_messages_accepted_total") == 3
    assert moved(before, after, "claybot_turns_total", outcome="ok") == 2
    assert moved(before, after, "claybot_turns_total", outcome="failed") == 1
    assert moved(before, after, "claybot_turns_total", outcome="stopped") == 0
    assert moved(before, after, "claybot_turns_total", outcome="asked") == 0
    assert moved(before, after, "claybot_turn_duration_seconds_count") == 3
    assert moved(before, after, "claybot_turn_duration_seconds_bucket", le="+Inf") == 3
    assert moved(before, after, "claybot_turn_duration_seconds_sum") > 0
    # Every call to each provider is timed; the ones that raised are errors.
    calls = "claybot_provider_call_duration_seconds_count"
    assert moved(before, after, calls, provider="first") == 3
    assert moved(before, after, calls, provider="second") == 2
    assert moved(before, after, "claybot_provider_errors_total", provider="first") == 2
    assert moved(before, after, "claybot_provider_errors_total", provider="second") == 1
    # "fallback please" and "boom" each fell from first to second; second had no next.
    fallbacks = {"from": "first", "to": "second"}
    assert moved(before, after, "claybot_provider_fallbacks_total", **fallbacks) == 2
    assert value(after, "claybot_inbox_pending") == 0  # all three are done
    # Jobs by status, read from the job database when scraped.
    assert value(with_job, "claybot_jobs_store_up") == 1
    assert value(with_job, "claybot_jobs", status="queued") == 1
    assert value(with_job, "claybot_jobs", status="completed") == 0
    assert value(with_job, "claybot_messages_accepted_total") == value(
        after, "claybot_messages_accepted_total"
    )  # a job is not a message


async def test_fallbacks_are_counted_from_the_provider_fallback_events(paths: HomePaths) -> None:
    write_settings(paths, TWO_PROVIDERS)
    async with running_engine(paths) as (_, api, events):
        before = parse(await api.get("/metrics"))
        seen = len(events)
        await post(api, "fallback please")
        after = await poll(
            lambda: _scrape(api),
            lambda s: moved(before, s, "claybot_turns_total", outcome="ok") == 1,
            "the turn to end",
        )
        fallbacks = [e.payload for e in events[seen:] if e.type == "provider.fallback"]
    # One event, from the turn that fell through, and the counter moved by it.
    assert [(f["from"], f["to"]) for f in fallbacks] == [("first", "second")]
    counted = moved(
        before, after, "claybot_provider_fallbacks_total", **{"from": "first", "to": "second"}
    )
    assert counted == 1


async def _scrape(api: httpx.AsyncClient) -> Samples:
    return parse(await api.get("/metrics"))


async def test_a_stopped_turn_is_counted_as_stopped(paths: HomePaths) -> None:
    # The provider takes a minute: the turn is surely running when the stop comes.
    slow = {
        "providers": [
            {"id": "slow", "type": "scripted", "model": "echo", "options": {"delayS": 60}}
        ]
    }
    write_settings(paths, slow)
    async with running_engine(paths) as (_, api, _events):
        before = await _scrape(api)
        posted = await api.post(
            "/v1/engine/messages",
            json={"userId": "ann", "channelId": "metrics", "text": "take your time"},
        )
        assert posted.status_code == 202, posted.text
        stop = f"/v1/engine/agents/{posted.json()['agentId']}/stop"
        # False until the agent has started on the message; then it stops that turn.
        deadline = time.monotonic() + 30
        while not (await api.post(stop)).json()["stopped"]:
            assert time.monotonic() < deadline, "the turn never started"
            await asyncio.sleep(0.02)
        after = await poll(
            lambda: _scrape(api),
            lambda s: moved(before, s, "claybot_turn_duration_seconds_count") == 1,
            "the stopped turn to end",
        )
    assert moved(before, after, "claybot_messages_accepted_total") == 1
    assert moved(before, after, "claybot_turns_total", outcome="stopped") == 1
    assert moved(before, after, "claybot_turns_total", outcome="ok") == 0
    assert moved(before, after, "claybot_turns_total", outcome="failed") == 0
    # A cancelled call is not the provider's failure, and has no duration to report.
    assert moved(before, after, "claybot_provider_errors_total", provider="slow") == 0
    assert (
        moved(before, after, "claybot_provider_call_duration_seconds_count", provider="slow") == 0
    )


async def test_cron_lateness_is_observed_when_a_run_starts(paths: HomePaths) -> None:
    write_settings(paths, ECHO_SETTINGS)
    async with running_engine(paths) as (_, api, events):
        before = await _scrape(api)
        added = await api.post(
            "/v1/engine/cron/tasks",
            json={"name": "nightly", "schedule": "0 3 * * *", "prompt": "tidy up"},
        )
        assert added.status_code == 201, added.text
        task_id = added.json()["task"]["taskId"]
        assert (await api.post(f"/v1/engine/cron/tasks/{task_id}/run")).status_code == 202
        await wait_for(
            lambda: any(e.type == "cron.task.started" for e in events), "the run to start"
        )
        after = await _scrape(api)
    started = next(e for e in events if e.type == "cron.task.started")
    assert moved(before, after, "claybot_cron_lateness_seconds_count") == 1
    lateness_s = moved(before, after, "claybot_cron_lateness_seconds_sum")
    assert lateness_s == pytest.approx(started.payload["latenessMs"] / 1000)


async def test_jobs_are_left_out_while_the_database_cannot_answer(paths: HomePaths) -> None:
    write_settings(paths, ECHO_SETTINGS)
    env = {"CLAYBOT_DATABASE_URL": "postgresql://claybot:hunter2@127.0.0.1:1/nowhere"}
    async with running_engine(paths, env) as (_, api, _events):
        response = await api.get("/metrics")
        samples = parse(response)
    assert value(samples, "claybot_jobs_store_up") == 0
    assert not [key for key in samples if key[0] == "claybot_jobs"]
    assert "hunter2" not in response.text
    assert ("claybot_messages_accepted_total", ()) in samples  # the rest is all there


async def test_each_engine_counts_only_itself(paths: HomePaths, tmp_path: Path) -> None:
    other = HomePaths(tmp_path / "other")
    for home in (paths, other):
        write_settings(home, ECHO_SETTINGS)
    async with running_engine(paths) as (_, api, _e), running_engine(other) as (_, quiet, _q):
        # The job store opens in the background: its gauges change once, on their own.
        quiet_before = await poll(
            lambda: _scrape(quiet),
            lambda s: value(s, "claybot_jobs_store_up") == 1,
            "the other engine's job store to open",
        )
        before = await _scrape(api)
        await post(api, "only here")
        after = await poll(
            lambda: _scrape(api),
            lambda s: moved(before, s, "claybot_turns_total", outcome="ok") == 1,
            "the turn to end",
        )
        quiet_after = await _scrape(quiet)
    assert moved(before, after, "claybot_messages_accepted_total") == 1
    assert quiet_after == quiet_before


@pytest.mark.slow
def test_tcp_needs_a_key_with_the_metrics_scope(engine_process: EngineProcess) -> None:
    engine_process.start()
    paths = engine_process.paths
    with engine_process.client() as client:
        port = client.get("/v1/engine/status").json()["tcp"]["port"]

    def create_key(*scopes: str) -> str:
        # The command a user runs: `claybot keys create --scope metrics`.
        args = [arg for scope in scopes for arg in ("--scope", scope)]
        result = cli(paths, "keys", "create", "--name", "prometheus", *args)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    metrics_key = create_key("metrics")
    reader = create_key("agents:read", "jobs:read")
    admin = create_key("admin")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as tcp:

        def get(key: str | None, path: str = "/metrics") -> httpx.Response:
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            return tcp.get(path, headers=headers)

        assert get(None).status_code == 401
        refused = get(reader)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["message"] == "this API key lacks the scope 'metrics'"
        samples = parse(get(metrics_key))
        assert ("claybot_messages_accepted_total", ()) in samples
        parse(get(admin))  # admin passes every check
        # The metrics scope opens /metrics and nothing else.
        assert get(metrics_key, "/v1/engine/status").status_code == 403
        assert get(metrics_key, "/api/v1/jobs").status_code == 403
    listed = cli(paths, "keys", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert '"metrics"' in listed.stdout

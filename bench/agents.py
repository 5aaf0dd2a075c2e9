"""Benchmark the agent engine with the scripted ``echo`` provider.

Prints one table:
- messages per second with many senders at once (saturated), in-process and
  through the Unix socket, for 1, 100 and 1,000 agents;
- accept latency (post until durable and acknowledged) and reply latency (post
  until the reply event) p50/p99 at light load: one message in flight at a time,
  spread over the agents. Under saturation latency is only queueing (queue length
  divided by throughput), so the saturated reply p50 is printed beside it;
- 200 SSE readers on GET /v1/engine/events at 1,000 agents, in a process of their own
  (``sse_readers.py``) that reads and parses every frame: one engine, rounds without
  and with the readers alternating, the medians of each side's throughput, reply p50
  and engine CPU per message, and the cost of the readers (``--sse`` alone);
- boot time (process start to a socket that answers) and resident memory with
  10,000 agents of 100 history records each.

The full run also prints the long-history table (``long_history.py``, alone with
``--long-history``) and the provider-overhead table (``provider_overhead.py``, alone
with ``--provider-overhead``): a provider call's CPU and posted-to-sent by context
length, against fake OpenAI- and Anthropic-compatible servers.

``--memory`` prints instead the engine's resident memory over five cycles of the same
load and idle unload, and whether it plateaus (``memory_cycles.py``; with
``--tracemalloc``, what the last cycle kept that the first did not).

Durability stays on (real fsync, group commit) in every run. Not part of the
test suite: run it with ``make bench`` or ``.venv/bin/python bench/agents.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

import claybot
from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.durable.jsonl import encode_record
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from claybot.kernel.ids import new_id

BENCH = Path(__file__).resolve().parent

SETTINGS = {"providers": [{"id": "scripted", "model": "echo"}], "agents": {"maxConcurrent": 1024}}


LATENCY_MESSAGES = 1000
SSE_READERS = 200  # dashboards reading every event, in the fan-out row
SSE_ROUNDS = 5  # rounds without and with the readers, alternating, in the fan-out row
# Issue 38: the readers cost at most a quarter of the throughput, and a reply's p50
# with them is within 5 ms of that without them.
SSE_COST_TARGET = 0.25
SSE_P50_TARGET_MS = 5.0


def table_rows(messages: int) -> list[tuple[str, int, int, int]]:
    """(path, agents, messages, SSE readers) of each row of the table, in its order. One
    agent gets a fifth of the messages: its turns run one after another, so it is slower."""
    rows = [
        (path, agents, messages if agents > 1 else max(1000, messages // 5), 0)
        for path in ("in-process", "socket")
        for agents in (1, 100, 1000)
    ]
    return [*rows, ("socket", 1000, messages, SSE_READERS)]


@dataclass
class Row:
    path: str
    agents: int
    messages: int
    rate: float
    accept_p50_ms: float
    accept_p99_ms: float
    reply_p50_ms: float
    reply_p99_ms: float
    saturated_reply_p50_ms: float
    engine_cpu_ms: float | None = None  # engine CPU per message, saturated (socket only)


class Replies(dict[str, float]):
    """When the reply to each message was seen (``time.perf_counter``), by message id."""

    def __init__(self) -> None:
        super().__init__()
        self._waiting: dict[str, asyncio.Future[None]] = {}

    def seen(self, message_id: str) -> None:
        self[message_id] = time.perf_counter()
        waiting = self._waiting.pop(message_id, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(None)

    async def wait_for(self, message_id: str) -> None:
        """Until the reply to ``message_id`` is seen. Awaited, not polled: a load
        generator spinning on ``sleep(0)`` took a core of the two the engine, its
        follower and the SSE readers share."""
        if message_id not in self:
            self._waiting[message_id] = asyncio.get_running_loop().create_future()
            await self._waiting[message_id]


async def _light_load(
    post: object, agents: int, replies: Replies, count: int = LATENCY_MESSAGES, prefix: str = "lat"
) -> tuple[list[float], list[float]]:
    """One message in flight at a time: latency without queueing."""
    accept: list[float] = []
    reply: list[float] = []
    for n in range(count):
        message_id = f"{prefix}{n}"
        t0 = time.perf_counter()
        await post(f"user{n % agents}", message_id)  # type: ignore[operator]
        accept.append(time.perf_counter() - t0)
        await replies.wait_for(message_id)
        reply.append(replies[message_id] - t0)
    return accept, reply


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def fresh_home(settings: dict[str, object] | None = None) -> HomePaths:
    home = Path(tempfile.mkdtemp(prefix="cb-bench-", dir="/tmp"))
    (home / "settings.json").write_text(json.dumps(settings or SETTINGS))
    return HomePaths(home)


async def drive(
    post: object,
    agents: int,
    messages: int,
    concurrency: int,
    replies: Replies,
    prefix: str = "m",
) -> tuple[list[float], list[float], float]:
    """Send ``messages`` spread over ``agents`` from ``concurrency`` senders."""
    accept: list[float] = []
    reply: list[float] = []
    started_at: dict[str, float] = {}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(messages):
        queue.put_nowait(n)

    async def sender() -> None:
        while not queue.empty():
            n = queue.get_nowait()
            message_id = f"{prefix}{n}"
            t0 = time.perf_counter()
            started_at[message_id] = t0
            await post(f"user{n % agents}", message_id)  # type: ignore[operator]
            accept.append(time.perf_counter() - t0)

    t_start = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(concurrency)))
    deadline = time.perf_counter() + 120
    while len(replies) < messages and time.perf_counter() < deadline:
        await asyncio.sleep(0.001)
    elapsed = time.perf_counter() - t_start
    for message_id, t_reply in replies.items():
        reply.append(t_reply - started_at[message_id])
    return accept, reply, elapsed


async def bench_in_process(agents: int, messages: int) -> Row:
    paths = fresh_home()
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    replies = Replies()

    def on_event(event: Event) -> None:
        if event.type == "agent.outgoing":
            replies.seen(event.payload["message"]["inReplyTo"])

    engine.events.add_listener(on_event)

    async def post(user: str, message_id: str) -> None:
        await engine.post_inbound(InboundMessage("local", user, "bench", "hi", message_id))

    # Create the agents first: the table measures messages, not agent creation.
    await asyncio.gather(*(post(f"user{i}", f"warm{i}") for i in range(agents)))
    while len(replies) < agents:
        await asyncio.sleep(0.001)
    replies.clear()
    _, saturated, elapsed = await drive(post, agents, messages, min(agents * 4, 512), replies)
    accept, reply = await _light_load(post, agents, replies)
    await engine.stop()
    shutil.rmtree(paths.home, ignore_errors=True)
    return Row(
        "in-process",
        agents,
        messages,
        messages / elapsed,
        pct(accept, 0.5),
        pct(accept, 0.99),
        pct(reply, 0.5),
        pct(reply, 0.99),
        pct(saturated, 0.5),
    )


class RawClient:
    """Minimal keep-alive HTTP/1.1 client over a Unix socket (cheap for the load generator)."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        return await self.request("POST", path, body)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    async def get(self, path: str) -> tuple[int, bytes]:
        return await self.request("GET", path)

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: claybot\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        for _ in range(2):
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_unix_connection(str(self.socket_path))
            assert self.reader is not None
            self.writer.write(head + body)
            try:
                status_line = await self.reader.readline()
            except ConnectionError:
                status_line = b""
            if status_line:
                break
            # The server closed this keep-alive connection (idle for 5 s in a slow
            # phase) before reading the request: send it again on a new one.
            self.writer.close()
            self.writer = None
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        payload = await self.reader.readexactly(length)
        return int(status_line.split()[1]), payload


# Asked of the engine until it answers: one request on a fresh connection, built once.
STATUS_REQUEST = b"GET /v1/engine/status HTTP/1.1\r\nHost: claybot\r\nConnection: close\r\n\r\n"


def answers_status(socket_path: Path) -> bool:
    """Whether the engine on ``socket_path`` answers ``GET /v1/engine/status`` with 200.

    A plain socket, not an HTTP client: building an httpx client (its TLS context)
    took 30-70 ms, paid on each try once the socket file existed, so the boot row
    measured the prober as much as the engine.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(socket_path))
            probe.sendall(STATUS_REQUEST)
            return probe.recv(64).startswith(b"HTTP/1.1 200")
        except OSError:  # not bound yet, or bound and not yet accepting
            return False


def start_engine(
    paths: HomePaths,
    environment: dict[str, str] | None = None,
    command: list[str] | None = None,
) -> tuple[subprocess.Popen[bytes], float]:
    """Start ``claybot start`` on ``paths`` (``command`` in place of ``python -m claybot``):
    the process and seconds until it answered."""
    env = {**os.environ, **(environment or {}), "CLAYBOT_HOME": str(paths.home)}
    t0 = time.perf_counter()
    process = subprocess.Popen(
        [*(command or [sys.executable, "-m", "claybot"]), "start", "--port", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not answers_status(paths.socket):
        if process.poll() is not None:
            raise RuntimeError("the engine exited during boot")
        time.sleep(0.002)
    return process, time.perf_counter() - t0


class SseReaders:
    """``count`` readers of GET /v1/engine/events in a process of their own
    (``sse_readers.py``), which reads and parses every frame they are sent.

    Not in the load generator's event loop: there, 200 readers of every event took
    the core its follower needed to see a reply, and the reply latency measured that
    (dashboards read on other machines). The readers still share the engine's two
    cores, so what they cost the machine is in the numbers.
    """

    def __init__(self, socket_path: Path, count: int) -> None:
        script = BENCH / "sse_readers.py"
        self._command = [sys.executable, str(script), str(socket_path), str(count)]
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Once every reader has its init frame: its subscription exists."""
        self._process = await asyncio.create_subprocess_exec(
            *self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self._process.stdout is not None
        if (await self._process.stdout.readline()).strip() != b"ready":
            raise RuntimeError("the SSE readers did not start")

    async def report(self) -> dict[str, Any]:
        """The event frames each reader has read, those out of order, the readers' CPU."""
        assert self._process is not None
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(b"report\n")
        await self._process.stdin.drain()
        return dict(json.loads(await self._process.stdout.readline()))

    async def check(self, events: int) -> float:
        """Wait until each reader has read ``events`` event frames (10 s at most), in
        order; the seconds of CPU the readers took."""
        deadline = time.monotonic() + 10
        while True:
            report = await self.report()
            if min(report["frames"]) >= events or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.01)
        missing = [frames for frames in report["frames"] if frames < events]
        if missing:
            raise RuntimeError(f"{len(missing)} SSE readers missed events: {missing[:5]}")
        if report["disordered"]:
            raise RuntimeError(f"SSE readers got {report['disordered']} events out of order")
        return float(report["cpu_s"])

    async def close(self) -> None:
        if self._process is not None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            await self._process.wait()
            self._process = None


class SocketLoad:
    """An engine subprocess and the load generator that talks to it over its socket.

    ``replies`` maps a message id to when its ``agent.outgoing`` event reached the
    follower (one SSE reader of its own); ``post`` sends through a pool of
    keep-alive connections.
    """

    def __init__(
        self,
        settings: dict[str, object] | None = None,
        prepare: Callable[[HomePaths], None] | None = None,
        command: list[str] | None = None,
    ) -> None:
        self.paths = fresh_home(settings)
        if prepare is not None:  # files the engine should find when it starts
            prepare(self.paths)
        self._command = command
        self.process, _ = start_engine(self.paths, command=command)
        self.replies = Replies()
        self._free: asyncio.Queue[RawClient] = asyncio.Queue()
        self._clients: list[RawClient] = []
        self._follower: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    async def start(self, concurrency: int) -> None:
        self._follower = asyncio.create_task(self._follow())
        self._clients = [RawClient(self.paths.socket) for _ in range(concurrency)]
        for client in self._clients:
            self._free.put_nowait(client)
        await self._subscribed.wait()  # its init frame: no reply can be missed from here on

    async def restart(self) -> None:
        """Stop the engine and start it again on the same home (a restart, not a crash)."""
        if self._follower is not None:
            self._follower.cancel()
        self.process.terminate()
        await asyncio.to_thread(self.process.wait, 30)
        self.process, _ = await asyncio.to_thread(start_engine, self.paths, None, self._command)
        self._subscribed = asyncio.Event()
        self._follower = asyncio.create_task(self._follow())
        await self._subscribed.wait()

    async def _follow(self) -> None:
        reader, writer = await asyncio.open_unix_connection(str(self.paths.socket), limit=2**20)
        writer.write(b"GET /v1/engine/events HTTP/1.1\r\nHost: claybot\r\n\r\n")
        while True:
            line = await reader.readline()
            if not line:
                return
            if line.startswith(b"data:"):
                self._subscribed.set()
            if line.startswith(b"data:") and b'"agent.outgoing"' in line:
                event = json.loads(line[5:])
                self.replies.seen(event["payload"]["message"]["inReplyTo"])

    async def post(self, user: str, message_id: str) -> None:
        client = await self._free.get()
        body = json.dumps(
            {"userId": user, "channelId": "bench", "text": "hi", "messageId": message_id}
        ).encode()
        status, payload = await client.post("/v1/engine/messages", body)
        self._free.put_nowait(client)
        if status != 202:
            raise RuntimeError(f"POST failed: {status} {payload!r}")

    async def wait_replies(self, count: int) -> None:
        while len(self.replies) < count:
            await asyncio.sleep(0.001)

    def disconnect(self) -> None:
        """The load's clients leave: their keep-alive connections close (a client that
        posts again opens a new one)."""
        for client in self._clients:
            client.close()

    def rss_mb(self) -> float:
        return float(psutil.Process(self.process.pid).memory_info().rss / 2**20)

    def cpu_s(self) -> float:
        return float(sum(psutil.Process(self.process.pid).cpu_times()[:2]))

    def stop(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
        self.process.terminate()
        self.process.wait(30)
        shutil.rmtree(self.paths.home, ignore_errors=True)


async def bench_socket(agents: int, messages: int, readers: int = 0) -> Row:
    load = SocketLoad()
    sse = SseReaders(load.paths.socket, readers) if readers else None
    try:
        if sse is not None:
            await sse.start()
        concurrency = min(agents * 2, 64)
        await load.start(concurrency)
        await asyncio.gather(*(load.post(f"user{i}", f"warm{i}") for i in range(agents)))
        await load.wait_replies(agents)
        load.replies.clear()
        cpu_before = load.cpu_s()
        _, saturated, elapsed = await drive(load.post, agents, messages, concurrency, load.replies)
        engine_cpu_s = load.cpu_s() - cpu_before
        if sse is not None:  # every agent's creation, its warm-up reply, then the run's
            await sse.check(2 * agents + messages)  # read (see _fan_out_phase)
        accept, reply = await _light_load(load.post, agents, load.replies)
        if sse is not None:
            await sse.check(2 * agents + messages + LATENCY_MESSAGES)
    finally:
        if sse is not None:
            await sse.close()
        load.stop()
    return Row(
        f"socket + {readers} SSE readers" if readers else "socket",
        agents,
        messages,
        messages / elapsed,
        pct(accept, 0.5),
        pct(accept, 0.99),
        pct(reply, 0.5),
        pct(reply, 0.99),
        pct(saturated, 0.5),
        engine_cpu_s / messages * 1000,
    )


@dataclass
class FanOutRound:
    """One phase of the fan-out comparison: a saturated run, then the light load."""

    readers: int
    rate: float
    engine_cpu_ms: float  # per message, saturated
    reply_p50_ms: float  # one message in flight
    reply_p99_ms: float
    readers_cpu_s: float  # what the reader process took in the phase


async def bench_fan_out(
    agents: int, messages: int, readers: int, rounds: int
) -> tuple[list[FanOutRound], list[FanOutRound]]:
    """One engine, ``rounds`` rounds of a phase without the readers and one with them,
    the first changing from one round to the next: each pair of phases is seconds
    apart, so what the machine's other work does to the numbers moves both. Returns
    the phases without the readers, then those with them."""
    load = SocketLoad()
    without: list[FanOutRound] = []
    with_readers: list[FanOutRound] = []
    try:
        concurrency = min(agents * 2, 64)
        await load.start(concurrency)
        await asyncio.gather(*(load.post(f"user{i}", f"warm{i}") for i in range(agents)))
        await load.wait_replies(agents)
        for number in range(rounds):
            order = (0, readers) if number % 2 == 0 else (readers, 0)
            for count in order:
                phase = await _fan_out_phase(load, agents, messages, count, f"r{number}-{count}-")
                (with_readers if count else without).append(phase)
    finally:
        load.stop()
    return without, with_readers


async def _fan_out_phase(
    load: SocketLoad, agents: int, messages: int, readers: int, prefix: str
) -> FanOutRound:
    """The saturated run, then (once the readers have read all of it: a light load
    measured while they still work through a backlog measures the backlog) the light
    load."""
    sse = SseReaders(load.paths.socket, readers) if readers else None
    try:
        if sse is not None:
            await sse.start()
        load.replies.clear()
        cpu_before = load.cpu_s()
        concurrency = min(agents * 2, 64)
        _, _, elapsed = await drive(load.post, agents, messages, concurrency, load.replies, prefix)
        engine_cpu_s = load.cpu_s() - cpu_before
        if sse is not None:
            await sse.check(messages)
        load.replies.clear()
        _, reply = await _light_load(load.post, agents, load.replies, prefix=f"{prefix}lat")
        readers_cpu_s = await sse.check(messages + LATENCY_MESSAGES) if sse is not None else 0.0
    finally:
        if sse is not None:
            await sse.close()
    return FanOutRound(
        readers,
        messages / elapsed,
        engine_cpu_s / messages * 1000,
        pct(reply, 0.5),
        pct(reply, 0.99),
        readers_cpu_s,
    )


def print_fan_out(
    agents: int, messages: int, without: list[FanOutRound], with_readers: list[FanOutRound]
) -> None:
    """Both sides' medians and the cost of the readers, then each round's pair."""
    readers = with_readers[0].readers

    def median(phases: list[FanOutRound], field: str) -> float:
        return statistics.median(getattr(phase, field) for phase in phases)

    pairs = list(zip(without, with_readers, strict=True))
    ratios = [w.rate / p.rate for p, w in pairs]
    p50_rises = [w.reply_p50_ms - p.reply_p50_ms for p, w in pairs]
    print(
        f"\n{readers} SSE readers at {agents:,} agents: one engine, {len(without)} rounds "
        f"without and with them alternating ({messages:,} messages saturated, then "
        f"{LATENCY_MESSAGES:,} one in flight, per phase); medians\n"
    )
    print(f"| | without | with {readers} readers | change |")
    print("|---|---:|---:|---:|")
    rate = median(without, "rate"), median(with_readers, "rate")
    cpu = median(without, "engine_cpu_ms"), median(with_readers, "engine_cpu_ms")
    p50 = median(without, "reply_p50_ms"), median(with_readers, "reply_p50_ms")
    p99 = median(without, "reply_p99_ms"), median(with_readers, "reply_p99_ms")
    print(f"| msg/s (saturated) | {rate[0]:,.0f} | {rate[1]:,.0f} | {rate[1] / rate[0] - 1:+.0%} |")
    print(
        f"| engine CPU per message | {cpu[0]:.3f} ms | {cpu[1]:.3f} ms | {cpu[1] - cpu[0]:+.3f} |"
    )
    print(f"| reply p50 | {p50[0]:.2f} ms | {p50[1]:.2f} ms | {p50[1] - p50[0]:+.2f} ms |")
    print(f"| reply p99 | {p99[0]:.2f} ms | {p99[1]:.2f} ms | {p99[1] - p99[0]:+.2f} ms |")
    cost, rise = 1 - statistics.median(ratios), statistics.median(p50_rises)
    cost_met = "met" if cost <= SSE_COST_TARGET else "NOT met"
    rise_met = "met" if rise <= SSE_P50_TARGET_MS else "NOT met"
    print(
        f"\nMedians of the rounds' pairs: the readers cost {cost:.0%} of the throughput "
        f"(target at most {SSE_COST_TARGET:.0%}: {cost_met}); reply p50 {rise:+.2f} ms with "
        f"them (target at most {SSE_P50_TARGET_MS:.0f} ms: {rise_met}). The readers' process took "
        f"{median(with_readers, 'readers_cpu_s'):.1f} s of CPU a phase (median)."
    )
    print("Rounds (without | with): msg/s, reply p50")
    for number, (p, w) in enumerate(pairs):
        print(
            f"  {number + 1}: {p.rate:,.0f} | {w.rate:,.0f} msg/s ({w.rate / p.rate:.0%}), "
            f"{p.reply_p50_ms:.2f} | {w.reply_p50_ms:.2f} ms"
        )


async def engine_status(load: SocketLoad) -> dict[str, Any]:
    import httpx

    transport = httpx.AsyncHTTPTransport(uds=str(load.paths.socket))
    async with httpx.AsyncClient(transport=transport, base_url="http://claybot") as client:
        status: dict[str, Any] = (await client.get("/v1/engine/status")).json()
        return status


async def until_status(load: SocketLoad, done: Callable[[dict[str, Any]], bool]) -> None:
    deadline = time.monotonic() + 120
    while not done(await engine_status(load)):
        if time.monotonic() > deadline:
            raise RuntimeError("the engine did not get there within 120 s")
        await asyncio.sleep(0.1)


def populate(paths: HomePaths, agents: int, records_per_agent: int) -> None:
    """Write agents straight in the on-disk format (as if they had talked for a while)."""
    now = int(time.time() * 1000)
    index = []
    for i in range(agents):
        agent_id = new_id()
        directory = paths.agents / agent_id
        directory.mkdir(parents=True)
        descriptor = {
            "type": "user",
            "connector": "local",
            "userId": f"user{i}",
            "channelId": "bench",
        }
        (directory / "descriptor.json").write_text(json.dumps(descriptor))
        state = {"createdAt": now, "updatedAt": now}
        (directory / "state.json").write_text(json.dumps(state))
        lines = [encode_record({"type": "start", "at": now})]
        for n in range((records_per_agent - 1) // 2):
            lines.append(
                encode_record(
                    {
                        "type": "user_message",
                        "at": now,
                        "messageId": f"m{n}",
                        "text": f"question {n}",
                        "files": [],
                    }
                )
            )
            lines.append(
                encode_record(
                    {
                        "type": "assistant_message",
                        "at": now,
                        "messageId": f"m{n}",
                        "text": f"echo: question {n}",
                        "files": [],
                        "toolCalls": [],
                        "tokens": None,
                        "final": True,
                    }
                )
            )
        (directory / "history.jsonl").write_bytes(b"".join(lines))
        index.append(encode_record({"id": agent_id, "descriptor": descriptor, "createdAt": now}))
    (paths.agents / "index.jsonl").write_bytes(b"".join(index))


def compile_bytecode(package: Path) -> None:
    """Write ``package``'s bytecode before boot is timed.

    An installed engine starts from compiled bytecode: pip compiles at install, and a
    checkout caches it at its first import. Where ``PYTHONDONTWRITEBYTECODE`` is set
    (CI machines, this project's own) nothing is cached, every start compiles every
    module again, and the boot row would measure the compiler, growing with each line
    of code rather than with what boot does. compileall writes the files all the same.
    """
    compileall.compile_dir(package, quiet=1)


def bench_boot(agents: int, records: int, runs: int) -> tuple[float, float]:
    compile_bytecode(Path(claybot.__file__).parent)
    paths = fresh_home()
    paths.agents.mkdir(parents=True)
    populate(paths, agents, records)
    boots: list[float] = []
    rss: list[float] = []
    for _ in range(runs):
        process, boot_s = start_engine(paths)
        boots.append(boot_s)
        rss.append(psutil.Process(process.pid).memory_info().rss / 2**20)
        process.terminate()
        process.wait(30)
    shutil.rmtree(paths.home, ignore_errors=True)
    return statistics.median(boots), statistics.median(rss)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--messages", type=int, default=10_000, help="messages per run (default 10000)"
    )
    parser.add_argument(
        "--boot-runs", type=int, default=5, help="engine starts to take the median of"
    )
    parser.add_argument(
        "--long-history",
        action="store_true",
        help="only the long-history run: one agent with 1,000 to 100,000 records",
    )
    parser.add_argument(
        "--provider-overhead",
        action="store_true",
        help="only the provider-overhead run: CPU per call and posted-to-sent by context length",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="only the memory run: five cycles of load and idle unload, RSS after each",
    )
    parser.add_argument(
        "--cycles", type=int, default=5, help="with --memory: load-and-unload cycles (default 5)"
    )
    parser.add_argument(
        "--cycle-messages",
        type=int,
        default=50_000,
        help="with --memory: messages to 1,000 agents in each cycle (default 50000)",
    )
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="with --memory: run the engine under tracemalloc and show what the cycles kept",
    )
    parser.add_argument(
        "--sse",
        action="store_true",
        help=f"only the fan-out run: 1,000 agents without and with {SSE_READERS} SSE readers",
    )
    parser.add_argument(
        "--sse-rounds",
        type=int,
        default=SSE_ROUNDS,
        help=f"rounds of the fan-out run, each without and with the readers (default {SSE_ROUNDS})",
    )
    args = parser.parse_args()
    if args.memory:
        from memory_cycles import run_memory

        if not await run_memory(args.tracemalloc, args.cycles, args.cycle_messages):
            raise SystemExit(1)
        return
    if args.sse:
        await run_fan_out(args.messages, args.sse_rounds)
        return
    if args.long_history:
        await run_long_history()
        return
    if args.provider_overhead:
        from provider_overhead import run_provider_overhead

        await run_provider_overhead()
        return
    rows = []
    for path, agents, messages, readers in table_rows(args.messages):
        if readers:  # the fan-out row: its own comparison, below the table
            continue
        print(
            f"running {path} with {agents} agents, {messages} messages...",
            file=sys.stderr,
            flush=True,
        )
        if path == "in-process":
            rows.append(await bench_in_process(agents, messages))
        else:
            rows.append(await bench_socket(agents, messages, readers=readers))

    print(f"\nClayBot agent benchmark ({os.cpu_count()} cores, echo provider, fsync on)\n")
    print(
        "| path | agents | messages | msg/s (saturated) | accept p50 | accept p99 "
        "| reply p50 | reply p99 | reply p50 saturated |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row.path} | {row.agents:,} | {row.messages:,} | {row.rate:,.0f} | "
            f"{row.accept_p50_ms:.2f} ms | {row.accept_p99_ms:.2f} ms | "
            f"{row.reply_p50_ms:.2f} ms | {row.reply_p99_ms:.2f} ms | "
            f"{row.saturated_reply_p50_ms:.0f} ms |"
        )
    print(
        f"\nLatency columns: one message in flight, {LATENCY_MESSAGES:,} messages over the agents."
    )
    await run_fan_out(args.messages, args.sse_rounds)
    print("running boot with 10,000 agents x 100 records...", file=sys.stderr, flush=True)
    boot_s, rss_mb = bench_boot(10_000, 100, args.boot_runs)
    print(f"\n| boot with 10,000 agents x 100 records | median of {args.boot_runs} |")
    print("|---|---:|")
    print(f"| process start to a ready socket | {boot_s * 1000:.0f} ms |")
    print(f"| resident memory after boot | {rss_mb:.0f} MB |")
    await run_long_history()
    from provider_overhead import run_provider_overhead

    await run_provider_overhead()


async def run_fan_out(messages: int, rounds: int) -> None:
    _, agents, messages, readers = table_rows(messages)[-1]
    print(
        f"running {agents} agents without and with {readers} SSE readers, {rounds} rounds...",
        file=sys.stderr,
        flush=True,
    )
    without, with_readers = await bench_fan_out(agents, messages, readers, rounds)
    print_fan_out(agents, messages, without, with_readers)


async def run_long_history() -> None:
    from long_history import SIZES, bench_long_history, print_table

    rows = []
    for records in SIZES:
        print(f"running long history with {records:,} records...", file=sys.stderr, flush=True)
        rows.append(await bench_long_history(records))
    print_table(rows)


if __name__ == "__main__":
    asyncio.run(main())

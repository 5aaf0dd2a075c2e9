"""Benchmark the agent engine with the scripted ``echo`` provider.

Prints one table:
- messages per second with many senders at once (saturated), in-process and
  through the Unix socket, for 1, 100 and 1,000 agents;
- accept latency (post until durable and acknowledged) and reply latency (post
  until the reply event) p50/p99 at light load: one message in flight at a time,
  spread over the agents. Under saturation latency is only queueing (queue length
  divided by throughput), so the saturated reply p50 is printed beside it;
- boot time (process start to a socket that answers) and resident memory with
  10,000 agents of 100 history records each.

Durability stays on (real fsync, group commit) in every run. Not part of the
test suite: run it with ``make bench`` or ``.venv/bin/python bench/agents.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.durable.jsonl import encode_record
from claybot.engine.engine import Engine, EngineOptions
from claybot.engine.events import Event
from claybot.ids import new_id

SETTINGS = {"providers": [{"id": "scripted", "model": "echo"}], "agents": {"maxConcurrent": 1024}}


LATENCY_MESSAGES = 1000


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


async def _light_load(
    post: object, agents: int, replies: dict[str, float]
) -> tuple[list[float], list[float]]:
    """One message in flight at a time: latency without queueing."""
    accept: list[float] = []
    reply: list[float] = []
    for n in range(LATENCY_MESSAGES):
        message_id = f"lat{n}"
        t0 = time.perf_counter()
        await post(f"user{n % agents}", message_id)  # type: ignore[operator]
        accept.append(time.perf_counter() - t0)
        while message_id not in replies:
            await asyncio.sleep(0)
        reply.append(replies[message_id] - t0)
    return accept, reply


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def fresh_home() -> HomePaths:
    home = Path(tempfile.mkdtemp(prefix="cb-bench-", dir="/tmp"))
    (home / "settings.json").write_text(json.dumps(SETTINGS))
    return HomePaths(home)


async def _drive(
    post: object, agents: int, messages: int, concurrency: int, replies: dict[str, float]
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
            message_id = f"m{n}"
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
    replies: dict[str, float] = {}

    def on_event(event: Event) -> None:
        if event.type == "agent.outgoing":
            replies[event.payload["message"]["inReplyTo"]] = time.perf_counter()

    engine.events.add_listener(on_event)

    async def post(user: str, message_id: str) -> None:
        await engine.agents.post_message(InboundMessage("local", user, "bench", "hi", message_id))

    # Create the agents first: the table measures messages, not agent creation.
    await asyncio.gather(*(post(f"user{i}", f"warm{i}") for i in range(agents)))
    while len(replies) < agents:
        await asyncio.sleep(0.001)
    replies.clear()
    _, saturated, elapsed = await _drive(post, agents, messages, min(agents * 4, 512), replies)
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
        head = (
            f"POST {path} HTTP/1.1\r\nHost: claybot\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        for _ in range(2):
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_unix_connection(str(self.socket_path))
            assert self.reader is not None
            self.writer.write(head + body)
            status_line = await self.reader.readline()
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


def start_engine(paths: HomePaths) -> tuple[subprocess.Popen[bytes], float]:
    env = {**os.environ, "CLAYBOT_HOME": str(paths.home)}
    t0 = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "claybot", "start", "--port", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import httpx

    while True:
        if process.poll() is not None:
            raise RuntimeError("the engine exited during boot")
        if paths.socket.exists():
            try:
                transport = httpx.HTTPTransport(uds=str(paths.socket))
                with httpx.Client(transport=transport, base_url="http://claybot") as client:
                    if client.get("/v1/engine/status").status_code == 200:
                        return process, time.perf_counter() - t0
            except httpx.TransportError:
                pass
        time.sleep(0.002)


class EventReader(asyncio.Protocol):
    """An SSE subscriber that reads everything and counts the event frames it got.

    A protocol rather than a stream reader: 200 of them must keep up with the engine
    from the other core without becoming what the benchmark measures.
    """

    def __init__(self) -> None:
        self.frames = 0
        self._tail = b""

    def data_received(self, data: bytes) -> None:
        # Every event frame starts with "id: " after a line break (init and pings do
        # not); the tail catches a marker split between two reads.
        chunk = self._tail + data
        self.frames += chunk.count(b"\nid: ")
        self._tail = chunk[-4:]


async def open_readers(socket_path: Path, count: int) -> list[asyncio.Transport]:
    loop = asyncio.get_running_loop()
    transports: list[asyncio.Transport] = []
    for _ in range(count):
        transport, _ = await loop.create_unix_connection(EventReader, str(socket_path))
        transport.write(b"GET /v1/engine/events HTTP/1.1\r\nHost: claybot\r\n\r\n")
        transports.append(transport)
    return transports


async def bench_socket(agents: int, messages: int, readers: int = 0) -> Row:
    paths = fresh_home()
    process, _ = start_engine(paths)
    replies: dict[str, float] = {}
    subscribers = await open_readers(paths.socket, readers)

    async def follow() -> None:
        reader, writer = await asyncio.open_unix_connection(str(paths.socket), limit=2**20)
        writer.write(b"GET /v1/engine/events HTTP/1.1\r\nHost: claybot\r\n\r\n")
        while True:
            line = await reader.readline()
            if not line:
                return
            if line.startswith(b"data:") and b'"agent.outgoing"' in line:
                event = json.loads(line[5:])
                replies[event["payload"]["message"]["inReplyTo"]] = time.perf_counter()

    follower = asyncio.create_task(follow())
    await asyncio.sleep(0.2)
    concurrency = min(agents * 2, 64)
    clients = [RawClient(paths.socket) for _ in range(concurrency)]
    free: asyncio.Queue[RawClient] = asyncio.Queue()
    for client in clients:
        free.put_nowait(client)

    async def post(user: str, message_id: str) -> None:
        client = await free.get()
        body = json.dumps(
            {"userId": user, "channelId": "bench", "text": "hi", "messageId": message_id}
        ).encode()
        status, payload = await client.post("/v1/engine/messages", body)
        free.put_nowait(client)
        if status != 202:
            raise RuntimeError(f"POST failed: {status} {payload!r}")

    await asyncio.gather(*(post(f"user{i}", f"warm{i}") for i in range(agents)))
    while len(replies) < agents:
        await asyncio.sleep(0.001)
    replies.clear()
    engine = psutil.Process(process.pid)
    cpu_before = sum(engine.cpu_times()[:2])
    _, saturated, elapsed = await _drive(post, agents, messages, concurrency, replies)
    engine_cpu_s = sum(engine.cpu_times()[:2]) - cpu_before
    accept, reply = await _light_load(post, agents, replies)
    follower.cancel()
    counted = [transport.get_protocol() for transport in subscribers]
    for transport in subscribers:
        transport.close()
    missing = [
        reader.frames
        for reader in counted
        if isinstance(reader, EventReader) and reader.frames < messages + LATENCY_MESSAGES
    ]
    if missing:
        raise RuntimeError(f"{len(missing)} SSE readers missed events: {missing[:5]}")
    process.terminate()
    process.wait(30)
    shutil.rmtree(paths.home, ignore_errors=True)
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


def bench_boot(agents: int, records: int, runs: int) -> tuple[float, float]:
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
    args = parser.parse_args()
    rows = []
    for path, bench in (("in-process", bench_in_process), ("socket", bench_socket)):
        for agents in (1, 100, 1000):
            messages = args.messages if agents > 1 else max(1000, args.messages // 5)
            print(
                f"running {path} with {agents} agents, {messages} messages...",
                file=sys.stderr,
                flush=True,
            )
            rows.append(await bench(agents, messages))
    print("running boot with 10,000 agents x 100 records...", file=sys.stderr, flush=True)
    boot_s, rss_mb = bench_boot(10_000, 100, args.boot_runs)

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
    print(f"\n| boot with 10,000 agents x 100 records | median of {args.boot_runs} |")
    print("|---|---:|")
    print(f"| process start to a ready socket | {boot_s * 1000:.0f} ms |")
    print(f"| resident memory after boot | {rss_mb:.0f} MB |")


if __name__ == "__main__":
    asyncio.run(main())

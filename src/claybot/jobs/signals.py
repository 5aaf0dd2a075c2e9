"""Hearing about job changes as they commit: in this process, and from other processes.

Changes made in this process reach listeners directly (``JobTables.subscribe``).
On PostgreSQL, every change is also a ``NOTIFY`` on ``claybot_jobs``; a
``JobSignals`` keeps one connection that ``LISTEN``s and hands on the changes other
processes made (its own it already heard). Workers wake on them instead of polling
tightly, a cancel reaches the worker running the job at once, and the engine
relays the progress of jobs run by ``claybot worker`` processes onto its stream.
If that connection drops, it reconnects; meanwhile workers fall back to polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from claybot.jobs.sql import NOTIFY_CHANNEL, JobTables, notify_prefix

log = logging.getLogger(__name__)

Listener = Callable[[str, dict[str, Any]], None]
RECONNECT_S = 2.0


class JobSignals:
    def __init__(self, tables: JobTables) -> None:
        self._tables = tables
        self._listeners: list[Listener] = []
        self._unsubscribe = tables.subscribe(self._dispatch)
        self._listening: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()  # LISTEN is in place (PostgreSQL)
        self._own = notify_prefix(tables.origin)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def start(self) -> None:
        if self._tables.postgres and self._listening is None:
            self._listening = asyncio.create_task(self._listen(), name="job-signals")

    async def close(self) -> None:
        self._unsubscribe()
        if self._listening is not None:
            self._listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listening

    def _dispatch(self, kind: str, payload: dict[str, Any]) -> None:
        for listener in list(self._listeners):
            try:
                listener(kind, payload)
            except Exception:  # one listener's bug must not silence the others
                log.exception("a job signal listener failed", extra={"action": "job.signal"})

    def _notified(self, _connection: Any, _pid: int, _channel: str, body: str) -> None:
        if body.startswith(self._own):
            return  # ours (told without parsing it: most are, where workers run in-engine)
        try:
            message = json.loads(body)
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("origin") == self._tables.origin:
            return  # ours: already heard in-process
        # A batch's events (``events``), or one event (an engine of before batches).
        events = message.get("events", [message])
        for event in events if isinstance(events, list) else ():
            if not isinstance(event, dict):
                continue
            kind, payload = event.get("type"), event.get("payload")
            if isinstance(kind, str) and isinstance(payload, dict):
                self._dispatch(kind, payload)

    async def _listen(self) -> None:
        while True:
            try:
                await self._listen_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning(
                    "listening for job changes failed (%s); retrying",
                    exc,
                    extra={"action": "job.listen_failed"},
                )
            await asyncio.sleep(RECONNECT_S)

    async def _listen_once(self) -> None:
        """LISTEN on one connection until it drops."""
        async with self._tables.engine.connect() as connection:
            raw = await connection.get_raw_connection()
            driver = raw.driver_connection
            assert driver is not None
            closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def dropped(_connection: Any) -> None:
                if not closed.done():
                    closed.set_result(None)

            driver.add_termination_listener(dropped)
            await driver.add_listener(NOTIFY_CHANNEL, self._notified)
            self.connected.set()
            try:
                await closed
            finally:
                self.connected.clear()
                with contextlib.suppress(Exception):
                    await driver.remove_listener(NOTIFY_CHANNEL, self._notified)

"""The agent store on files: ``agents/<id>/{descriptor,state}.json`` and ``history.jsonl``.

``FileAgentStore`` is the ``AgentStore`` (``durable_port.py``) of a home: seed 001's
layout, written through the engine's group-commit writer.

``agents/index.jsonl`` lists every agent with its descriptor so boot reads one
file instead of one per agent; it is a cache of the descriptor files and is
repaired from a directory scan when an agent folder is missing from it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
from collections import OrderedDict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from claybot.agents.descriptors import (
    AgentDescriptor,
    descriptor_to_dict,
    parse_descriptor,
)
from claybot.agents.durable_port import (
    HISTORY_CHUNK,
    AgentProblem,
    AgentStoreError,
    IndexEntry,
    StoredAgent,
)
from claybot.agents.history import (
    RawRecord,
    damaged_placeholder,
    history_tail,
    turn_records,
)
from claybot.agents.records import HistoryRecord, StartRecord, encode_record_line
from claybot.agents.state import AgentState
from claybot.durable.atomic import (
    append_durably,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_many,
    json_bytes,
)
from claybot.durable.group_commit import GroupCommitWriter
from claybot.durable.jsonl import (
    cut_torn_tail,
    encode_record,
    read_jsonl,
    read_lines_backward,
)
from claybot.durable.jsonl_index import JsonlIndex

log = logging.getLogger(__name__)

# History indexes kept in memory (a few KB each at 100,000 records); the others are
# read back from their files when needed, which costs a read and a check, no scan.
HISTORY_INDEXES_KEPT = 256


class FileAgentStore:
    """``AgentStore`` on a home's files; ``writer`` also writes the inbox log."""

    def __init__(self, root: Path, writer: GroupCommitWriter) -> None:
        self.root = root
        self.writer = writer
        self.index_path = root / "index.jsonl"
        self._history_paths: dict[str, Path] = {}
        self._history_indexes: OrderedDict[str, JsonlIndex] = OrderedDict()
        self._unroutable: list[AgentProblem] = []

    @property
    def unroutable(self) -> list[AgentProblem]:
        return self._unroutable

    def agent_dir(self, agent_id: str) -> Path:
        return self.root / agent_id

    def history_path(self, agent_id: str) -> Path:
        path = self._history_paths.get(agent_id)
        if path is None:
            path = self._history_paths[agent_id] = self.root / agent_id / "history.jsonl"
        return path

    def release(self, agent_id: str) -> None:
        """The agent left memory: forget its cached path and let its file close."""
        path = self._history_paths.pop(agent_id, None)
        if path is not None:
            self.writer.release(path)

    async def flush(self) -> None:
        await self.writer.flush()

    async def has_backlog(self) -> bool:
        writer = self.writer
        await writer.settled()
        return writer.backlog > 0

    # -- boot ---------------------------------------------------------------

    async def load_index(self) -> list[IndexEntry]:
        """Every agent on disk, re-indexing those a crash left out of the index."""
        return await asyncio.to_thread(self._load_index)

    def _load_index(self) -> list[IndexEntry]:
        self.root.mkdir(parents=True, exist_ok=True)
        entries: dict[str, IndexEntry] = {}
        for record in read_jsonl(self.index_path).records:
            try:
                entry = IndexEntry(
                    str(record["id"]),
                    parse_descriptor(record["descriptor"]),
                    int(record["createdAt"]),
                )
            except (KeyError, ValueError, TypeError, ValidationError):
                continue
            entries[entry.agent_id] = entry
        with os.scandir(self.root) as scan:
            folders = {item.name for item in scan if item.is_dir()}
        missing: list[IndexEntry] = []
        for name in folders - entries.keys():
            found = self._read_entry(name)
            if found is not None:
                missing.append(found)
        if missing:
            # An agent folder written just before a crash, whose index line was lost.
            lines = b"".join(encode_record(self._index_record(entry)) for entry in missing)
            append_durably(self.index_path, lines)
            for entry in missing:
                entries[entry.agent_id] = entry
            log.info("re-indexed agents", extra={"action": "agents.reindex", "count": len(missing)})
        return [entry for agent_id, entry in entries.items() if agent_id in folders]

    def _read_entry(self, agent_id: str) -> IndexEntry | None:
        directory = self.root / agent_id
        path = directory / "descriptor.json"
        descriptor: AgentDescriptor | None
        try:
            descriptor = parse_descriptor(json.loads(path.read_bytes()))
        except (OSError, ValueError, ValidationError) as exc:
            descriptor = self._rebuild_descriptor(agent_id, path, exc)
        if descriptor is None:
            return None
        try:
            state = self._read_state(agent_id)
        except AgentStoreError:
            state = None  # reported when the agent loads
        return IndexEntry(agent_id, descriptor, state.createdAt if state else 0)

    def _rebuild_descriptor(
        self, agent_id: str, path: Path, error: Exception
    ) -> AgentDescriptor | None:
        """A descriptor.json that is missing or damaged, rebuilt from the history's first
        record; else the agent is reported as unroutable (its next message would start a
        new conversation, and nobody must be left to find that out alone)."""
        history = self.history_path(agent_id)
        try:
            with history.open("rb") as handle:
                first = json.loads(handle.readline())
            descriptor = parse_descriptor(first["descriptor"])
        except FileNotFoundError:
            if isinstance(error, FileNotFoundError):
                return None  # a folder a crash left before the agent existed: no conversation
            descriptor = None
        except (OSError, ValueError, KeyError, TypeError, ValidationError):
            descriptor = None
        if descriptor is None:
            problem = AgentProblem(
                agent_id,
                str(path),
                str(error),
                "not loaded: its conversation cannot be routed to until descriptor.json is "
                "repaired (its history is kept); a message from its user starts a new agent",
            )
            self._unroutable.append(problem)
            log.error(
                "%s: %s; %s", path, error, problem.action,
                extra={"action": "agents.unroutable", "agentId": agent_id},
            )  # fmt: skip
            return None
        atomic_write_json(path, descriptor_to_dict(descriptor))
        log.warning(
            "%s was damaged (%s); rebuilt from %s", path, error, history,
            extra={"action": "agents.descriptor_rebuilt", "agentId": agent_id},
        )  # fmt: skip
        return descriptor

    @staticmethod
    def _index_record(entry: IndexEntry) -> dict[str, Any]:
        return {
            "id": entry.agent_id,
            "descriptor": descriptor_to_dict(entry.descriptor),
            "createdAt": entry.created_at,
        }

    # -- creation -----------------------------------------------------------

    async def create(self, entry: IndexEntry, state: AgentState, start: StartRecord) -> None:
        """Durably create an agent: its files first, then its index line.

        If any of it fails (a full disk), the folder goes again: left half made, it
        would be indexed at the next start as a second agent for the same conversation.
        """
        try:
            await asyncio.to_thread(self._create_files, entry, state, start)
            await self.writer.append(self.index_path, encode_record(self._index_record(entry)))
        except BaseException:
            await asyncio.to_thread(
                shutil.rmtree, self.agent_dir(entry.agent_id), ignore_errors=True
            )
            raise

    def _create_files(self, entry: IndexEntry, state: AgentState, start: StartRecord) -> None:
        directory = self.agent_dir(entry.agent_id)
        directory.mkdir(parents=True, exist_ok=False)
        atomic_write_json(directory / "descriptor.json", descriptor_to_dict(entry.descriptor))
        atomic_write_json(directory / "state.json", state.model_dump(mode="json"))
        atomic_write_bytes(directory / "history.jsonl", encode_record_line(start))

    # -- loading ------------------------------------------------------------

    async def read_agent(
        self, agent_id: str, *, repair: bool, context_records: int, message_ids: int
    ) -> StoredAgent:
        def read() -> StoredAgent:
            state, damaged = None, None
            try:
                state = self._read_state(agent_id)
            except AgentStoreError as exc:
                damaged = exc
            path = self.history_path(agent_id)
            if repair:
                cut_torn_tail(path)
            history = history_tail(
                read_lines_backward(path),
                context_records=context_records,
                message_ids=message_ids,
            )
            return StoredAgent(state, damaged, history)

        return await asyncio.to_thread(read)  # one hop: every load passes here

    # -- state --------------------------------------------------------------

    async def set_aside_state(self, agent_id: str) -> str:
        """Move the damaged state.json aside as ``state.json.damaged``."""
        path = self.agent_dir(agent_id) / "state.json"
        aside = path.with_name("state.json.damaged")
        await asyncio.to_thread(os.replace, path, aside)
        return str(aside)

    async def read_state(self, agent_id: str) -> AgentState | None:
        return await asyncio.to_thread(self._read_state, agent_id)

    async def read_states(self, agent_ids: list[str]) -> dict[str, AgentState | None]:
        def read() -> dict[str, AgentState | None]:
            states: dict[str, AgentState | None] = {}
            for agent_id in agent_ids:
                try:
                    states[agent_id] = self._read_state(agent_id)
                except AgentStoreError:
                    states[agent_id] = None
            return states

        return await asyncio.to_thread(read)

    def _read_state(self, agent_id: str) -> AgentState | None:
        try:
            return AgentState.model_validate_json(
                (self.agent_dir(agent_id) / "state.json").read_bytes()
            )
        except FileNotFoundError:
            return None
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or '(the file)'}: {error['msg']}"
                for error in exc.errors()[:5]
            )
            raise AgentStoreError(str(self.agent_dir(agent_id) / "state.json"), problems) from exc

    async def write_state(self, agent_id: str, state: AgentState) -> None:
        data = state.model_dump(mode="json")
        await asyncio.to_thread(atomic_write_json, self.agent_dir(agent_id) / "state.json", data)

    async def write_states(self, states: dict[str, dict[str, Any]]) -> None:
        """Several agents' state.json (already dumped) with two syncs in all."""
        files = {
            self.agent_dir(agent_id) / "state.json": json_bytes(data)
            for agent_id, data in states.items()
        }
        if files:
            await asyncio.to_thread(atomic_write_many, files)

    # -- history ------------------------------------------------------------

    async def read_history_page(
        self, agent_id: str, *, after: int | None, before: int | None, limit: int
    ) -> tuple[list[RawRecord], int]:
        """A page of numbered records (see ``JsonlIndex.page``) and how many there are,
        once the writer has written what it holds; its cost does not grow with the
        history's length."""
        await self.writer.flush()
        index = self._history_index(agent_id)
        return await asyncio.to_thread(
            index.page, after=after, before=before, limit=limit, placeholder=damaged_placeholder
        )

    async def read_history_between(
        self, agent_id: str, *, from_at: int | None, to_at: int | None, limit: int
    ) -> list[RawRecord]:
        """The last ``limit`` numbered records whose ``at`` is within the bounds (unix
        ms, both included), found by seeking: records are appended in time order."""
        await self.writer.flush()
        index = self._history_index(agent_id)

        def window() -> list[RawRecord]:
            first = 0
            if from_at is not None:
                first, _ = index.bisect(lambda record: _at(record) < from_at)
            if to_at is not None:
                stop, _ = index.bisect(lambda record: _at(record) <= to_at)
            else:
                stop = index.count()
            records, _ = index.records(max(first, stop - limit), stop, damaged_placeholder)
            return records

        return await asyncio.to_thread(window)

    async def read_whole_history(
        self, agent_id: str, *, chunk: int = HISTORY_CHUNK
    ) -> tuple[int, AsyncIterator[list[RawRecord]]]:
        """How many records the history holds now, and those records, numbered, in
        chunks of ``chunk``: a reader of the whole of a long history holds one chunk
        at a time. Records appended after the count are not part of it."""
        await self.writer.flush()
        index = self._history_index(agent_id)
        total = await asyncio.to_thread(index.count)

        async def chunks() -> AsyncIterator[list[RawRecord]]:
            for first in range(0, total, chunk):
                stop = min(first + chunk, total)
                records, _ = await asyncio.to_thread(
                    index.records, first, stop, damaged_placeholder
                )
                yield records

        return total, chunks()

    def _history_index(self, agent_id: str) -> JsonlIndex:
        index = self._history_indexes.get(agent_id)
        if index is None:
            index = self._history_indexes[agent_id] = JsonlIndex(self.history_path(agent_id))
            if len(self._history_indexes) > HISTORY_INDEXES_KEPT:
                self._history_indexes.popitem(last=False)
        else:
            self._history_indexes.move_to_end(agent_id)
        return index

    async def read_written_turn(self, agent_id: str, message_id: str) -> list[HistoryRecord]:
        """One message's records (see ``turn_records``), once the writer has written
        what it holds: read from the end back to the turn's start, not the whole file."""
        await self.writer.flush()
        path = self.history_path(agent_id)
        return await asyncio.to_thread(lambda: turn_records(read_lines_backward(path), message_id))

    async def read_written_history(self, agent_id: str) -> list[RawRecord]:
        """Every record, once the writer has written what it still holds for any file:
        a read right after an append sees it."""
        await self.writer.flush()
        path = self.history_path(agent_id)
        return await asyncio.to_thread(
            lambda: read_jsonl(path, repair=False, placeholder=damaged_placeholder).records
        )

    def append_history(self, agent_id: str, record: HistoryRecord) -> asyncio.Future[None]:
        return self.writer.append(self.history_path(agent_id), encode_record_line(record))

    def append_history_nowait(self, agent_id: str, record: HistoryRecord) -> None:
        self.writer.append_nowait(self.history_path(agent_id), encode_record_line(record))

    def history_updated_ms(self, agent_id: str) -> int:
        try:
            return int(self.history_path(agent_id).stat().st_mtime * 1000)
        except FileNotFoundError:
            return 0


def _at(record: RawRecord) -> int:
    at = record.get("at")
    return at if isinstance(at, int) else 0

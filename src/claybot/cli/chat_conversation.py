"""What ``claybot chat`` keeps of a conversation with the engine: posting, following
the agent's events, and catching up from history.

Messages are posted with a client message id, so a post retried across an engine
restart is accepted once. Replies are ``agent.outgoing`` events, followed on the
SSE stream in a background thread; when the stream drops (the engine restarted),
the conversation reconnects and catches up from the agent's history (``after`` the
last record number read), de-duplicating by outgoing message id, so no reply is
lost or printed twice. The command and the terminal around it are ``chat.py``.

Files: ``attach`` uploads one (``POST /v1/engine/files``) and the next message
carries it; files a reply carries are downloaded into ``downloads`` once each, under
their own name (numbered when the name is taken), and the saved path is printed.

It is longer than most modules because posting, following and catching up share
the one record of what was shown (``remember``, ``is_answered``): split apart, each
part would need that record handed to it and kept consistent across threads.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from claybot.cli.approvals import ChatApprovals
from claybot.cli.chat_screen import ChatScreen
from claybot.cli.common import console, engine_client, err_console, fail
from claybot.client.errors import EngineApiError, EngineNotRunning
from claybot.config.home import HomePaths
from claybot.files.reference import safe_name
from claybot.kernel.backoff import Backoff

if TYPE_CHECKING:
    from claybot.client.engine_client import EngineClient
    from claybot.wire.events import EventFrame
    from claybot.wire.history import AgentHistory

RETRY_FOR_S = 120.0  # how long a post keeps retrying while the engine is down
RETRY_FIRST_DELAY_S = 0.2  # backoff between retries: doubles up to RETRY_MAX_DELAY_S
RETRY_MAX_DELAY_S = 2.0
RECONNECT_DELAY_S = 0.5  # between attempts to reopen the event stream
CATCH_UP_EVERY_S = 2.0  # while waiting for a reply, read history this often
WAKE_EVERY_S = 0.1  # how soon a wait for a reply notices it was given up (Ctrl-C)
HISTORY_PAGE = 1000  # the engine's largest page
# What this conversation's agent shows while a turn runs (besides its replies).
LIVE_EVENTS = frozenset(
    {"agent.delta", "agent.tool_call", "agent.tool_result", "provider.fallback"}
)
START_HINT = "run `claybot start` (or `make run`)"


def default_downloads(paths: HomePaths, user_home: Path | None = None) -> Path:
    """Where files from the agent are saved: ``~/Downloads/claybot`` when there is a
    Downloads folder, else ``<home>/downloads``."""
    downloads = (user_home or Path.home()) / "Downloads"
    return downloads / "claybot" if downloads.is_dir() else paths.home / "downloads"


def size_text(size: int) -> str:
    value = float(size)
    for unit in ("B", "kB", "MB"):
        if value < 1000:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def transport_errors() -> tuple[type[BaseException], ...]:
    """What a request raises when the engine goes away mid-way (httpx loads lazily)."""
    import httpx

    return (EngineNotRunning, httpx.TransportError, OSError)


class Conversation:
    """One user and channel on the local connector: sending, and printing replies."""

    def __init__(
        self,
        paths: HomePaths,
        user: str,
        channel: str,
        *,
        history_page: int = HISTORY_PAGE,
        downloads: Path | None = None,
    ) -> None:
        self.paths = paths
        self.user = user
        self.channel = channel
        self.history_page = history_page
        self.downloads = downloads or default_downloads(paths)
        self.attached: list[dict[str, Any]] = []  # uploaded, for the next message
        self._saved: set[str] = set()  # outgoing ids whose files were saved
        self.agent_id: str | None = None
        self._seq: int | None = None  # the highest history record number read
        self._printed: set[str] = set()  # outgoing message ids already shown
        self._mine: set[str] = set()  # message ids this session posted
        self._finished: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.connected = threading.Event()
        self.screen = ChatScreen()
        self.approvals = ChatApprovals(user, channel, self.screen.line)

    # -- replies --------------------------------------------------------------

    def _done(self, message_id: str) -> threading.Event:
        with self._lock:
            return self._finished.setdefault(message_id, threading.Event())

    def _show(
        self,
        outgoing_id: str,
        text: str,
        in_reply_to: str | None,
        final: bool,
        files: list[dict[str, Any]] | None = None,
    ) -> None:
        self.screen.reply(outgoing_id, text)
        if files:
            self.save_files(outgoing_id, files)
        if final and in_reply_to is not None:
            self._done(in_reply_to).set()

    def on_event(self, event: EventFrame) -> None:
        self.approvals.on_event(event)
        kind = event.type
        payload = event.payload
        if kind == "agent.outgoing":
            message = payload["message"]
            if (
                message.get("connector") == "local"
                and message.get("userId") == self.user
                and message.get("channelId") == self.channel
            ):
                self._show(
                    str(message["id"]),
                    str(message.get("text") or ""),
                    message.get("inReplyTo"),
                    bool(message.get("final", True)),
                    message.get("files"),
                )
            return
        if kind not in LIVE_EVENTS or payload.get("agentId") != self.agent_id:
            return
        if kind == "agent.delta":
            self.screen.delta(str(payload["outgoingId"]), str(payload["text"]))
        elif kind == "agent.tool_call":
            self.screen.tool_call(
                str(payload["agentId"]),
                str(payload["callId"]),
                str(payload["name"]),
                str(payload["arguments"]),
            )
        elif kind == "agent.tool_result":
            self.screen.tool_result(
                str(payload["callId"]), bool(payload["isError"]), str(payload["text"])
            )
        elif kind == "provider.fallback":
            self.screen.void(f"{payload['messageId']}#")
            self.screen.fallback(str(payload["from"]), str(payload["to"]), str(payload["reason"]))

    def follow(self) -> None:
        """Background thread: the event stream, reconnecting and catching up."""
        import httpx

        last_id: int | None = None
        reconnecting = False
        while not self._stop.is_set():
            try:
                with engine_client(self.paths) as client:
                    for event in client.events(last_id):
                        if event.is_init:
                            if last_id is None:  # resume after it, even on a new engine
                                last_id = event.id
                            self.show_pending_requests(client)
                            self.connected.set()
                            if reconnecting:
                                self.catch_up(client)
                            continue
                        last_id = event.id
                        with suppress(
                            KeyError, TypeError, ValueError
                        ):  # a malformed frame is skipped
                            self.on_event(event)
            except (EngineNotRunning, EngineApiError, httpx.HTTPError, OSError, ValueError):
                pass  # the engine went away or restarted: reconnect below
            self.connected.clear()
            reconnecting = True
            self._stop.wait(RECONNECT_DELAY_S)

    def show_pending_requests(self, client: EngineClient) -> None:
        """Requests made while this chat was not watching."""
        pending = client.permissions(status="pending").requests
        for request in reversed(pending):  # oldest first
            if self.approvals.is_ours(request):
                self.approvals.show(request)

    def decide(self, token: str | None, approved: bool) -> str | None:
        """Answer a prompt; returns the id to await a reply to when it was this agent's."""
        request = self.approvals.pick(token)
        request_id = request.requestId
        with engine_client(self.paths) as client:
            client.decide_permission(request_id, "allow" if approved else "deny", "chat")
        if request.agentId != self.agent_id:
            return None  # a background agent's: its result arrives through its parent
        # The decision resumes this conversation's agent as inbox item perm:<id>.
        resumed = f"perm:{request_id}"
        self.remember(resumed)
        return resumed

    def remember(self, message_id: str) -> None:
        """A message this session sent: its replies are printed and awaited."""
        self._mine.add(message_id)
        self._done(message_id)

    def is_answered(self, message_id: str) -> bool:
        return self._done(message_id).is_set()

    def catch_up(self, client: EngineClient) -> None:
        """Print replies to this session's messages found in history but not yet shown.

        A turn whose last message had no text sends nothing; its final history
        record still ends the wait.
        """
        agent_id = self.agent_id
        if agent_id is None:
            return
        while True:
            with self._lock:
                after = self._seq
            page = client.history(agent_id, after=after, limit=self.history_page)
            records = _by_name(page)
            for record in records:
                self._take(record)
            if records:
                with self._lock:
                    self._seq = max(self._seq or -1, int(records[-1]["seq"]))
            # The first read (no `after`) is the newest page: everything this session sent.
            if after is None or len(records) < self.history_page:
                return

    def _take(self, record: dict[str, Any]) -> None:
        message_id = record.get("messageId")
        if record.get("type") != "assistant_message" or message_id not in self._mine:
            return
        final = bool(record.get("final"))
        if record.get("outgoingId"):
            text = str(record.get("text") or "")
            self._show(str(record["outgoingId"]), text, message_id, final, record.get("files"))
        elif final:
            self._done(message_id).set()

    def catch_up_now(self) -> None:
        try:
            with engine_client(self.paths) as client:
                self.catch_up(client)
        except transport_errors():
            pass  # down right now: the next try, or the stream's reconnect, catches up
        except EngineApiError:
            pass  # restarting (503): likewise

    # -- files ------------------------------------------------------------------

    def attach(self, argument: str) -> str:
        """Upload the file at ``argument`` for the next message; what to tell the user."""
        if not argument:
            if not self.attached:
                return "nothing attached; /attach PATH adds a file to your next message"
            names = ", ".join(str(file["name"]) for file in self.attached)
            return f"attached to your next message: {names}"
        path = Path(argument).expanduser()
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
        with engine_client(self.paths) as client:
            stored = client.upload_file(path.name, data).file
        self.attached.append({"id": stored.id, "name": stored.name})
        return (
            f"attached {stored.name} ({stored.mimeType}, {size_text(stored.size)}); "
            "it goes with your next message"
        )

    def save_files(self, outgoing_id: str, files: list[dict[str, Any]]) -> None:
        """Save the files of reply ``outgoing_id`` (once) and print where they are."""
        with self._lock:
            if outgoing_id in self._saved:
                return
            self._saved.add(outgoing_id)
        for file in files:
            name = safe_name(str(file.get("name") or "file"))
            try:
                with engine_client(self.paths) as client:
                    data = client.file_bytes(str(file["id"]), name=name)
                saved = _save(self.downloads, name, data)
            except (EngineApiError, OSError, KeyError) as exc:
                self.screen.line(f"[red]could not save {escape(name)}:[/red] {escape(str(exc))}")
                continue
            except transport_errors():
                self.screen.line(f"[red]could not save {escape(name)}:[/red] the engine is down")
                continue
            self.screen.line(f"[green]saved[/green] {escape(name)} to {escape(str(saved))}")

    # -- sending ----------------------------------------------------------------

    def send(self, text: str) -> str:
        """Post one line (with the files attached since the last); retried with the same
        message id until the engine takes it."""
        message_id = uuid.uuid4().hex
        self.remember(message_id)
        body: dict[str, Any] = {
            "userId": self.user,
            "channelId": self.channel,
            "text": text,
            "messageId": message_id,
        }
        if self.attached:
            body["files"] = list(self.attached)
        deadline = time.monotonic() + RETRY_FOR_S
        backoff = Backoff(RETRY_FIRST_DELAY_S, RETRY_MAX_DELAY_S)
        announced = False
        while True:
            try:
                with engine_client(self.paths) as client:
                    posted = client.send_message(body)
                break
            except transport_errors():
                problem = "the engine is not answering"
            except EngineApiError as exc:
                if exc.status != 503:
                    raise
                problem = "the engine is shutting down"  # the next one takes the message
            if time.monotonic() > deadline:
                fail(f"{problem} after {RETRY_FOR_S:.0f}s; {START_HINT}")
            if not announced:
                err_console.print(f"[yellow]{problem}; reconnecting…[/yellow]")
                announced = True
            time.sleep(backoff.next_s())
        if announced:
            err_console.print("[green]reconnected[/green]")
        self.attached.clear()  # they went with this message
        self.agent_id = posted.agentId
        return message_id

    def wait_for_reply(
        self, message_id: str, timeout_s: float | None, given_up: threading.Event | None = None
    ) -> bool:
        """Until the turn answering ``message_id`` is final: False if ``timeout_s`` passes
        or ``given_up`` is set first."""
        done = self._done(message_id)
        now = time.monotonic()
        deadline = None if timeout_s is None else now + timeout_s
        catch_up_at = now + CATCH_UP_EVERY_S
        while not done.wait(WAKE_EVERY_S):
            if given_up is not None and given_up.is_set():
                return False
            now = time.monotonic()
            if deadline is not None and now > deadline:
                return False
            if now >= catch_up_at:
                self.catch_up_now()  # in case the reply came while the stream was down
                catch_up_at = now + CATCH_UP_EVERY_S
        return True

    def stop(self) -> None:
        self._stop.set()

    # -- local commands ---------------------------------------------------------

    def reset(self) -> str:
        if self.agent_id is None:
            return "nothing to reset: this conversation has no agent yet"
        with engine_client(self.paths) as client:
            done = client.reset_agent(self.agent_id)
        if done.status == "queued":
            return "the context will be cleared when the running turn ends"
        return "context cleared"

    def stop_turn(self) -> str:
        if self.agent_id is None:
            return "nothing to stop: this conversation has no agent yet"
        with engine_client(self.paths) as client:
            stopped = client.stop_agent(self.agent_id)
        return "stopped" if stopped.stopped else "no turn is running"

    def show_tool(self, number: str) -> None:
        """Tool call ``number`` (as shown in this chat) in full, from the agent's history."""
        try:
            shown = self.screen.tools[int(number)]
        except (KeyError, ValueError):
            raise ValueError(f"no tool call {number!r} in this chat (see its ⚙ lines)") from None
        call: dict[str, Any] | None = None
        result: dict[str, Any] | None = None
        before: int | None = None
        with engine_client(self.paths) as client:
            while result is None:  # newest first: the call is near the end
                page = client.history(shown.agent_id, before=before, limit=self.history_page)
                records = _by_name(page)
                for record in records:
                    if record.get("toolCallId") == shown.call_id:
                        result = record
                    for made in record.get("toolCalls") or []:
                        if made.get("id") == shown.call_id:
                            call = made
                if not records or records[0]["seq"] == 0:
                    break
                before = int(records[0]["seq"])
        arguments = json.dumps(call["arguments"], indent=2) if call else "(not found)"
        console.print(f"[bold]tool {shown.number}: {escape(shown.name)}[/bold]", highlight=False)
        console.print(escape(arguments), highlight=False, soft_wrap=True)
        if result is None:
            console.print("[dim](no result yet)[/dim]")
            return
        output = result.get("output") or {}
        label = "[red]error[/red]" if output.get("isError") else "[bold]result[/bold]"
        console.print(label)
        console.print(escape(str(output.get("text", ""))), highlight=False, soft_wrap=True)


def _by_name(page: AgentHistory) -> list[dict[str, Any]]:
    """A page's records as the engine sent them, read by field name: a history can hold
    records of a type this client does not know (``OtherRecord``), whose fields are
    only known by name, and the chat needs the same few fields from every kind."""
    return [record.model_dump(mode="json", exclude_unset=True) for record in page.records]


def _save(folder: Path, name: str, data: bytes) -> Path:
    """``data`` as ``folder/name``, or ``name (2)``, ``name (3)``... when that is taken
    (never over a file already there)."""
    folder.mkdir(parents=True, exist_ok=True)
    stem, suffix = os.path.splitext(name)
    for number in range(1, 10_000):
        path = folder / (name if number == 1 else f"{stem} ({number}){suffix}")
        try:
            with path.open("xb") as out:
                out.write(data)
        except FileExistsError:
            continue
        return path
    raise OSError(f"no free name for {name!r} in {folder}")

"""``claybot chat``: a conversation on the ``local`` connector.

Lines are posted with a client message id, so a post retried across an engine
restart is accepted once. Replies are ``agent.outgoing`` events, followed on the
SSE stream in a background thread; when the stream drops (the engine restarted),
chat reconnects and catches up from the agent's history, de-duplicating by
outgoing message id, so no reply is lost or printed twice.
"""

from __future__ import annotations

import getpass
import sys
import threading
import time
import uuid
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from claybot.cli.common import HomeOption, console, engine_client, err_console, fail, paths_for
from claybot.config.home import HomePaths
from claybot.engine.ipc.client_errors import EngineApiError, EngineNotRunning

if TYPE_CHECKING:
    from claybot.engine.ipc.client import EngineClient

RETRY_FOR_S = 120.0  # how long a post keeps retrying while the engine is down
PIPED_REPLY_TIMEOUT_S = 600.0


class Conversation:
    def __init__(self, paths: HomePaths, user: str, channel: str) -> None:
        self.paths = paths
        self.user = user
        self.channel = channel
        self.agent_id: str | None = None
        self._printed: set[str] = set()
        self._mine: set[str] = set()  # message ids this session posted
        self._finished: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.connected = threading.Event()

    # -- replies --------------------------------------------------------------

    def _show(self, outgoing_id: str, text: str, in_reply_to: str | None, final: bool) -> None:
        with self._lock:
            if outgoing_id in self._printed:
                return
            self._printed.add(outgoing_id)
        console.print(f"[bold cyan]agent>[/bold cyan] {escape(text)}", highlight=False)
        if final and in_reply_to is not None:
            self._finished.setdefault(in_reply_to, threading.Event()).set()

    def _is_mine(self, message: dict[str, Any]) -> bool:
        return (
            message.get("connector") == "local"
            and message.get("userId") == self.user
            and message.get("channelId") == self.channel
        )

    def follow(self) -> None:
        """Background thread: the event stream, reconnecting and catching up."""
        last_id: int | None = None
        first = True
        while not self._stop.is_set():
            try:
                with engine_client(self.paths) as client:
                    for event in client.events(last_id):
                        if event.get("type") == "init":
                            self.connected.set()
                            if not first:
                                self._catch_up(client)
                            first = False
                            continue
                        last_id = int(event["id"])
                        if event.get("type") != "agent.outgoing":
                            continue
                        message = event["payload"]["message"]
                        if self._is_mine(message):
                            self._show(
                                message["id"], message["text"], message.get("inReplyTo"),
                                bool(message.get("final", True)),
                            )  # fmt: skip
            except (EngineNotRunning, OSError, ValueError, KeyError):
                pass
            except Exception:  # the stream broke mid-read: reconnect
                pass
            self.connected.clear()
            if not self._stop.wait(0.5):
                first = False

    def _catch_up(self, client: EngineClient) -> None:
        """Print replies to this session's messages that arrived while disconnected.

        A turn whose last message had no text sends nothing; its final history
        record still ends the wait.
        """
        if self.agent_id is None:
            return
        page = client.get(f"/v1/engine/agents/{self.agent_id}/history", limit=500)
        for record in page.get("records", []):
            message_id = record.get("messageId")
            if record.get("type") != "assistant_message" or message_id not in self._mine:
                continue
            if record.get("outgoingId"):
                self._show(
                    record["outgoingId"], record["text"], message_id, bool(record.get("final"))
                )
            elif record.get("final"):
                self._finished.setdefault(message_id, threading.Event()).set()

    # -- sending ----------------------------------------------------------------

    def send(self, text: str) -> str:
        message_id = uuid.uuid4().hex
        self._mine.add(message_id)
        self._finished.setdefault(message_id, threading.Event())
        body = {
            "userId": self.user,
            "channelId": self.channel,
            "text": text,
            "messageId": message_id,
        }
        deadline = time.monotonic() + RETRY_FOR_S
        warned = False
        while True:
            try:
                with engine_client(self.paths) as client:
                    posted = client.post("/v1/engine/messages", body)
                self.agent_id = str(posted["agentId"])
                return message_id
            except EngineNotRunning:
                if time.monotonic() > deadline:
                    fail("the engine is not answering; start it with `claybot start`")
                if not warned:
                    err_console.print("[yellow]engine unreachable, retrying…[/yellow]")
                    warned = True
                time.sleep(0.5)
            except EngineApiError as exc:
                if exc.status == 503 and time.monotonic() < deadline:
                    time.sleep(0.5)  # shutting down: the next engine takes it
                    continue
                raise

    def wait_for_reply(self, message_id: str, timeout_s: float | None) -> bool:
        return self._finished[message_id].wait(timeout_s)

    def catch_up_now(self) -> None:
        try:
            with engine_client(self.paths) as client:
                self._catch_up(client)
        except EngineNotRunning:
            pass

    def stop(self) -> None:
        self._stop.set()


def chat(
    home: HomeOption = None,
    user: Annotated[
        str | None, typer.Option("--user", help="Your user id (default: your login name).")
    ] = None,
    channel: Annotated[
        str, typer.Option("--channel", help="Channel id: one conversation per user and channel.")
    ] = "cli",
) -> None:
    """Talk to an agent on the local connector; replies print as they arrive."""
    paths = paths_for(home)
    with engine_client(paths, timeout_s=5) as probe:
        if not probe.is_running():
            fail(f"no engine is running for {paths.home}. Start it with `claybot start`.")
    conversation = Conversation(paths, user or getpass.getuser(), channel)
    follower = threading.Thread(target=conversation.follow, name="chat-events", daemon=True)
    follower.start()
    if not conversation.connected.wait(10):
        fail("could not follow the engine's event stream")
    interactive = sys.stdin.isatty()
    if interactive:
        console.print(
            f"Chatting as [bold]{conversation.user}[/bold] on channel [bold]{channel}[/bold]. "
            "Type /quit or press Ctrl-D to leave."
        )
    try:
        while True:
            try:
                line = (
                    console.input("[bold green]you>[/bold green] ")
                    if interactive
                    else sys.stdin.readline()
                )
            except EOFError:
                break
            if not interactive and line == "":
                break
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            try:
                message_id = conversation.send(text)
            except EngineApiError as exc:
                err_console.print(f"[red]error:[/red] {exc}")
                continue
            if interactive:
                with console.status("thinking…"):
                    while not conversation.wait_for_reply(message_id, 2.0):
                        conversation.catch_up_now()
            elif not _wait_piped(conversation, message_id):
                fail(f"no reply within {PIPED_REPLY_TIMEOUT_S:.0f}s")
    except KeyboardInterrupt:
        console.print()
    finally:
        conversation.stop()


def _wait_piped(conversation: Conversation, message_id: str) -> bool:
    deadline = time.monotonic() + PIPED_REPLY_TIMEOUT_S
    while time.monotonic() < deadline:
        if conversation.wait_for_reply(message_id, 2.0):
            return True
        conversation.catch_up_now()  # in case the reply came while the stream was down
    return False

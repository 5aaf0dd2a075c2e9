"""``claybot chat``: a conversation on the ``local`` connector.

In a terminal, replies stream as the model writes them (``agent.delta``), tool calls
and their results show as one-line summaries, and a provider that fails shows as
one dim line; the prompt is prompt_toolkit's (``chat_prompt``).

What it keeps of the conversation (posts retried across an engine restart, replies
followed on the event stream, caught up from history after a reconnect, none lost
or printed twice) is ``chat_conversation``.
"""

from __future__ import annotations

import getpass
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from claybot.cli.chat_conversation import START_HINT, Conversation, transport_errors
from claybot.cli.common import HomeOption, console, engine_client, err_console, fail, paths_for
from claybot.client.errors import EngineApiError
from claybot.config.home import HomePaths

CONNECT_TIMEOUT_S = 10.0  # for the event stream to open before the first prompt
PIPED_REPLY_TIMEOUT_S = 600.0


def _default_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name (some containers)
        return "user"


def _check_names(user: str, channel: str) -> None:
    from pydantic import ValidationError

    from claybot.config.store import describe_validation_error
    from claybot.wire.bodies import PostMessage

    try:
        PostMessage(userId=user, channelId=channel, text="-")
    except ValidationError as exc:
        fail(describe_validation_error(exc))


def chat(
    home: HomeOption = None,
    user: Annotated[
        str | None, typer.Option("--user", help="Your user id (default: your login name).")
    ] = None,
    channel: Annotated[
        str, typer.Option("--channel", help="Channel id: one conversation per user and channel.")
    ] = "cli",
    save_to: Annotated[
        Path | None,
        typer.Option(
            "--save-to",
            help="Where files the agent sends are saved (default: ~/Downloads/claybot, "
            "or <home>/downloads without a Downloads folder).",
        ),
    ] = None,
) -> None:
    """Talk to an agent on the local connector; replies stream as they are written.

    Enter sends; Alt-Enter (or Esc then Enter) starts a new line, and a paste keeps
    its lines. Up and Down recall earlier messages. Commands: /help, /attach PATH
    (upload a file: your next message carries it; the prompt shows how many wait),
    /reset (clear the agent's context), /stop (stop its running turn), /new (a new
    conversation), /tool N (tool call N in full), /allow N or /deny N (answer
    permission prompt N; without N, the newest), /quit (or Ctrl-D). Ctrl-C while a
    reply is coming gives the prompt back (the reply prints when it is done). Files
    the agent sends are saved (see --save-to) and their paths printed.

    With piped input, each line is one message that waits for its reply (or an
    /attach PATH line); stdout carries only the replies.
    """
    paths = paths_for(home)
    user = user or _default_user()
    _check_names(user, channel)
    with engine_client(paths, timeout_s=5) as probe:
        if not probe.is_running():
            fail(f"no engine is running for {paths.home}; {START_HINT}")
    interactive = sys.stdin.isatty()
    conversation = _open(paths, user, channel, save_to)
    hint = (
        f"Chatting as [bold]{escape(user)}[/bold] on channel [bold]{escape(channel)}[/bold]. "
        "Type /help for commands, /quit or Ctrl-D to leave."
    )
    (console if interactive else err_console).print(hint, highlight=False)
    if interactive:
        _chat_in_terminal(paths, conversation)
    else:
        _chat_piped(conversation)


def _open(paths: HomePaths, user: str, channel: str, save_to: Path | None) -> Conversation:
    conversation = Conversation(paths, user, channel, downloads=save_to)
    follower = threading.Thread(target=conversation.follow, name="chat-events", daemon=True)
    follower.start()
    if not conversation.connected.wait(CONNECT_TIMEOUT_S):
        fail(f"could not follow the engine's event stream on {paths.socket}")
    return conversation


def _chat_piped(conversation: Conversation) -> None:
    try:
        for line in sys.stdin:
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            if text.partition(" ")[0] == "/attach":
                _run_local(conversation, "/attach", text.partition(" ")[2].strip(), err_console)
                continue
            message_id = _post(conversation, text)
            if message_id is not None:
                _await_reply(conversation, message_id)
    finally:
        conversation.stop()


def _chat_in_terminal(paths: HomePaths, conversation: Conversation) -> None:
    from claybot.cli.chat_prompt import ChatPrompt

    prompt = ChatPrompt(paths.home / "chat_history")
    try:
        while True:
            try:
                text = prompt.read(len(conversation.attached)).strip()
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt clears the line
            except EOFError:
                break
            if not text:
                continue
            command, _, argument = text.partition(" ")
            if command in ("/quit", "/exit"):
                break
            if command == "/new":
                conversation.stop()
                conversation = _open(
                    paths, conversation.user, _new_channel(conversation), conversation.downloads
                )
                console.print(
                    f"[dim]new conversation on channel {escape(conversation.channel)}[/dim]"
                )
                continue
            if command in LOCAL_COMMANDS:
                _run_local(conversation, command, argument.strip())
                continue
            _send_and_wait(conversation, text)
    finally:
        conversation.stop()


LOCAL_COMMANDS = frozenset({"/help", "/attach", "/reset", "/stop", "/tool"})
HELP = """\
[bold]/attach PATH[/bold] upload a file for your next message ([bold]/attach[/bold] lists them)
[bold]/reset[/bold]      clear the agent's context (its history stays on disk)
[bold]/stop[/bold]       stop the turn the agent is running
[bold]/new[/bold]        start a new conversation (a new channel, a new agent)
[bold]/tool N[/bold]     show tool call N and its result in full
[bold]/allow N[/bold]    allow permission request N ([bold]/deny N[/bold] refuses it)
[bold]/quit[/bold]       leave (or Ctrl-D)
Alt-Enter (or Esc then Enter) starts a new line; Up and Down recall messages.
Files the agent sends are saved; each one's path is printed."""


def _new_channel(conversation: Conversation) -> str:
    base = conversation.channel.split("~", 1)[0]
    return f"{base}~{time.strftime('%Y%m%d-%H%M%S')}"


def _run_local(
    conversation: Conversation, command: str, argument: str, out: Console = console
) -> None:
    """A command chat answers itself: none of it reaches the model (``out``: where its
    answer goes; stderr when stdout carries only replies)."""
    try:
        if command == "/help":
            console.print(HELP, highlight=False)
        elif command == "/attach":
            out.print(f"[dim]{escape(conversation.attach(argument))}[/dim]", highlight=False)
        elif command == "/reset":
            console.print(f"[dim]{escape(conversation.reset())}[/dim]")
        elif command == "/stop":
            console.print(f"[dim]{escape(conversation.stop_turn())}[/dim]")
        elif command == "/tool":
            conversation.show_tool(argument)
    except (EngineApiError, ValueError) as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
    except transport_errors():
        err_console.print(f"[red]error:[/red] the engine is not answering; {START_HINT}")


def _post(conversation: Conversation, text: str) -> str | None:
    """Send a message or answer a permission prompt; the id of the reply to wait for."""
    command, _, argument = text.partition(" ")
    try:
        if command in ("/allow", "/deny"):
            return conversation.decide(argument.strip() or None, command == "/allow")
        return conversation.send(text)
    except (EngineApiError, ValueError) as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        return None


def _await_reply(conversation: Conversation, message_id: str) -> None:
    if not conversation.wait_for_reply(message_id, PIPED_REPLY_TIMEOUT_S):
        fail(f"no reply within {PIPED_REPLY_TIMEOUT_S:.0f}s")


def _send_and_wait(conversation: Conversation, text: str) -> None:
    """Send ``text`` and show the reply as it comes. Ctrl-C meanwhile gives the prompt
    back; the reply prints when it comes.

    Ctrl-C only sets a flag here: a KeyboardInterrupt raised wherever the main thread
    happens to be (inside a lock, a console write, a request to the engine) can leave
    that half done; a chat in the test suite went silent after a Ctrl-C twice. A
    message whose post was under way when Ctrl-C came is still sent."""
    given_up = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda number, frame: given_up.set())
    try:
        message_id = _post(conversation, text)
        if message_id is None:
            return
        conversation.screen.live = True
        try:
            if not conversation.wait_for_reply(message_id, None, given_up):
                conversation.screen.line(
                    "[dim]not waiting; the reply will print when it is done[/dim]"
                )
        finally:
            conversation.screen.live = False
    finally:
        signal.signal(signal.SIGINT, previous)

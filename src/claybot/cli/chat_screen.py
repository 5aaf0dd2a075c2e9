"""What ``claybot chat`` prints: replies as they stream, tool calls, fall-throughs.

Events arrive on the chat's event thread. While the user waits for a reply (``live``)
its text streams piece by piece onto the reply's line. While the prompt is up, only
whole lines are printed: prompt_toolkit puts them above the prompt line, never on it.

A reply's final text is the ``agent.outgoing`` message: when it continues what was
streamed, only the rest is printed; when it does not (a provider failed mid-stream
and the next one answered anew), it is printed whole on a line of its own.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass

from rich.markup import escape

from claybot.cli.common import console

REPLY_PREFIX = "[bold cyan]agent>[/bold cyan] "
SUMMARY_CHARS = 100  # of a tool call's arguments or result on its one line


@dataclass
class ToolLine:
    """A tool call shown in this chat, by the number it was shown with."""

    number: int
    agent_id: str
    call_id: str
    name: str


def one_line(text: str, limit: int = SUMMARY_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class ChatScreen:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.live = False  # the user is waiting for a reply: stream it
        self._streamed: dict[str, str] = {}  # outgoing id -> text printed so far
        self._open: str | None = None  # the outgoing id whose line is not ended yet
        self._printed: set[str] = set()  # outgoing ids printed in full
        self.tools: dict[int, ToolLine] = {}
        self._tool_numbers: dict[str, int] = {}  # call id -> number

    # -- whole lines ---------------------------------------------------------------------

    def line(self, markup: str) -> None:
        """A line of its own (rich markup), after any reply still streaming."""
        with self._lock:
            self._end_line()
            console.print(markup, highlight=False, soft_wrap=True)

    def _end_line(self) -> None:
        if self._open is not None:
            self._write("\n")
            self._open = None

    def _write(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    # -- replies -------------------------------------------------------------------------

    def delta(self, outgoing_id: str, text: str) -> None:
        with self._lock:
            if not self.live or outgoing_id in self._printed:
                return
            if self._open != outgoing_id:
                self._end_line()
                if outgoing_id in self._streamed:
                    return  # its line was ended by another line: the final text follows
                console.print(REPLY_PREFIX, end="", highlight=False)
                self._open = outgoing_id
                self._streamed[outgoing_id] = ""
            self._streamed[outgoing_id] += text
            self._write(text)

    def reply(self, outgoing_id: str, text: str) -> bool:
        """The final text of a reply; False if it was printed before."""
        with self._lock:
            if outgoing_id in self._printed:
                return False
            self._printed.add(outgoing_id)
            shown = self._streamed.pop(outgoing_id, None)
            if shown is not None and self._open == outgoing_id and text.startswith(shown):
                self._write(text[len(shown) :] + "\n")
                self._open = None
                return True
            if text:
                self.line(REPLY_PREFIX + escape(text))
            return True

    def void(self, message_id_prefix: str) -> None:
        """What was streamed for the turn answering ``message_id_prefix`` is void."""
        with self._lock:
            for outgoing_id in [o for o in self._streamed if o.startswith(message_id_prefix)]:
                if self._open == outgoing_id:
                    self._end_line()
                self._streamed.pop(outgoing_id, None)

    # -- tools and providers -------------------------------------------------------------

    def tool_call(self, agent_id: str, call_id: str, name: str, arguments: str) -> None:
        with self._lock:
            number = len(self.tools) + 1
            self.tools[number] = ToolLine(number, agent_id, call_id, name)
            self._tool_numbers[call_id] = number
            self.line(f"[dim]  ⚙ tool {number}: {escape(name)} {escape(one_line(arguments))}[/dim]")

    def tool_result(self, call_id: str, is_error: bool, text: str) -> None:
        with self._lock:
            number = self._tool_numbers.get(call_id)
            if number is None:
                return
            verdict = "[red]failed[/red]" if is_error else "ok"
            self.line(
                f"[dim]  ↳ tool {number} {verdict}: {escape(one_line(text))} "
                f"(/tool {number} shows it all)[/dim]"
            )

    def fallback(self, failed: str, following: str, reason: str) -> None:
        self.line(
            f"[dim]provider {escape(failed)} failed ({escape(one_line(reason))}); "
            f"trying {escape(following)}[/dim]"
        )

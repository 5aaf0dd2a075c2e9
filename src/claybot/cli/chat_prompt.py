"""The line editor of ``claybot chat`` (prompt_toolkit).

History (kept in the home, across sessions), line editing, multi-line input (Alt-Enter
or Esc then Enter adds a line; a paste keeps its lines), and bracketed paste: the
terminal hands a paste over whole, so nothing is cut at the tty's 4,096-byte line
limit. Output printed while the prompt is up lands above it (``patch_stdout``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

PROMPT_STYLE = "bold fg:ansigreen"
CONTINUATION = "...  "


class ChatPrompt:
    def __init__(self, history_file: Path) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.key_binding import KeyBindings

        history_file.touch(mode=0o600, exist_ok=True)  # what was typed is private
        bindings = KeyBindings()

        @bindings.add("escape", "enter")  # Alt-Enter, or Esc then Enter
        def _new_line(event: object) -> None:
            event.current_buffer.insert_text("\n")  # type: ignore[attr-defined]

        self._session: PromptSession[str] = PromptSession(
            history=FileHistory(os.fspath(history_file)),
            key_bindings=bindings,
            prompt_continuation=CONTINUATION,
            enable_history_search=True,
        )

    def read(self, attached: int = 0) -> str:
        """One message; EOFError on Ctrl-D, KeyboardInterrupt on Ctrl-C. ``attached``:
        files waiting to go with it, which the prompt shows."""
        from prompt_toolkit.formatted_text import FormattedText
        from prompt_toolkit.patch_stdout import patch_stdout

        with patch_stdout(raw=True):
            return self._session.prompt(FormattedText([(PROMPT_STYLE, prompt_text(attached))]))


def prompt_text(attached: int) -> str:
    if not attached:
        return "you> "
    return f"you [+{attached} file{'' if attached == 1 else 's'}]> "

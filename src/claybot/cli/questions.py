"""Questions asked on a terminal and answered by flags in a script.

Each question names the flag that answers it. The caller passes a flag's answer
when there is one and asks only otherwise; then, with a terminal, the question is
put; with ``--yes``, its default is taken; with neither, the command stops and
says which flag answers it, so a script never hangs on a prompt it cannot see.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import typer

from claybot.cli.common import err_console, fail

T = TypeVar("T")


@dataclass(frozen=True)
class Questions:
    interactive: bool  # a terminal to ask on, and no --yes
    assume_defaults: bool  # --yes

    @classmethod
    def here(cls, yes: bool) -> Questions:
        return cls(interactive=sys.stdin.isatty() and not yes, assume_defaults=yes)

    def unanswered(self, question: str, flag: str, default: T | None) -> T:
        """The answer when no one can be asked: the default under --yes, else a clear stop."""
        if self.assume_defaults:
            if default is None:
                fail(f"{question!r} has no default: pass {flag}")
            return default
        or_yes = "" if default is None else " (or --yes to take the defaults)"
        fail(f"there is no terminal to ask {question!r}: pass {flag}{or_yes}")

    def choose(self, question: str, *, flag: str, choices: Sequence[str], default: str) -> str:
        if not self.interactive:
            return self.unanswered(question, flag, default)
        # typer validates a prompt's answer against an annotation: a Literal of the choices
        # (it lists them, and asks again after a wrong one).
        choice = Literal.__getitem__(tuple(choices))
        answer: str = typer.prompt(question, type=choice, default=default)
        return answer

    def confirm(self, question: str, *, flag: str, default: bool) -> bool:
        if not self.interactive:
            return self.unanswered(question, flag, default)
        return typer.confirm(question, default=default)

    def text(
        self,
        question: str,
        *,
        flag: str,
        default: str | None,
        parse: Callable[[str], T],
    ) -> T:
        """A free answer, parsed; on a terminal a bad answer is explained and asked again.

        ``parse`` raises ``ValueError`` with the explanation.
        """
        if not self.interactive:
            raw = self.unanswered(question, flag, default)
            try:
                return parse(raw)
            except ValueError as exc:
                fail(f"{flag}: {exc}")
        while True:
            raw = typer.prompt(question, default=default, show_default=bool(default))
            try:
                return parse(raw)
            except ValueError as exc:
                err_console.print(f"[red]{exc}[/red]", highlight=False)

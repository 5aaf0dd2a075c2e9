"""One result of a check: its status, a line saying why, and the fix."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Status = Literal["ok", "warn", "fail"]
# A safe fix ``claybot doctor --fix`` applies itself: it returns what it did, in a few
# words, and never deletes data or changes a key.
Repair = Callable[[], str]


@dataclass(frozen=True)
class Finding:
    check: str  # a stable id: "home.modes", "provider.openai.key", "port" ...
    status: Status
    detail: str
    fix: str | None = None  # the command (or the step) that fixes it; None when ok
    repair: Repair | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, str | None]:
        return {"check": self.check, "status": self.status, "detail": self.detail, "fix": self.fix}


# What is not ok always says how to fix it.


def ok(check: str, detail: str) -> Finding:
    return Finding(check, "ok", detail)


def warn(check: str, detail: str, fix: str, repair: Repair | None = None) -> Finding:
    return Finding(check, "warn", detail, fix, repair)


def fail(check: str, detail: str, fix: str, repair: Repair | None = None) -> Finding:
    return Finding(check, "fail", detail, fix, repair)

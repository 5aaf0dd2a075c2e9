"""``GET /v1/engine/events``: the frames of the engine's event stream, as a client reads them.

The stream is server-sent events, not a JSON answer, so no route declares this
model: it is what each frame's data holds (``claybot.kernel.events.Event``, and
the init frame the route sends first).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from claybot.wire.base import Answer

INIT = "init"  # the first frame's type: the engine's state, then the replay's count


class EventFrame(Answer):
    """One frame: an event, or the init frame (``type`` ``init``, no timestamp).

    The payload is left a mapping: its shape is the type's (``kernel/event_types.py``
    lists the engine's; plugins and proactive agents emit free-form ones, and the
    init frame carries the status and the listings), and a reader picks what it
    knows by ``type`` rather than every reader paying to build every payload.
    """

    id: int = Field(
        description="Increasing, across engine restarts; the init frame's is the newest event's"
    )
    type: str
    payload: dict[str, Any]
    timestamp: str | None = Field(description="ISO 8601, UTC; null on the init frame")

    @property
    def is_init(self) -> bool:
        return self.type == INIT

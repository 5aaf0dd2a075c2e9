"""Short ids: wherever a command takes an id, a unique prefix of it will do, as with
git's short hashes (``claybot jobs show 3f2a``).

An id typed whole always wins, even when it is also the prefix of another. A prefix
that starts no id, or several, ends the command with a message that says so (and, for
several, lists them whole, so the next try can be copied).

Asking costs one request in the usual case: ``through_prefix`` first tries what was
typed as the id, and lists the candidates only when the engine answers 404.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from claybot.cli.common import fail

T = TypeVar("T")

AMBIGUOUS_SHOWN = 10  # ids listed when a prefix starts more of them


def resolve_prefix(given: str, ids: Iterable[str], noun: str) -> str:
    """The id in ``ids`` that ``given`` names: itself when it is one, else the only id it
    starts. ``noun`` names what the ids are for the messages ("job", "cron task")."""
    known = sorted(set(ids))
    if given in known:
        return given
    matches = [candidate for candidate in known if given and candidate.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        fail(f"no {noun} with id starting {given!r}", error="not_found")
    shown = ", ".join(matches[:AMBIGUOUS_SHOWN])
    if len(matches) > AMBIGUOUS_SHOWN:
        shown += f" and {len(matches) - AMBIGUOUS_SHOWN} more"
    fail(f"{given!r} is ambiguous: {shown} — type more of the id", error="ambiguous_id")


def through_prefix(
    given: str, act: Callable[[str], T], ids: Callable[[], Iterable[str]], noun: str
) -> tuple[str, T]:
    """``act`` on the id ``given`` names; returns the whole id and what ``act`` returned.

    ``given`` is tried as it is first: a whole id costs one request. When the engine
    answers 404, ``ids`` lists the candidates and ``act`` runs again with the one the
    prefix names. A 404 for an id that exists was about something else (an execution of
    that agent, say) and is raised as it came.
    """
    from claybot.client.errors import EngineApiError

    try:
        return given, act(given)
    except EngineApiError as exc:
        if exc.status != 404:
            raise
        known = list(ids())
        if given in known:
            raise
    whole = resolve_prefix(given, known, noun)
    return whole, act(whole)

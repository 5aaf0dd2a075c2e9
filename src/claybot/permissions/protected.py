"""What no grant reaches, or only a grant made inside it. Pure.

Two kinds of folder are kept from agents whatever their grants say:

- ``engine``: the engine's own files and the user's keys (settings, auth.json, the
  socket, the database, every agent's folder, ``~/.ssh`` ...). No agent may read or
  write them, however widely a grant reaches (a grant of ``/`` included).
- ``private``: folders split into one part per agent, such as
  ``<home>/received/<agent id>``, the files an agent's conversation brought it.
  A grant from outside (the workspace every agent shares, ``/``) reaches none of
  it; a read grant that lies *inside* such a folder reaches what it names. The
  engine gives each agent the grant of its own part, and an agent may pass it on
  to a subagent it starts (it can pass on only what it holds), so one
  conversation's files are read by its agent and those it chose. Nothing there is
  ever written by an agent: the engine put it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from claybot.permissions.model import Permissions
from claybot.permissions.tags import is_within


@dataclass(frozen=True)
class ProtectedPaths:
    engine: tuple[str, ...] = ()  # resolved
    private: tuple[str, ...] = ()  # resolved

    def refusal(
        self, path: str, permissions: Permissions, access: Literal["read", "write"]
    ) -> str | None:
        """Why the resolved ``path`` may not be opened for ``access`` whatever the grants
        say, or None when only the grants decide."""
        if any(is_within(path, secret) for secret in self.engine):
            return (
                f"{path} belongs to the engine (or holds keys): no agent may {access} it, "
                "whatever its grants"
            )
        for zone in self.private:
            if not is_within(path, zone):
                continue
            if access == "write":
                return (
                    f"{path} is a file a conversation brought: no agent may write there "
                    "(copy it into your own folder first)"
                )
            if not private_grant(path, zone, permissions):
                return (
                    f"{path} holds another conversation's files: only its own agent (and "
                    "the subagents it passes them on to) may read them"
                )
        return None

    def ungrantable(self, path: str) -> str | None:
        """Why no one may be asked for a grant of the resolved ``path``, or None.

        Whoever a request goes to (the asking agent's own user, for a user agent)
        could otherwise open another conversation's files to their agent.
        """
        if any(is_within(path, secret) for secret in self.engine):
            return f"{path} belongs to the engine (or holds keys): no agent may be granted it"
        if any(is_within(path, zone) for zone in self.private):
            return (
                f"{path} holds conversations' files: an agent reads its own without asking, "
                "and no agent may be granted another's"
            )
        return None

    def private_grants(self, permissions: Permissions) -> list[str]:
        """The grants that lie inside a private folder: what such a folder shows."""
        return [
            folder
            for folder in _granted(permissions)
            if any(_inside(folder, zone) for zone in self.private)
        ]


def private_grant(path: str, zone: str, permissions: Permissions) -> bool:
    """Whether a grant inside ``zone`` holds ``path``."""
    return any(
        is_within(path, folder) and _inside(folder, zone) for folder in _granted(permissions)
    )


def _granted(permissions: Permissions) -> list[str]:
    return [*permissions.readDirs, *permissions.writeDirs]


def _inside(folder: str, zone: str) -> bool:
    """Strictly inside: a grant of the whole zone names no one agent's part."""
    return folder != zone and is_within(folder, zone)

"""What codeck's web client reads besides its proactive agents: its login and folder picker."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from claybot.wire.base import Answer, Ok


class AuthStatus(Ok):
    """``GET /api/auth/status``: a login is always needed (an API key is the password)."""

    configured: Literal[True] = Field(
        description="codeck's client asks for its password (here: an API key) when true"
    )


class LoggedIn(Ok):
    success: Literal[True]
    token: str = Field(
        description="The API key that was given: the client keeps it and sends it as "
        "`Authorization: Bearer` (and, on its WebSocket, as `?token=`)"
    )


class Folder(Answer):
    name: str
    isDirectory: Literal[True]


class FolderList(Ok):
    """``GET /api/files?path=``: the folders an agent's ``cwd`` may be, one level at a time."""

    success: Literal[True]
    path: str = Field(description="The path asked for, relative to the workspace")
    absolutePath: str = Field(description="That folder, resolved")
    items: list[Folder] = Field(description="Its folders (not hidden ones), by name; no files")

"""The ``shell`` plugin, file half: ``read``, ``write`` and ``edit`` within an agent's grants.

Every path is resolved (symlinks, ``..``) before it is checked against the agent's
``readDirs``/``writeDirs``, and files are opened with ``O_NOFOLLOW`` so a link
swapped in after the check is refused rather than followed. ``exec`` (sandboxed
commands) is a later part of issue 3.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from claybot.config.settings import CamelModel
from claybot.engine.permissions.tags import check_path
from claybot.engine.plugins.api import PluginApi
from claybot.engine.plugins.definition import PluginDefinition
from claybot.tools.base import ToolContext, ToolDefinition, ToolResult

PLUGIN_ID = "shell"


class ShellSettings(CamelModel):
    max_read_bytes: int = Field(default=200_000, ge=1, le=50_000_000)


class ReadArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="Absolute path of the file to read.")


class WriteArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="Absolute path of the file to write.")
    content: str
    append: bool = False


class Edit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    search: str = Field(min_length=1)
    replace: str
    replaceAll: bool = False  # camelCase: the name the model sees


class EditArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="Absolute path of the file to edit.")
    edits: list[Edit] = Field(min_length=1, description="Applied in order; each must match.")


def _open_no_follow(path: str, flags: int, mode: int = 0o644) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


class ShellPlugin:
    def __init__(self, api: PluginApi[ShellSettings]) -> None:
        self._api = api
        self._max_read = api.settings.max_read_bytes

    async def load(self) -> None:
        register = self._api.registrar.register_tool
        register(
            ToolDefinition("read", "Read a text file (absolute path).", ReadArguments, self._read)
        )
        register(
            ToolDefinition(
                "write", "Write or append to a file (absolute path).", WriteArguments, self._write
            )
        )
        register(
            ToolDefinition(
                "edit", "Search-and-replace edits in a file, in order.", EditArguments, self._edit
            )
        )

    async def unload(self) -> None:
        return None

    async def _read(self, arguments: BaseModel, context: ToolContext) -> ToolResult:
        assert isinstance(arguments, ReadArguments)
        path = check_path(context.permissions, arguments.path, "read")
        fd = _open_no_follow(path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(self._max_read + 1)
        text = data[: self._max_read].decode(errors="replace")
        if len(data) > self._max_read:
            text += f"\n[truncated at {self._max_read} bytes]"
        return ToolResult(text)

    async def _write(self, arguments: BaseModel, context: ToolContext) -> ToolResult:
        assert isinstance(arguments, WriteArguments)
        path = check_path(context.permissions, arguments.path, "write")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        mode = os.O_APPEND if arguments.append else os.O_TRUNC
        fd = _open_no_follow(path, os.O_WRONLY | os.O_CREAT | mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(arguments.content.encode())
        verb = "appended" if arguments.append else "wrote"
        return ToolResult(f"{verb} {len(arguments.content.encode())} bytes to {path}")

    async def _edit(self, arguments: BaseModel, context: ToolContext) -> ToolResult:
        assert isinstance(arguments, EditArguments)
        path = check_path(context.permissions, arguments.path, "write")
        fd = _open_no_follow(path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as handle:
            text = handle.read().decode()
        for number, edit in enumerate(arguments.edits, start=1):
            if edit.search not in text:
                return ToolResult(
                    f"edit {number}: {edit.search!r} was not found; nothing changed", True
                )
            text = text.replace(edit.search, edit.replace, -1 if edit.replaceAll else 1)
        fd = _open_no_follow(path, os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode())
        return ToolResult(f"applied {len(arguments.edits)} edit(s) to {path}")


def shell_definition() -> PluginDefinition[ShellSettings]:
    return PluginDefinition(
        id=PLUGIN_ID,
        name="Shell",
        description="File tools: read, write and edit inside the agent's granted folders.",
        settings_model=ShellSettings,
        create=ShellPlugin,
    )

"""``send_file``: a user agent sends a file from its folders to its conversation.

The file must be inside the agent's read grants; it is opened as the ``read`` tool
opens files (resolved, checked, then walked without following a link, the engine's
own files and the user's keys refused whatever the grants), read on a worker thread
and put in the file store. The tool itself sends nothing: its result carries the
message (``Delivery``), and the turn loop records it before delivering it, as it
does a reply, so it goes out once across a restart.

Only user agents have it: a subagent, a cron or heartbeat run and a job have no
conversation of their own to send a file to.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from claybot.files.reference import FileReference
from claybot.files.store import FileStore, FileTooLarge
from claybot.kernel.errors import ClayError
from claybot.permissions.granted_open import open_granted
from claybot.permissions.model import Permissions
from claybot.permissions.protected import ProtectedPaths
from claybot.permissions.tags import PermissionTagError
from claybot.tools.base import Delivery, ToolContext, ToolDefinition, ToolResult

MAX_CAPTION_CHARS = 4096


class SendFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="Absolute path of the file to send, inside your folders.")
    caption: str = Field(default="", max_length=MAX_CAPTION_CHARS, description="Sent with it.")


class FileTools:
    def __init__(self, store: FileStore, protected: ProtectedPaths) -> None:
        self._store = store
        self._protected = protected

    def definitions(self) -> list[ToolDefinition[Any]]:
        return [
            ToolDefinition(
                "send_file",
                "Send a file (absolute path inside your folders) to the person you talk "
                "with, with an optional caption.",
                SendFile,
                self.send_file,
                visible_to=frozenset({"user"}),
            )
        ]

    async def send_file(self, arguments: SendFile, context: ToolContext) -> ToolResult:
        try:
            reference = await asyncio.to_thread(
                self._store_file, arguments.path, context.permissions
            )
        except (PermissionError, PermissionTagError) as exc:
            return ToolResult(f"send_file refused: {exc}", is_error=True)
        except FileNotFoundError:
            return ToolResult(f"send_file: no such file {arguments.path!r}", is_error=True)
        except ClayError as exc:  # past files.maxFileBytes, or the store's quota
            return ToolResult(f"send_file refused: {exc.message}", is_error=True)
        except OSError as exc:
            return ToolResult(f"send_file: cannot read {arguments.path!r}: {exc}", is_error=True)
        return ToolResult(
            f"Sent {reference.name} ({reference.mimeType}, {reference.size} bytes).",
            delivers=Delivery(arguments.caption, (reference,)),
        )

    def _store_file(self, raw_path: str, permissions: Permissions) -> FileReference:
        path, fd = open_granted(permissions, raw_path, "read", os.O_RDONLY, self._protected)
        limit = self._store.settings.max_file_bytes
        with os.fdopen(fd, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limit:  # refused before it is read into memory
                raise FileTooLarge(
                    f"{os.path.basename(path)!r} is {size} bytes; the limit is {limit} "
                    "(files.maxFileBytes)",
                    field="path",
                )
            data = handle.read(limit + 1)  # put refuses it if it grew meanwhile
        return self._store.put(data, os.path.basename(path))

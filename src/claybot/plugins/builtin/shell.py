"""The ``shell`` plugin: ``read``, ``write`` and ``edit`` within an agent's grants, and ``exec``.

Every path is resolved (symlinks, ``..``) before it is checked against the agent's
``readDirs``/``writeDirs``, then opened one component at a time without following
links, so a folder swapped for a link after the check is refused rather than
followed. The engine's own files (auth.json, settings, the socket, the database,
every agent's folder ...), the user's keys and other conversations' received files
are refused whatever the grants, as exec hides them. File work runs on a worker
thread, never on the event loop.

``exec`` runs ``/bin/sh -c <command>`` in the sandbox of ``claybot.sandbox``:
bubblewrap (read-only root, only ``writeDirs`` writable, the engine's files and
secrets hidden, no network without ``@network``, every process killed with the
call), or nothing runs. Only the setting ``sandbox: unconfined`` runs commands
without confinement, and every result then says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from claybot.plugin_api import (
    MIB,
    CamelModel,
    CapturedOutput,
    ExecResult,
    Permissions,
    PermissionTagError,
    PluginApi,
    PluginDefinition,
    PluginSettingsInvalid,
    ResourceLimits,
    SandboxConfig,
    SandboxMode,
    SandboxUnavailable,
    ToolContext,
    ToolDefinition,
    ToolResult,
    check_path,
    open_granted,
)

PLUGIN_ID = "shell"
DEFAULT_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 300_000


class ShellSettings(CamelModel):
    max_read_bytes: int = Field(default=200_000, ge=1, le=50_000_000)
    # auto and bwrap: bubblewrap, or exec refuses (bwrap also refuses to load without it).
    # unconfined: no confinement at all, only when named here on purpose.
    sandbox: SandboxMode = "auto"
    cpu_limit_s: int = Field(default=60, ge=1, le=3600)
    memory_limit_mb: int = Field(default=2048, ge=64, le=1_048_576)  # address space
    file_size_limit_mb: int = Field(default=256, ge=1, le=1_048_576)
    process_limit: int = Field(default=512, ge=16, le=1_000_000)  # per command (a cgroup)
    max_output_bytes: int = Field(default=1_000_000, ge=1024, le=50_000_000)  # per stream

    @field_validator("sandbox", mode="before")
    @classmethod
    def _no_rlimit(cls, value: object) -> object:
        if value == "rlimit":
            raise ValueError(
                "'rlimit' no longer exists: it did not confine the file system. Install "
                "bubblewrap (the default 'auto' uses it), or set 'unconfined' to run "
                "commands without any confinement on purpose"
            )
        return value


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


class ExecArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str = Field(min_length=1, max_length=100_000, description="Run by /bin/sh -c.")
    cwd: str | None = Field(
        default=None,
        description="Absolute working directory inside your granted folders; "
        "default: your working directory.",
    )
    timeoutMs: int = Field(
        default=DEFAULT_TIMEOUT_MS,
        ge=1,
        le=MAX_TIMEOUT_MS,
        description="Kill the command (and all it started) after this many milliseconds.",
    )


def sandbox_config(settings: ShellSettings) -> SandboxConfig:
    limits = ResourceLimits(
        cpu_s=settings.cpu_limit_s,
        memory_bytes=settings.memory_limit_mb * MIB,
        file_size_bytes=settings.file_size_limit_mb * MIB,
        processes=settings.process_limit,
    )
    return SandboxConfig(
        mode=settings.sandbox, limits=limits, max_output_bytes=settings.max_output_bytes
    )


def _stream_section(name: str, output: CapturedOutput) -> str:
    if not output.data and not output.dropped:
        return ""
    text = f"{name}:\n{output.text()}"
    if output.dropped:
        text += f"\n[{name} cut at {len(output.data)} bytes; {output.dropped} more bytes dropped]"
    return text


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def format_exec(result: ExecResult, timeout_ms: int) -> str:
    if result.timed_out:
        head = f"timed out after {timeout_ms / 1000:g} s; the command and its children were killed"
    elif result.exit_code is not None and result.exit_code < 0:
        head = f"killed by {_signal_name(-result.exit_code)}"
    else:
        head = f"exit code: {result.exit_code}"
    if result.backend == "unconfined":
        # Every result says it, so neither the model nor a reader of history can miss it.
        head += f" (UNCONFINED: not sandboxed, {result.duration_s:.2f} s)"
    else:
        head += f" ({result.backend} sandbox, {result.duration_s:.2f} s)"
    if result.stdout.dropped or result.stderr.dropped:
        head += " [output cut]"
    sections = [_stream_section("stdout", result.stdout), _stream_section("stderr", result.stderr)]
    return "\n".join([head, *(section for section in sections if section)])


class ShellPlugin:
    def __init__(self, api: PluginApi[ShellSettings]) -> None:
        self._api = api
        self._max_read = api.settings.max_read_bytes
        self._runner = api.sandbox.runner(api.instance_id, sandbox_config(api.settings))
        self._protected = api.sandbox.protected_paths()

    async def load(self) -> None:
        if self._api.settings.sandbox == "bwrap":
            support = await self._api.sandbox.support()
            if support.bwrap is None:
                raise PluginSettingsInvalid(
                    PLUGIN_ID, f"sandbox is 'bwrap' but {support.problem}", field="settings.sandbox"
                )
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
        register(
            ToolDefinition(
                "exec",
                "Run a shell command (/bin/sh -c) in a sandbox: only your folders are visible "
                "and only your write folders writable, no network without @network, and "
                "nothing it starts outlives it; returns exit code, stdout and stderr.",
                ExecArguments,
                self._exec,
            )
        )

    async def unload(self) -> None:
        self._api.sandbox.forget(self._api.instance_id)

    async def _read(self, arguments: ReadArguments, context: ToolContext) -> ToolResult:
        return await asyncio.to_thread(self._read_file, arguments, context.permissions)

    def _read_file(self, arguments: ReadArguments, permissions: Permissions) -> ToolResult:
        _, fd = open_granted(permissions, arguments.path, "read", os.O_RDONLY, self._protected)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(self._max_read + 1)
        text = data[: self._max_read].decode(errors="replace")
        if len(data) > self._max_read:
            text += f"\n[truncated at {self._max_read} bytes]"
        return ToolResult(text)

    async def _write(self, arguments: WriteArguments, context: ToolContext) -> ToolResult:
        return await asyncio.to_thread(self._write_file, arguments, context.permissions)

    def _write_file(self, arguments: WriteArguments, permissions: Permissions) -> ToolResult:
        mode = os.O_APPEND if arguments.append else os.O_TRUNC
        path, fd = open_granted(
            permissions, arguments.path, "write", os.O_WRONLY | os.O_CREAT | mode, self._protected
        )
        with os.fdopen(fd, "wb") as handle:
            handle.write(arguments.content.encode())
        verb = "appended" if arguments.append else "wrote"
        return ToolResult(f"{verb} {len(arguments.content.encode())} bytes to {path}")

    async def _edit(self, arguments: EditArguments, context: ToolContext) -> ToolResult:
        return await asyncio.to_thread(self._edit_file, arguments, context.permissions)

    def _edit_file(self, arguments: EditArguments, permissions: Permissions) -> ToolResult:
        # One descriptor for the read and the write: the file written is the file read,
        # whatever happens to the path in between.
        path, fd = open_granted(permissions, arguments.path, "write", os.O_RDWR, self._protected)
        with os.fdopen(fd, "r+b") as handle:
            text = handle.read().decode()
            for number, edit in enumerate(arguments.edits, start=1):
                if edit.search not in text:
                    return ToolResult(
                        f"edit {number}: {edit.search!r} was not found; nothing changed", True
                    )
                text = text.replace(edit.search, edit.replace, -1 if edit.replaceAll else 1)
            handle.seek(0)
            handle.truncate()
            handle.write(text.encode())
        return ToolResult(f"applied {len(arguments.edits)} edit(s) to {path}")

    async def _exec(self, arguments: ExecArguments, context: ToolContext) -> ToolResult:
        permissions = context.permissions
        requested = arguments.cwd or permissions.workingDir
        if not requested:
            return ToolResult(
                "exec refused: no cwd given and this agent has no working directory", True
            )
        try:
            cwd, home = await asyncio.to_thread(_exec_folders, permissions, requested)
        except (PermissionError, PermissionTagError, NotADirectoryError) as exc:
            return ToolResult(f"exec refused: cwd {requested!r}: {exc}", True)
        try:
            result = await self._runner.run(
                arguments.command,
                cwd=cwd,
                home=home,
                permissions=permissions,
                timeout_s=arguments.timeoutMs / 1000,
            )
        except SandboxUnavailable as exc:
            return ToolResult(f"exec refused: {exc}", True)
        failed = result.timed_out or result.exit_code != 0
        return ToolResult(format_exec(result, arguments.timeoutMs), failed)


def _exec_folders(permissions: Permissions, requested: str) -> tuple[str, str]:
    """The resolved, granted ``cwd``, and the HOME the command gets (the working directory
    when the agent may use it, else ``cwd``)."""
    cwd = check_path(permissions, requested, "read")
    if not os.path.isdir(cwd):
        raise NotADirectoryError(f"{cwd} is not a directory")
    home = cwd
    if permissions.workingDir:
        with contextlib.suppress(PermissionError, PermissionTagError):
            home = check_path(permissions, permissions.workingDir, "read")
    return cwd, home


def shell_definition() -> PluginDefinition[ShellSettings]:
    return PluginDefinition(
        id=PLUGIN_ID,
        name="Shell",
        description="File tools (read, write, edit) and exec, a sandboxed shell command, "
        "inside the agent's granted folders.",
        settings_model=ShellSettings,
        create=ShellPlugin,
    )

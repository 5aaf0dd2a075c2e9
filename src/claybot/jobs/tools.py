"""A job's tools (seed 002): fetch_url, run_python, read_file, write_file, ask_user,
discover_tools, final_answer.

Each works for one claimed job, and every write it makes is fenced by the claim.
What the original did wrong is done right here: fetches go through the guarded
fetch (no private addresses); files a script creates become artifacts at once;
write_file stores its artifact at once, not at the end; a file read is never
garbled (binary is described, not decoded); ask_user's plan is checked for its
shape; a tool's limits are the job's, not the process's; the servers
discover_tools finds can be called (the original only described them).

It is longer than most modules because the seven tools are one contract the model
sees (names, descriptions, argument models, limits), read and changed together;
each body is short, and what they share lives elsewhere (the guarded fetch, the
sandbox, the store).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import mimetypes
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from claybot.jobs.database import JobDatabase
from claybot.jobs.mcp_servers import McpServers
from claybot.jobs.model import Claim
from claybot.jobs.registry_model import Match, RegisteredServer
from claybot.jobs.transcript import JobTranscript
from claybot.net.address import Resolve, resolve_host
from claybot.net.egress import EgressProxy
from claybot.net.guarded_fetch import FetchFailed, FetchRefused, FetchSettings, UrlFetcher
from claybot.permissions.model import Permissions
from claybot.sandbox import SandboxRunner, SandboxUnavailable
from claybot.tools.base import AgentKind, ToolContext, ToolDefinition, ToolRegistry, ToolResult

JOB: frozenset[AgentKind] = frozenset({"job"})
SCRIPT = "script.py"
PACKAGES = ".packages"
FETCH_TEXT_LIMIT = 50_000
MAX_NEW_ARTIFACTS = 50  # files one run_python may leave as artifacts
PACKAGE_NAME = re.compile(r"^[a-zA-Z0-9_\-\[\]<>=.,]+$")
MAX_PACKAGES = 10
SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
DISCOVER_LIMIT = 5  # servers one discover_tools call offers


@dataclass
class JobToolContext:
    db: JobDatabase
    claim: Claim  # every write is fenced by it
    transcript: JobTranscript  # its unwritten records ride with write_file's artifact
    workdir: Path  # the job's own directory: run_python runs here
    runner: SandboxRunner
    allow_network: bool
    mcp: McpServers  # the servers discover_tools finds, connected when first called
    egress: EgressProxy  # run_python's network, when the job allows one
    python_timeout_s: float = 120.0
    fetch_settings: FetchSettings = field(default_factory=lambda: FetchSettings(total_timeout_s=30))
    resolve: Resolve = resolve_host

    @property
    def job_id(self) -> str:
        return self.claim.job.id


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FetchArgs(_Args):
    url: str = Field(min_length=1, max_length=8192)
    method: Literal["GET", "POST", "PUT", "DELETE"] = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    body: str | None = None


class PythonArgs(_Args):
    code: str = Field(min_length=1, max_length=200_000)
    packages: list[str] = Field(default_factory=list, max_length=MAX_PACKAGES)


class ReadArgs(_Args):
    filename: str = Field(min_length=1, max_length=255)


class WriteArgs(_Args):
    filename: str = Field(min_length=1, max_length=255)
    content: str


class AskArgs(_Args):
    question: str = Field(min_length=1, max_length=50_000)


class DiscoverArgs(_Args):
    query: str = Field(min_length=1, max_length=1000)


class AnswerArgs(_Args):
    answer: str = Field(min_length=1)


def safe_filename(name: str) -> str | None:
    """The name as a plain file name in the job's folder, or None if nothing is left."""
    base = SAFE_NAME.sub("_", os.path.basename(name.replace("\\", "/")))
    return None if base in ("", ".", "..") or base.startswith(".") else base


class JobTools:
    """The job's tools, offered through ``offered``: discover_tools adds to it."""

    def __init__(self, ctx: JobToolContext, offered: ToolRegistry) -> None:
        self.ctx = ctx
        self.offered = offered
        self._servers: dict[str, list[str]] = {}  # an offered MCP server's id: its tools' names
        # Artifacts written by write_file in this run, copied into the folder before
        # run_python runs (not at once: most jobs never run a script, and a file write is
        # a thread hop); earlier runs' artifacts come from the database then.
        self._unfiled: dict[str, bytes] = {}
        self._filed = False  # the folder has this job's artifacts from the database
        self._fetcher = UrlFetcher(
            ctx.fetch_settings,
            resolve=ctx.resolve,
            private_hint="a job fetches public addresses only",
        )

    def offer_builtins(self) -> None:
        for definition in self._definitions():
            self.offered.register(definition)

    def _definitions(self) -> list[ToolDefinition[Any]]:
        return [
            ToolDefinition(
                "fetch_url",
                "Send an HTTP request to a public http(s) URL; returns the status and the body "
                f"(JSON pretty-printed, at most {FETCH_TEXT_LIMIT} characters).",
                FetchArgs,
                self.fetch_url,
                visible_to=JOB,
            ),
            ToolDefinition(
                "run_python",
                "Run Python 3 code as a script in your own directory (files it writes there are "
                "kept as artifacts). Returns stdout, stderr and the exit code. "
                + (
                    "Its network is the public internet through an HTTP proxy (HTTP_PROXY and "
                    "HTTPS_PROXY are set: urllib, requests, httpx and pip use it); local, "
                    "private and link-local addresses are refused."
                    if self.ctx.allow_network
                    else "It has no network."
                ),
                PythonArgs,
                self.run_python,
                visible_to=JOB,
            ),
            ToolDefinition(
                "read_file",
                "Read a file uploaded for this task, by its name.",
                ReadArgs,
                self.read_file,
                visible_to=JOB,
                durable_first=False,
            ),
            ToolDefinition(
                "write_file",
                "Save a file for the person (an artifact they can download).",
                WriteArgs,
                self.write_file,
                visible_to=JOB,
                durable_first=False,
            ),
            ToolDefinition(
                "ask_user",
                "Ask the person a question and wait for the answer. For a plan, the question "
                'is a JSON string {"type": "plan", "plan": "...", "question": "..."}.',
                AskArgs,
                self.ask_user,
                visible_to=JOB,
                durable_first=False,
            ),
            ToolDefinition(
                "discover_tools",
                "Search the registry of MCP servers for tools that fit a need (words such as "
                "'weather forecast' or 'github issues'); the servers found have their tools "
                "added to yours, callable as mcp__<server>__<tool>.",
                DiscoverArgs,
                self.discover_tools,
                visible_to=JOB,
            ),
            ToolDefinition(
                "final_answer",
                "Finish the task with your answer.",
                AnswerArgs,
                self.final_answer,
                visible_to=JOB,
                durable_first=False,
            ),
        ]

    async def _log(self, message: str) -> None:
        await self.ctx.db.logs.add(self.ctx.job_id, message, claim=self.ctx.claim)

    async def fetch_url(self, args: FetchArgs, context: ToolContext) -> ToolResult:
        await self._log(f"Tool call: fetch_url({args.method} {args.url[:100]})")
        try:
            page = await self._fetcher.fetch(
                args.url, method=args.method, headers=args.headers, body=args.body
            )
        except FetchRefused as exc:
            return ToolResult(f"Refused: {exc}", is_error=True)
        except FetchFailed as exc:
            return ToolResult(f"Fetch failed: {exc}", is_error=True)
        text = page.body.decode(page.charset or "utf-8", errors="replace")
        if "json" in page.content_type:
            with contextlib.suppress(ValueError):  # not JSON after all: shown as it is
                text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        if len(text) > FETCH_TEXT_LIMIT:
            text = text[:FETCH_TEXT_LIMIT] + "\n[Truncated - content too long]"
        return ToolResult(f"Status: {page.status}\n\n{text}")

    async def run_python(self, args: PythonArgs, context: ToolContext) -> ToolResult:
        ctx = self.ctx
        await self._log(f"Tool call: run_python({args.code[:100]!r})")
        command = f"python3 {SCRIPT}"
        if args.packages:
            bad = [p for p in args.packages if not PACKAGE_NAME.match(p)]
            if bad:
                return ToolResult(f"Not a package name: {', '.join(bad)}", is_error=True)
            if not ctx.allow_network:
                return ToolResult(
                    "Packages cannot be installed: this job has no network. Use the standard "
                    "library, or ask for a job that allows the network.",
                    is_error=True,
                )
            names = " ".join(f"'{p}'" for p in args.packages)
            command = (
                f"python3 -m pip install --quiet --target {PACKAGES} {names} && "
                f"PYTHONPATH={PACKAGES} python3 {SCRIPT}"
            )
        if not self._filed:
            stored = await ctx.db.files.artifacts(ctx.job_id, content=True)
            earlier = {
                name: f.content
                for f in stored
                if f.content is not None and (name := safe_filename(f.filename)) is not None
            }
            self._unfiled = {**earlier, **self._unfiled}
            self._filed = True
        before = await asyncio.to_thread(self._prepare, args.code)
        workdir = str(ctx.workdir)
        run = functools.partial(
            ctx.runner.run,
            command,
            cwd=workdir,
            home=workdir,
            permissions=Permissions(
                workingDir=workdir, writeDirs=[workdir], network=ctx.allow_network
            ),
            timeout_s=ctx.python_timeout_s,
        )
        try:
            if ctx.allow_network:
                # The network a job gets is the egress proxy's, never the host's.
                async with ctx.egress.listening(f"job {ctx.job_id}") as egress:
                    result = await run(egress_socket=egress)
            else:
                result = await run()
        except SandboxUnavailable as exc:
            return ToolResult(f"run_python cannot run here: {exc}", is_error=True)
        saved = await self._collect(before)
        parts = [result.stdout.text().rstrip()]
        stderr = result.stderr.text().rstrip()
        if stderr:
            parts.append(f"Stderr:\n{stderr}")
        if result.timed_out:
            parts.append(f"Timed out after {ctx.python_timeout_s:g} s: the script was stopped.")
        else:
            parts.append(f"Exit code: {result.exit_code}")
        if saved:
            parts.append("Files saved as artifacts: " + ", ".join(saved))
        text = "\n\n".join(part for part in parts if part) or "(No output)"
        return ToolResult(text, is_error=result.timed_out or result.exit_code != 0)

    def _prepare(self, code: str) -> dict[str, tuple[int, int]]:
        """The folder with the script in it (off the loop: a mkdir here can take a
        millisecond); what was there before it ran."""
        self.ctx.workdir.mkdir(parents=True, exist_ok=True)
        unfiled, self._unfiled = self._unfiled, {}
        for name, content in unfiled.items():
            (self.ctx.workdir / name).write_bytes(content)
        (self.ctx.workdir / SCRIPT).write_text(code)
        return _snapshot(self.ctx.workdir)

    async def _collect(self, before: dict[str, tuple[int, int]]) -> list[str]:
        """Files the script created or changed become artifacts now."""
        saved: list[str] = []
        for name, stamp in sorted(_snapshot(self.ctx.workdir).items()):
            if before.get(name) == stamp or len(saved) >= MAX_NEW_ARTIFACTS:
                continue
            path = self.ctx.workdir / name
            content = path.read_bytes()
            if len(content) > self.ctx.db.tables.max_file_bytes:
                continue
            await self.ctx.db.files.put_artifact(self.ctx.claim, name, content, _mime(name))
            saved.append(name)
        return saved

    async def read_file(self, args: ReadArgs, context: ToolContext) -> ToolResult:
        files = await self.ctx.db.files.attachments(self.ctx.job_id, content=True)
        for stored in files:
            if stored.filename == args.filename:
                assert stored.content is not None
                try:
                    return ToolResult(stored.content.decode("utf-8"))
                except UnicodeDecodeError:
                    name = safe_filename(stored.filename) or "upload.bin"
                    await asyncio.to_thread(self._keep_local, name, stored.content)
                    return ToolResult(
                        f"{stored.filename} is a binary file ({stored.mime_type or 'unknown type'}"
                        f", {stored.size_bytes} bytes); run_python can read it as {name!r} "
                        "in its folder."
                    )
        names = ", ".join(f.filename for f in files) or "none"
        return ToolResult(f"No uploaded file {args.filename!r} (available: {names}).", True)

    async def write_file(self, args: WriteArgs, context: ToolContext) -> ToolResult:
        name = safe_filename(args.filename)
        if name is None:
            return ToolResult(f"Not a usable file name: {args.filename!r}", is_error=True)
        content = args.content.encode()
        # Stored with the checkpoint that follows this call (its call, this result and
        # the artifact in one transaction: none without the others), before the model
        # is asked anything more.
        artifact = self.ctx.db.files.new_artifact(name, content, _mime(name))
        await self.ctx.transcript.stage_artifact(artifact)
        self.ctx.transcript.log(f"Artifact written: {name} ({len(content)} bytes)")
        self._unfiled[name] = content
        return ToolResult(f"Wrote {name} ({len(content)} bytes).")

    def _keep_local(self, name: str, content: bytes) -> None:
        """A copy in the job's folder, where run_python can read it."""
        self.ctx.workdir.mkdir(parents=True, exist_ok=True)
        (self.ctx.workdir / name).write_bytes(content)

    async def ask_user(self, args: AskArgs, context: ToolContext) -> ToolResult:
        problem = _plan_problem(args.question)
        if problem is not None:
            return ToolResult(problem, is_error=True)
        return ToolResult(args.question, ends_turn="ask")

    async def discover_tools(self, args: DiscoverArgs, context: ToolContext) -> ToolResult:
        await self._log(f"Tool call: discover_tools({args.query[:100]!r})")
        matches = await self.ctx.db.registry.search(args.query, limit=DISCOVER_LIMIT)
        if not matches:
            return ToolResult(
                f"No MCP server matches {args.query!r}. Use the built-in tools "
                "(fetch_url, run_python, read_file, write_file)."
            )
        offered = {match.server.id: self._offer(match.server) for match in matches}
        packages = [match.server.package_name for match in matches]
        await self.ctx.db.jobs.record_discovered(self.ctx.claim, packages)
        await self._log(f"Discovered MCP servers: {', '.join(packages)}")
        return ToolResult(
            "\n\n".join(_describe(match, offered[match.server.id]) for match in matches)
        )

    async def offer_discovered(self, packages: list[str]) -> None:
        """A resumed job gets back the tools it had found (of servers still verified)."""
        for package in packages:
            server = await self.ctx.db.registry.by_package(package)
            if server is not None and server.verified:
                self._offer(server)

    def _offer(self, server: RegisteredServer) -> list[ToolDefinition[Any]]:
        """Add the server's tools to the job's (once); their definitions."""
        names = self._servers.get(server.id)
        if names is None:
            before = set(self.offered.names())
            for definition in self.ctx.mcp.tools_of(server, set(before)):
                self.offered.register(definition)
            names = self._servers[server.id] = [
                name for name in self.offered.names() if name not in before
            ]
        return [tool for name in names if (tool := self.offered.get(name)) is not None]

    async def final_answer(self, args: AnswerArgs, context: ToolContext) -> ToolResult:
        return ToolResult(args.answer, ends_turn="finish")


def _describe(match: Match, tools: list[ToolDefinition[Any]]) -> str:
    server = match.server
    lines = [
        f"{server.name} ({round(match.similarity * 100)}% match): {server.description}",
        f"Package: {server.package_name}",
    ]
    if tools:
        lines.append("Tools you can call now:")
        lines.extend(f"- {tool.name}: {tool.description}" for tool in tools)
    else:
        lines.append("It lists no tools.")
    return "\n".join(lines)


def _plan_problem(question: str) -> str | None:
    """Why a question that is a plan does not have the plan's shape, or None."""
    try:
        value = json.loads(question)
    except ValueError:
        return None  # plain text
    if not isinstance(value, dict) or value.get("type") != "plan":
        return None
    if not isinstance(value.get("plan"), str) or not isinstance(value.get("question"), str):
        return (
            'A plan is a JSON string {"type": "plan", "plan": "<markdown>", '
            '"question": "<what to ask>"} with both plan and question as strings.'
        )
    return None


def _mime(name: str) -> str | None:
    return mimetypes.guess_type(name)[0]


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of each file a script may leave (not the script, not the packages)."""
    found: dict[str, tuple[int, int]] = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != PACKAGES and not d.startswith(".")]
        for name in files:
            path = Path(root) / name
            relative = str(path.relative_to(folder))
            if relative == SCRIPT or path.is_symlink():
                continue
            info = path.stat()
            found[relative] = (info.st_size, info.st_mtime_ns)
    return found

"""Pure mapping between MCP tools and ClayBot tools: names, arguments and results."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import mcp_types
from pydantic import RootModel

from claybot.plugin import ToolResult

TOOL_NAME_MAX = 64
MAX_DESCRIPTION_CHARS = 2000
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class McpArguments(RootModel[dict[str, Any]]):
    """Whatever object the model sends; the MCP server validates it against its own schema."""


def tool_name(server: str, tool: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """``mcp__<server>__<tool>`` in [A-Za-z0-9_-], at most 64 characters, not in ``taken``.

    A name that had to be shortened, or that collides after sanitising, ends
    with a hash of the original tool name so that it stays distinct and stable.
    """
    name = f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"
    if len(name) > TOOL_NAME_MAX or name in taken:
        digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
        name = f"{name[: TOOL_NAME_MAX - len(digest) - 1]}_{digest}"
    return name


def tool_description(server: str, tool: mcp_types.Tool) -> str:
    text = tool.description or tool.title or tool.name
    return f"[MCP server {server}] {text}"[:MAX_DESCRIPTION_CHARS]


def tool_schema(tool: mcp_types.Tool) -> dict[str, Any]:
    schema = dict(tool.input_schema)
    schema.setdefault("type", "object")
    if schema["type"] == "object":
        schema.setdefault("properties", {})
    return schema


def _block_text(block: mcp_types.ContentBlock) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent):
        return f"[image, {block.mime_type}, not shown]"
    if isinstance(block, mcp_types.AudioContent):
        return f"[audio, {block.mime_type}, not shown]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource link: {block.uri}]"
    resource = block.resource
    if isinstance(resource, mcp_types.TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}"
    return f"[binary resource {resource.uri}, not shown]"


def result_of(result: mcp_types.CallToolResult) -> ToolResult:
    """The text an agent reads for a tool call's result; an MCP error stays an error."""
    parts = [_block_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts) if parts else "(the tool returned no content)"
    return ToolResult(text, is_error=result.is_error)

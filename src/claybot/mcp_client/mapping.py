"""Pure mapping between MCP tools and ClayBot tools: names, arguments and results."""

from __future__ import annotations

import json
from typing import Any

import mcp_types
from pydantic import RootModel

from claybot.mcp_client.names import tool_name
from claybot.tools.base import ToolResult

__all__ = ["McpArguments", "result_of", "tool_description", "tool_name", "tool_schema"]

MAX_DESCRIPTION_CHARS = 2000


class McpArguments(RootModel[dict[str, Any]]):
    """Whatever object the model sends; the MCP server validates it against its own schema."""


def tool_description(server: str, tool: mcp_types.Tool) -> str:
    text = tool.description or tool.title or tool.name
    return f"[MCP server {server}] {text}"[:MAX_DESCRIPTION_CHARS]


def tool_schema(tool: mcp_types.Tool) -> dict[str, Any]:
    """The tool's input schema as an object schema the model can be given. A dict: a
    JSON Schema document is arbitrary JSON, the MCP server's own."""
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

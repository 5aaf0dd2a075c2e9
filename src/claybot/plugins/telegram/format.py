"""Markdown to the HTML subset Telegram accepts (pure).

Telegram's HTML mode knows b, i, u, s, code, pre, a and blockquote; anything
else must be escaped text. The model writes CommonMark-ish markdown, parsed here
with markdown-it-py and rendered tag by tag: headings become bold lines, list
items get a bullet or their number, raw HTML is shown as text. If Telegram still
rejects a message, the connector resends it as plain text.
"""

from __future__ import annotations

from html import escape
from urllib.parse import urlparse

from markdown_it import MarkdownIt
from markdown_it.token import Token

_PARSER = MarkdownIt("commonmark", {"html": False}).enable("strikethrough")
_INLINE_TAGS = {
    "strong_open": "<b>",
    "strong_close": "</b>",
    "em_open": "<i>",
    "em_close": "</i>",
    "s_open": "<s>",
    "s_close": "</s>",
}
SAFE_LINK_SCHEMES = frozenset({"http", "https", "mailto", "tg"})


def _attribute(value: str) -> str:
    return escape(value, quote=True)


def _inline(tokens: list[Token]) -> str:
    out: list[str] = []
    links: list[bool] = []  # per open link: whether its <a> was written
    for token in tokens:
        kind = token.type
        if kind in _INLINE_TAGS:
            out.append(_INLINE_TAGS[kind])
        elif kind == "text":
            out.append(escape(token.content, quote=False))
        elif kind == "code_inline":
            out.append(f"<code>{escape(token.content, quote=False)}</code>")
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "link_open":
            href = str(token.attrGet("href") or "")
            safe = urlparse(href).scheme in SAFE_LINK_SCHEMES
            links.append(safe)
            if safe:  # otherwise only the link's text is shown
                out.append(f'<a href="{_attribute(href)}">')
        elif kind == "link_close":
            if links.pop():
                out.append("</a>")
        elif kind == "image":
            out.append(escape(token.content or str(token.attrGet("src") or ""), quote=False))
        else:  # html_inline and anything unknown: shown, not interpreted
            out.append(escape(token.content, quote=False))
    return "".join(out)


def markdown_to_html(text: str) -> str:
    """Telegram HTML for ``text``; blocks are separated by blank lines."""
    tokens = _PARSER.parse(text)
    blocks: list[str] = []
    line: list[str] = []
    lists: list[list[int]] = []  # per open list: [next number] or [] for bullets
    quote_depth = 0

    def flush() -> None:
        if line:
            rendered = "".join(line)
            if quote_depth:
                rendered = f"<blockquote>{rendered}</blockquote>"
            blocks.append(rendered)
            line.clear()

    for token in tokens:
        kind = token.type
        if kind == "heading_open":
            line.append("<b>")
        elif kind == "heading_close":
            line.append("</b>")
            flush()
        elif kind == "paragraph_close":
            if not lists:
                flush()
            else:
                line.append("\n")
        elif kind == "inline":
            line.append(_inline(token.children or []))
        elif kind in ("bullet_list_open", "ordered_list_open"):
            flush()
            start = int(token.attrGet("start") or 1) if kind == "ordered_list_open" else None
            lists.append([start] if start is not None else [])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
            if not lists:
                text_block = "".join(line).rstrip("\n")
                line.clear()
                line.append(text_block)
                flush()
        elif kind == "list_item_open":
            current = lists[-1]
            indent = "  " * (len(lists) - 1)
            if current:
                line.append(f"{indent}{current[0]}. ")
                current[0] += 1
            else:
                line.append(f"{indent}• ")
        elif kind in ("fence", "code_block"):
            flush()
            language = token.info.strip().split(" ")[0] if token.info else ""
            code = escape(token.content.rstrip("\n"), quote=False)
            if language:
                blocks.append(
                    f'<pre><code class="language-{_attribute(language)}">{code}</code></pre>'
                )
            else:
                blocks.append(f"<pre>{code}</pre>")
        elif kind == "blockquote_open":
            flush()
            quote_depth += 1
        elif kind == "blockquote_close":
            flush()
            quote_depth -= 1
        elif kind == "hr":
            flush()
            blocks.append("———")
        elif kind == "html_block":
            flush()
            blocks.append(escape(token.content.rstrip("\n"), quote=False))
    flush()
    return "\n\n".join(block for block in blocks if block.strip())

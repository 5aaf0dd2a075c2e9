"""Cut a long markdown reply into messages Telegram accepts (pure).

A Telegram message holds at most 4096 characters (UTF-16 code units) after
entity parsing; the rendered HTML, which is never shorter, is held to that.
Cuts fall between paragraphs, else between lines, else between words, never
inside an HTML tag (the markdown source is cut, then each piece is rendered on
its own).
A fenced code block that must be cut is closed and reopened, so every piece
renders the code as code.
"""

from __future__ import annotations

import re
from collections.abc import Callable

TELEGRAM_LIMIT = 4096
FENCE = re.compile(r"^(```|~~~)(.*)$")


def _blocks(text: str) -> list[str]:
    """Paragraphs and whole fenced code blocks, in order."""
    blocks: list[str] = []
    current: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        match = FENCE.match(line.strip())
        if fence is None and match:
            if current:
                blocks.append("\n".join(current))
                current = []
            fence = match.group(1)
            current.append(line)
        elif fence is not None:
            current.append(line)
            if line.strip() == fence:
                blocks.append("\n".join(current))
                current, fence = [], None
        elif not line.strip():
            if current:
                blocks.append("\n".join(current))
                current = []
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def _cut_words(text: str, budget: int) -> list[str]:
    pieces: list[str] = []
    current = ""
    for word in re.split(r"(?<=\s)", text):
        while len(word) > budget:  # one huge "word": a hard cut is all that is left
            if current:
                pieces.append(current)
                current = ""
            pieces.append(word[:budget])
            word = word[budget:]
        if len(current) + len(word) > budget:
            pieces.append(current)
            current = ""
        current += word
    if current:
        pieces.append(current)
    return [piece.strip() for piece in pieces if piece.strip()]


def _cut_block(block: str, budget: int) -> list[str]:
    if len(block) <= budget:
        return [block]
    lines = block.split("\n")
    match = FENCE.match(lines[0].strip())
    if match and len(lines) > 1:
        opening, closing = lines[0], match.group(1)
        body = lines[1:-1] if lines[-1].strip() == closing else lines[1:]
        room = max(1, budget - len(opening) - len(closing) - 2)
        groups = _group(body, room, "\n")
        return [f"{opening}\n{group}\n{closing}" for group in groups]
    return _group(lines, budget, "\n")


def _group(parts: list[str], budget: int, joiner: str) -> list[str]:
    """Join parts into groups of at most ``budget`` characters, cutting oversized parts."""
    groups: list[str] = []
    current: list[str] = []
    size = 0
    for part in parts:
        pieces = [part] if len(part) <= budget else _cut_words(part, budget)
        for piece in pieces:
            extra = len(piece) + (len(joiner) if current else 0)
            if current and size + extra > budget:
                groups.append(joiner.join(current))
                current, size = [], 0
                extra = len(piece)
            current.append(piece)
            size += extra
    if current:
        groups.append(joiner.join(current))
    return groups


def telegram_length(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units (an emoji is often two)."""
    return len(text.encode("utf-16-le")) // 2


def split_markdown(
    text: str, render: Callable[[str], str], limit: int = TELEGRAM_LIMIT
) -> list[str]:
    """Markdown pieces in order, each rendering to at most ``limit`` characters."""
    budget = limit
    while True:
        blocks = [piece for block in _blocks(text) for piece in _cut_block(block, budget)]
        chunks = _group(blocks, budget, "\n\n")
        fits = all(
            telegram_length(render(chunk)) <= limit and telegram_length(chunk) <= limit
            for chunk in chunks
        )
        if fits or budget <= 64:
            return [chunk for chunk in chunks if chunk.strip()]
        budget = budget * 3 // 4  # markup grew past the limit: cut smaller

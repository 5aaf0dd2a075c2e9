"""Markdown a model wrote (a job's plan), as HTML that is safe to put in a page.

CommonMark through markdown-it-py with raw HTML turned off, so a ``<script>`` or an
``<img onerror>`` in the text shows as text; its link check refuses ``javascript:``,
``vbscript:``, ``file:`` and most ``data:`` targets, which then stay plain text too.
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markupsafe import Markup

_renderer = MarkdownIt("commonmark", {"html": False})


def render_markdown(text: str) -> Markup:
    # Raw HTML is off, so markdown-it escapes every tag the text holds.
    return Markup(_renderer.render(text))

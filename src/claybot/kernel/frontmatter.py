"""Markdown files with a YAML front matter block (cron TASK.md, heartbeat tasks). Pure."""

from __future__ import annotations

import re
from typing import Any

import yaml

# libyaml's loader when the wheel has it: ten thousand task files load ~10x faster.
SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)(.*)\Z", re.DOTALL)


class FrontMatterError(ValueError):
    pass


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(the front matter mapping, the body with surrounding blank lines removed).

    The mapping is a dict because it is YAML as written, not yet validated: each kind
    of task file validates it into its own model (``CronTaskSpec``, ``HeartbeatFront``)."""
    match = FRONT_MATTER.match(text.replace("\r\n", "\n"))
    if match is None:
        raise FrontMatterError("no front matter: the file must start with a '---' block")
    try:
        raw = yaml.load(match.group(1), Loader=SafeLoader)  # a safe loader, C or Python
    except yaml.YAMLError as exc:
        raise FrontMatterError(f"the front matter is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise FrontMatterError("the front matter must be a mapping of fields")
    return raw, match.group(2).strip()


def join_front_matter(fields: dict[str, Any], body: str) -> str:
    front = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True).strip()
    return f"---\n{front}\n---\n\n{body.strip()}\n"

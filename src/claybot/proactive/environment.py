"""The environment a run sees: an allowlist, never the engine's whole environment.

A blocklist (the original's) leaks every secret nobody thought to list. Only
names the CLI needs to find its files, its locale and the network are passed;
credentials for the Claude CLI come from auth.json's ``claude`` entry, on
purpose, and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SAFE_NAMES = frozenset(
    {
        "HOME", "PATH", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR",
        "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR", "CLAUDE_CONFIG_DIR", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE",
        "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
        "http_proxy", "https_proxy", "no_proxy",
    }
)  # fmt: skip
SAFE_PREFIXES = ("LC_",)
MAX_VALUE_CHARS = 10_000
# auth.json's "claude" entry: field name → the variable the Claude CLI reads.
CLAUDE_AUTH_FIELDS = {"oauthToken": "CLAUDE_CODE_OAUTH_TOKEN", "apiKey": "ANTHROPIC_API_KEY"}
_SECRET_NAME = re.compile(r"(?i)(key|token|secret|passw|credential|auth|private|session|cookie)")


def is_safe(name: str) -> bool:
    return name in SAFE_NAMES or name.startswith(SAFE_PREFIXES)


def run_environment(
    source: Mapping[str, str], credentials: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The allowed variables of ``source``, ``TERM=dumb``, and the explicit credentials."""
    env = {
        name: value
        for name, value in source.items()
        if is_safe(name) and len(value) <= MAX_VALUE_CHARS and "\x00" not in value
    }
    env["TERM"] = "dumb"
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(credentials or {})
    return env


def withheld_secrets(source: Mapping[str, str]) -> list[str]:
    """Values of withheld variables whose names look secret: masked if a run prints them."""
    return [
        value
        for name, value in source.items()
        if not is_safe(name) and _SECRET_NAME.search(name) and value
    ]

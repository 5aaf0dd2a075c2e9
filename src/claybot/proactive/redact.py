"""Secrets out of run output: known secret values, then common token shapes (pure).

The runner's environment is already scrubbed, but a run can still print a key it
read from a file; DESIGN §2.5 says secrets never reach logs or events.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "[REDACTED]"
MIN_SECRET_CHARS = 8  # shorter values would mask ordinary words

_PATTERNS = [
    re.compile(p)
    for p in (
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        r"\bsk-ant-[A-Za-z0-9_-]{10,}",
        r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{20,}",
        r"\bcb_[A-Za-z0-9_-]{16,}",
        r"\bgh[pousr]_[A-Za-z0-9]{20,}",
        r"\bgithub_pat_[A-Za-z0-9_]{20,}",
        r"\bglpat-[A-Za-z0-9_-]{20,}",
        r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
        r"\bAKIA[0-9A-Z]{16}\b",
        r"\bhf_[A-Za-z0-9]{20,}",
        r"\bnpm_[A-Za-z0-9]{20,}",
        r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*",
    )
]
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@")


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is masked whole.
        values = {value for value in secrets if len(value) >= MIN_SECRET_CHARS}
        self._secrets = sorted(values, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._secrets:
            if value in text:
                text = text.replace(value, MASK)
        for pattern in _PATTERNS:
            text = pattern.sub(MASK, text)
        return _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)

"""Signed links to a job's artifacts: a browser opens a link with no header of its own.

Seed 002's dashboard shows a job's artifacts as plain links (``<a href={artifact.url}>``)
and Angine's pointed them at a public storage bucket, where anyone with a link read the
file for ever. ClayBot's downloads need a key, which such a link cannot carry; so each
artifact's ``url`` is signed instead: it opens that one file, with no key, for
``LINK_TTL_S`` at most, and only on the engine that made it (the secret lives in its
memory, so a restart voids every link). A key still opens the same URL as before. The
TCP listener asks here before it asks for a key (``tcp_auth``); the engine writes no
access log, so the signature is not kept on disk.

The expiry is rounded up to ``LINK_STEP_S``, so a page that polls the job gets the same
URL for minutes rather than a new one every time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable
from urllib.parse import parse_qs

LINK_TTL_S = 15 * 60  # the longest a link opens its file
LINK_STEP_S = 5 * 60  # expiries fall on these steps: a link is good for 10 to 15 minutes
ARTIFACT_PATH = re.compile(r"^/api/v1/jobs/[0-9a-f-]{36}/artifacts/[0-9a-f-]{36}$")


class ArtifactLinks:
    """Signs artifact URLs and checks them; ``clock``: unix seconds (tests move it)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._secret = secrets.token_bytes(32)
        self._clock = clock

    def url(self, job_id: str, artifact_id: str) -> str:
        path = f"/api/v1/jobs/{job_id}/artifacts/{artifact_id}"
        steps = -(-(int(self._clock()) + LINK_TTL_S - LINK_STEP_S) // LINK_STEP_S)
        expires = steps * LINK_STEP_S
        return f"{path}?expires={expires}&signature={self._sign(path, expires)}"

    def opens(self, path: str, query_string: bytes) -> bool:
        """Whether a request for ``path`` with ``query_string`` brings a live signature."""
        if not ARTIFACT_PATH.match(path):
            return False
        query = parse_qs(query_string.decode("latin-1"))
        expires_values, signatures = query.get("expires", []), query.get("signature", [])
        if len(expires_values) != 1 or len(signatures) != 1 or not expires_values[0].isdigit():
            return False
        expires = int(expires_values[0])
        if not 0 <= expires - self._clock() <= LINK_TTL_S:
            return False
        return hmac.compare_digest(signatures[0], self._sign(path, expires))

    def _sign(self, path: str, expires: int) -> str:
        message = f"{path}\n{expires}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

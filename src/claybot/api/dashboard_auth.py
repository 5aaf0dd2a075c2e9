"""Who may use the dashboard: one-time login links, sessions and their CSRF tokens.

``claybot dashboard`` asks the engine (over its socket, which is its owner's) for a
login link: a random token, good once, for five minutes. Opening it starts a
session: a second random token, sent back only as an HttpOnly, SameSite=Strict
cookie, so no script of a page (and no other site) can read or send it. Every form
of a session carries that session's CSRF token, checked on every POST.

A person may also log in with an API key: the session then has the key's scopes
(a link's has every one) and ends when the key is revoked.

Tokens are kept as their SHA-256 digests: a token is 256 random bits, so the digest
is as good as the token for a lookup and a memory dump gives none of them away.
Sessions live in the engine's memory: they are listed and revocable, expire after
``SESSION_TTL_S`` (and after ``IDLE_TTL_S`` unused), and a restart of the engine
ends them all, which asks for a new link rather than leaving a stolen cookie valid.

Each principal has its own room, so nobody's logins can push another's session out:
the owner's link sessions (only the owner can make links) and each key's sessions are
capped apart, and a principal at its cap loses its own least recently used session.
All keys' sessions together are capped too, and a key login past that cap is refused
rather than ending anyone's session: memory stays bounded (a session is well under a
kilobyte) and a key holder gets at most ``MAX_SESSIONS_PER_KEY`` of it. Wrong keys on
the login form are limited per client address as on the API (``login_failures``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from typing_extensions import TypedDict

from claybot.api.ratelimit import FailureLimiter

LINK_TTL_S = 5 * 60
SESSION_TTL_S = 12 * 3600
IDLE_TTL_S = 2 * 3600
MAX_LINKS = 100  # unused links kept at most: asking for more drops the oldest
MAX_LINK_SESSIONS = 20  # the owner's, begun with links
MAX_SESSIONS_PER_KEY = 10  # one person's browsers and devices, with room to spare
MAX_KEY_SESSIONS = 1_000  # every key's together


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class SessionJson(TypedDict):
    """A dashboard session as its owner sees it listed (no token, no CSRF secret)."""

    id: str
    createdAt: str  # ISO 8601, UTC, whole seconds, with a ``Z``
    expiresAt: str
    lastSeenAt: str
    via: str
    scopes: list[str]


@dataclass
class Session:
    id: str  # a public name for it (listing, revoking); not the cookie's token
    created_at: float
    expires_at: float
    last_seen: float
    csrf: str
    via: str  # how it began: "login link", or "API key <prefix>"
    scopes: tuple[str, ...] = ("admin",)  # a link's session may do anything
    key_id: str | None = None  # a key's session lasts only while the key does

    def allows(self, scope: str) -> bool:
        return "admin" in self.scopes or scope in self.scopes

    def to_dict(self, wall: Callable[[float], float]) -> SessionJson:
        return {
            "id": self.id,
            "createdAt": _iso(wall(self.created_at)),
            "expiresAt": _iso(wall(self.expires_at)),
            "lastSeenAt": _iso(wall(self.last_seen)),
            "via": self.via,
            "scopes": list(self.scopes),
        }


def _iso(unix_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix_s))


@dataclass
class DashboardAuth:
    """Login links and sessions. ``clock`` is monotonic seconds (tests move it);
    ``wall`` turns a reading of it into unix seconds for display."""

    clock: Callable[[], float] = time.monotonic
    max_link_sessions: int = MAX_LINK_SESSIONS
    max_sessions_per_key: int = MAX_SESSIONS_PER_KEY
    max_key_sessions: int = MAX_KEY_SESSIONS
    login_failures: FailureLimiter = field(init=False)  # wrong keys on the login form
    _links: dict[bytes, float] = field(default_factory=dict)  # digest -> expiry
    _sessions: dict[bytes, Session] = field(default_factory=dict)  # digest -> session

    def __post_init__(self) -> None:
        self.login_failures = FailureLimiter(clock=self.clock)

    def wall(self, reading: float) -> float:
        return time.time() - (self.clock() - reading)

    # -- links ---------------------------------------------------------------------------

    def new_link_token(self) -> tuple[str, float]:
        """A fresh login token and how many seconds it is good for."""
        self._forget_expired()
        while len(self._links) >= MAX_LINKS:
            del self._links[next(iter(self._links))]
        token = secrets.token_urlsafe(32)
        self._links[_digest(token)] = self.clock() + LINK_TTL_S
        return token, LINK_TTL_S

    def redeem(self, token: str) -> tuple[str, Session] | None:
        """A new session for a link's token (the link is then spent), or None for a
        token that is unknown, spent or expired: the answer does not say which."""
        expiry = self._links.pop(_digest(token), None)
        if expiry is None or expiry < self.clock():
            return None
        self._forget_expired()
        self._make_room(None, self.max_link_sessions)
        return self._start("login link")

    def start_with_key(
        self, prefix: str, scopes: tuple[str, ...], key_id: str
    ) -> tuple[str, Session] | None:
        """A new session with a key's scopes, or None when every key session the engine
        keeps is taken (no other principal's session is ended to make room)."""
        self._forget_expired()
        self._make_room(key_id, self.max_sessions_per_key)
        key_sessions = sum(1 for s in self._sessions.values() if s.key_id is not None)
        if key_sessions >= self.max_key_sessions:
            return None
        return self._start(f"API key {prefix}", scopes, key_id)

    def _make_room(self, key_id: str | None, cap: int) -> None:
        """Below ``cap`` sessions for the principal (a key, or the owner's links for
        None), by ending its own least recently used ones."""
        own = [(digest, s) for digest, s in self._sessions.items() if s.key_id == key_id]
        own.sort(key=lambda item: item[1].last_seen)
        for digest, _ in own[: max(0, len(own) - cap + 1)]:
            del self._sessions[digest]

    def _start(
        self, via: str, scopes: tuple[str, ...] = ("admin",), key_id: str | None = None
    ) -> tuple[str, Session]:
        """A new session: its cookie's token (given out once) and the session."""
        now = self.clock()
        cookie = secrets.token_urlsafe(32)
        session = Session(
            id=secrets.token_hex(6),
            created_at=now,
            expires_at=now + SESSION_TTL_S,
            last_seen=now,
            csrf=secrets.token_urlsafe(32),
            via=via,
            scopes=scopes,
            key_id=key_id,
        )
        self._sessions[_digest(cookie)] = session
        return cookie, session

    # -- sessions ------------------------------------------------------------------------

    def session(self, cookie: str | None) -> Session | None:
        """The live session a cookie names (its use noted), or None."""
        if not cookie:
            return None
        key = _digest(cookie)
        session = self._sessions.get(key)
        now = self.clock()
        if session is None:
            return None
        if session.expires_at < now or session.last_seen + IDLE_TTL_S < now:
            del self._sessions[key]
            return None
        session.last_seen = now
        return session

    def sessions(self) -> list[Session]:
        self._forget_expired()
        return sorted(self._sessions.values(), key=lambda s: s.created_at)

    def revoke(self, session_id: str) -> bool:
        for key, session in list(self._sessions.items()):
            if session.id == session_id:
                del self._sessions[key]
                return True
        return False

    @staticmethod
    def csrf_ok(session: Session, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(session.csrf, presented)

    def _forget_expired(self) -> None:
        now = self.clock()
        for key, expiry in list(self._links.items()):
            if expiry < now:
                del self._links[key]
        for key, session in list(self._sessions.items()):
            if session.expires_at < now or session.last_seen + IDLE_TTL_S < now:
                del self._sessions[key]

"""Signed artifact links: one file, for 10 to 15 minutes, on the engine that signed it."""

from __future__ import annotations

from claybot.jobs.artifact_links import LINK_STEP_S, LINK_TTL_S, ArtifactLinks

JOB = "6f1c3a52-8d0e-4d7a-9b0b-2f1e5c3d4a10"
FILE = "0b9e2a41-7c3d-4e5f-8a6b-1c2d3e4f5a60"
OTHER = "a7e0c9d8-1b2a-4c3d-9e8f-7a6b5c4d3e20"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def split(url: str) -> tuple[str, bytes]:
    path, _, query = url.partition("?")
    return path, query.encode()


def test_a_link_opens_its_file_until_it_expires() -> None:
    clock = Clock()
    links = ArtifactLinks(clock)
    path, query = split(links.url(JOB, FILE))
    assert path == f"/api/v1/jobs/{JOB}/artifacts/{FILE}"
    assert links.opens(path, query)
    expires = int(query.decode().split("expires=")[1].split("&")[0])
    assert LINK_TTL_S - LINK_STEP_S <= expires - clock.now <= LINK_TTL_S
    clock.now = expires
    assert links.opens(path, query)
    clock.now = expires + 1
    assert not links.opens(path, query)


def test_a_page_that_polls_gets_the_same_link_for_minutes() -> None:
    clock = Clock()
    clock.now = (clock.now // LINK_STEP_S) * LINK_STEP_S + 1
    links = ArtifactLinks(clock)
    first = links.url(JOB, FILE)
    clock.now += LINK_STEP_S - 2
    assert links.url(JOB, FILE) == first
    clock.now += 2
    assert links.url(JOB, FILE) != first


def test_a_link_opens_nothing_else() -> None:
    clock = Clock()
    links = ArtifactLinks(clock)
    path, query = split(links.url(JOB, FILE))
    expires, signature = query.decode().split("&")
    assert not links.opens(f"/api/v1/jobs/{JOB}/artifacts/{OTHER}", query)
    assert not links.opens(path, b"")
    assert not links.opens(path, expires.encode())
    flipped = signature[:-1] + ("1" if signature[-1] == "0" else "0")
    assert not links.opens(path, f"{expires}&{flipped}".encode())
    later = f"expires={int(expires.split('=')[1]) + LINK_STEP_S}&{signature}".encode()
    assert not links.opens(path, later)  # the expiry is signed too
    twice = query + b"&" + signature.encode()
    assert not links.opens(path, twice)
    assert not ArtifactLinks(clock).opens(path, query)  # another engine's secret
    assert not links.opens(f"/api/v1/jobs/{JOB}/artifacts/{FILE}/x", query)

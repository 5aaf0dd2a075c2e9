"""SSE readers for bench/agents.py: many streams of GET /v1/engine/events read in one
process of their own, as dashboards on other machines would read them.

    python bench/sse_readers.py <engine socket> <readers>

Prints ``ready`` once every reader has its init frame; then, on each line read from
stdin, one JSON line: the event frames each reader has read so far (``frames``) and
how many arrived out of order (``disordered``: an id that is not the one after the
last), and the CPU time the process has taken (``cpu_s``). Ends at the end of stdin.

Each reader reads its whole stream and parses every frame: the chunked body is
decoded, each frame is matched as an event (its id, ``event: message``, one data
line), the init frame or a ping, and the ids are checked to follow one another; the
data lines are not decoded as JSON (the follower of the load does that for the
replies it times). The frames of a read are checked together, in C where it can be
done (a regular expression for the ids, counts, a list compared with a range): 200
readers of 10,000 events are two million frames.

The readers are plain non-blocking sockets under one epoll, each read at most 64 KB
(a larger ``recv`` allocates, and gives back, a buffer above malloc's mmap threshold
on each call: that cost 50 us a read). In the load generator's own event loop, 200
readers of every event had taken the core its follower needs to see a reply, and the
latency measured that.
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import sys
import time

# The head of an event frame, its id captured (the init frame has none; JSON escapes
# line breaks, so no data line holds one).
EVENT_ID = re.compile(rb"id: (\d+)\r\nevent: message\r\ndata: ")
REQUEST = b"GET /v1/engine/events HTTP/1.1\r\nHost: claybot\r\n\r\n"
READ_BYTES = 64 * 1024
STDIN = 0


class Reader:
    """One SSE stream: what it has read, decoded as far as it goes."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.sendall(REQUEST)
        self.sock.setblocking(False)
        self.raw = b""  # the response not yet decoded: headers, or a chunk not whole yet
        self.text = b""  # the decoded body after the last whole frame
        self.in_body = False
        self.initialised = False
        self.frames = 0
        self.last_id: int | None = None
        self.disordered = 0

    def read(self) -> bool:
        """Read what is there; False once the engine has closed the stream."""
        data = self.sock.recv(READ_BYTES)
        if not data:
            return False
        raw = self.raw + data
        if not self.in_body:
            end = raw.find(b"\r\n\r\n")
            if end < 0:
                self.raw = raw
                return True
            raw, self.in_body = raw[end + 4 :], True
        text, position = self.text, 0
        while (size_end := raw.find(b"\r\n", position)) >= 0:  # chunked transfer encoding
            start = size_end + 2
            end = start + int(raw[position:size_end], 16)
            if len(raw) < end + 2:
                break
            text += raw[start:end]
            position = end + 2
        self.raw = raw[position:]
        whole, end, self.text = text.rpartition(b"\r\n\r\n")
        if end:
            self.parse(whole)
        return True

    def parse(self, whole: bytes) -> None:
        """Whole frames (the blank line after the last one cut off): each event frame's
        id, checked against the one before."""
        init = not self.initialised and whole.startswith(b"event: message\r\ndata: {")
        self.initialised = self.initialised or init
        ids = list(map(int, EVENT_ID.findall(whole)))
        others = whole.count(b"\r\n\r\n") + 1 - len(ids) - init
        # Pings are rare: counted only when some frame is not an event.
        if others and others != (b"\r\n" + whole + b"\r\n").count(b"\r\n: ping\r\n"):
            raise ValueError(f"a frame is neither an event, the init frame nor a ping: {whole!r}")
        if not ids:
            return
        first = ids[0] if self.last_id is None else self.last_id + 1
        if ids != list(range(first, first + len(ids))):
            self.disordered += 1
        self.last_id = ids[-1]
        self.frames += len(ids)


def main() -> None:
    path, count = sys.argv[1], int(sys.argv[2])
    readers = [Reader(path) for _ in range(count)]
    by_fd = {reader.sock.fileno(): reader for reader in readers}
    poll = select.epoll()
    for fd in by_fd:
        poll.register(fd, select.EPOLLIN)
    poll.register(STDIN, select.EPOLLIN)
    said_ready = False
    while True:
        for fd, _ in poll.poll():
            if fd == STDIN:
                if not os.read(STDIN, 4096):
                    return
                report = {
                    "frames": [reader.frames for reader in readers],
                    "disordered": sum(reader.disordered for reader in readers),
                    "cpu_s": time.process_time(),
                }
                print(json.dumps(report), flush=True)
                continue
            if not by_fd[fd].read():
                poll.unregister(fd)
        if not said_ready and all(reader.initialised for reader in readers):
            print("ready", flush=True)
            said_ready = True


if __name__ == "__main__":
    main()

"""One engine per home: an exclusive lock, a pid file, and a socket probe.

The lock (flock on ``<home>/claybot.lock``) is the truth: the kernel releases it
when the process dies, even by SIGKILL, so a stale pid file or socket never
blocks a restart.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from claybot.config.home import HomePaths


class AlreadyRunning(RuntimeError):
    def __init__(self, home: Path, pid: int | None) -> None:
        where = f" (pid {pid})" if pid else ""
        super().__init__(f"an engine is already running for {home}{where}")
        self.pid = pid


def read_pid(paths: HomePaths) -> int | None:
    try:
        return int(paths.pid.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


class InstanceLock:
    def __init__(self, paths: HomePaths) -> None:
        self.paths = paths
        self._fd: int | None = None

    @property
    def lock_path(self) -> Path:
        return self.paths.home / "claybot.lock"

    def acquire(self) -> None:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AlreadyRunning(self.paths.home, read_pid(self.paths)) from None
        self._fd = fd

    def held_by_someone(self) -> bool:
        """True while another process holds the lock (an engine is running)."""
        try:
            fd = os.open(self.lock_path, os.O_RDWR)
        except FileNotFoundError:
            return False  # no lock file (a home never started, or none at all)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def write_pid(self) -> None:
        self.paths.pid.write_text(f"{os.getpid()}\n")

    def release(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.paths.pid.unlink()
        with contextlib.suppress(FileNotFoundError):
            self.paths.socket.unlink()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

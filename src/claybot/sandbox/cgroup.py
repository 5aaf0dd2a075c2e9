"""One pids cgroup per command, where this process may make them.

``RLIMIT_NPROC`` counts every process of the engine's user and does not bind root
at all (the kernel skips the check for the initial user), so a fork bomb run by an
engine started as root spawned 300 processes under a limit of 64. A cgroup's
``pids.max`` bounds exactly the command and what it starts, whoever runs it, and
the cgroup also finds every one of them at the end (``setsid`` does not leave a
cgroup), so nothing outlives the call.

Both hierarchies are used: cgroup v2 when ``pids`` is enabled for the children of
the engine's own cgroup (a delegated subtree, a container with its own cgroup
namespace), else v1's ``pids`` controller. Each engine keeps its commands under
``claybot-<pid>``; the folders of engines that died are removed at the next probe.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Literal

from claybot.kernel.processes import process_alive

log = logging.getLogger(__name__)

MOUNTINFO = Path("/proc/self/mountinfo")
OWN_CGROUPS = Path("/proc/self/cgroup")
PARENT_PREFIX = "claybot-"
KILL_ROUNDS = 200  # a fork bomb is bounded by pids.max; each round kills what is listed
REMOVE_TRIES = 50
REMOVE_PAUSE_S = 0.01


@dataclass(frozen=True)
class CommandCgroup:
    """The cgroup of one command: attach the child to it, then kill and remove it all."""

    path: Path
    version: Literal[1, 2]

    def attach_current_process(self) -> None:
        """Move the calling process in; runs in the forked child before ``exec``."""
        fd = os.open(self.path / "cgroup.procs", os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    def pids(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except FileNotFoundError:
            return []
        return [int(line) for line in text.split()]

    def kill_all(self) -> None:
        """SIGKILL everything in the cgroup, until it is empty."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.path / "cgroup.kill").write_text("1")
        for _ in range(KILL_ROUNDS):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.001)
        log.error(
            "processes of a command survived being killed",
            extra={"action": "sandbox.cgroup_survivors", "cgroup": str(self.path)},
        )

    def remove(self) -> None:
        """rmdir once the killed processes have left (that takes the kernel a moment)."""
        for _ in range(REMOVE_TRIES):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(REMOVE_PAUSE_S)
        log.warning(
            "could not remove a command's cgroup; it is removed at the next start",
            extra={"action": "sandbox.cgroup_left", "cgroup": str(self.path)},
        )


@dataclass
class PidsCgroups:
    """Where this engine makes its commands' cgroups."""

    parent: Path
    version: Literal[1, 2]

    def create(self, max_pids: int) -> CommandCgroup:
        path = self._new_folder()
        try:
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            path.rmdir()
            raise
        return CommandCgroup(path, self.version)

    def _new_folder(self) -> Path:
        # Numbers are the process's, not this object's: several sandboxes in one process
        # share the parent folder. A folder may still be there all the same (a killed
        # command's, whose rmdir waits for the kernel to let its processes go): skip it.
        while True:
            path = self.parent / f"cmd-{next(_COMMAND_NUMBERS)}"
            try:
                path.mkdir()
            except FileExistsError:
                continue
            return path


# The number of the next command cgroup made in this process.
_COMMAND_NUMBERS = count(1)


def discover_pids_cgroups(pid: int | None = None) -> tuple[PidsCgroups | None, str]:
    """Per-command pids cgroups if this process may make them, else None and why not."""
    pid = os.getpid() if pid is None else pid
    try:
        mounts = MOUNTINFO.read_text()
        own = OWN_CGROUPS.read_text()
    except OSError as exc:
        return None, f"cannot read the cgroup setup: {exc}"
    reasons = []
    for version, base in _candidates(mounts, own):
        try:
            parent = _prepare(base, version, pid)
        except OSError as exc:
            reasons.append(f"cgroup v{version} at {base}: {exc.strerror or exc}")
            continue
        return PidsCgroups(parent, version), ""
    return None, "; ".join(reasons) or "no pids cgroup controller is mounted"


def _candidates(mounts: str, own: str) -> list[tuple[Literal[1, 2], Path]]:
    """The engine's own cgroup folder in v2 (pids enabled below it) and in v1's pids."""
    own_paths: dict[str, str] = {}
    for line in own.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                own_paths[controller] = parts[2]
    found: list[tuple[Literal[1, 2], Path]] = []
    for line in mounts.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount_point, fstype, options = fields[4], tail[0], tail[2].split(",")
        if fstype == "cgroup2" and "" in own_paths:
            folder = Path(mount_point) / own_paths[""].lstrip("/")
            with contextlib.suppress(OSError):
                if "pids" in (folder / "cgroup.subtree_control").read_text().split():
                    found.insert(0, (2, folder))
        elif fstype == "cgroup" and "pids" in options and "pids" in own_paths:
            found.append((1, Path(mount_point) / own_paths["pids"].lstrip("/")))
    return found


def _prepare(base: Path, version: Literal[1, 2], pid: int) -> Path:
    _remove_dead_parents(base)
    parent = base / f"{PARENT_PREFIX}{pid}"
    parent.mkdir(exist_ok=True)
    if version == 2:
        # The parent holds no process, so it may hand pids on to its children.
        (parent / "cgroup.subtree_control").write_text("+pids")
    probe = PidsCgroups(parent, version).create(8)
    probe.remove()
    return parent


def _remove_dead_parents(base: Path) -> None:
    """The folders of engines that are gone (killed before they could clean up)."""
    with contextlib.suppress(OSError), os.scandir(base) as entries:
        for entry in entries:
            if not entry.name.startswith(PARENT_PREFIX) or not entry.is_dir():
                continue
            owner = entry.name.removeprefix(PARENT_PREFIX)
            if not owner.isdigit() or process_alive(int(owner)):
                continue
            folder = Path(entry.path)
            with contextlib.suppress(OSError):
                for child in folder.iterdir():
                    if child.is_dir():
                        CommandCgroup(child, 1).kill_all()
                        child.rmdir()
                folder.rmdir()


def remove_parent(cgroups: PidsCgroups) -> None:
    """At engine stop: the engine's folder (its commands' cgroups are gone by then)."""
    with contextlib.suppress(OSError):
        cgroups.parent.rmdir()

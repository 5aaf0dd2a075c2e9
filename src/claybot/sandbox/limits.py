"""Resource limits for a sandboxed command, set with ``setrlimit`` in the child.

Both backends apply them: under bubblewrap they are inherited through ``bwrap``
by everything the command starts. The number of processes is bounded by the
command's pids cgroup where the engine may make one (see ``cgroup``); only
without one does ``RLIMIT_NPROC`` stand in, which counts every process of the
engine's user and does not bind root.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from dataclasses import dataclass

from claybot.sandbox.cgroup import CommandCgroup

MIB = 1024 * 1024


@dataclass(frozen=True)
class ResourceLimits:
    cpu_s: int  # CPU time; SIGXCPU at the soft limit, SIGKILL one second later
    memory_bytes: int  # address space (RLIMIT_AS): virtual memory, not resident
    file_size_bytes: int  # largest file the command may write (SIGXFSZ past it)
    processes: int  # the command's pids cgroup, else RLIMIT_NPROC (see the module doc)

    def rlimits(self, *, nproc: bool = True) -> list[tuple[int, tuple[int, int]]]:
        """``(resource, (soft, hard))`` pairs, in the order they are applied."""
        pairs = [
            (resource.RLIMIT_CPU, (self.cpu_s, self.cpu_s + 1)),
            (resource.RLIMIT_AS, (self.memory_bytes, self.memory_bytes)),
            (resource.RLIMIT_FSIZE, (self.file_size_bytes, self.file_size_bytes)),
            (resource.RLIMIT_CORE, (0, 0)),  # a crash must not dump the memory to disk
        ]
        if nproc:
            pairs.append((resource.RLIMIT_NPROC, (self.processes, self.processes)))
        return pairs


DEFAULT_LIMITS = ResourceLimits(
    cpu_s=60, memory_bytes=2048 * MIB, file_size_bytes=256 * MIB, processes=512
)


def limits_applier(
    limits: ResourceLimits, cgroup: CommandCgroup | None = None
) -> Callable[[], None]:
    """A ``preexec_fn``: runs in the forked child before ``exec``, so it must stay this small.

    With a ``cgroup`` the child joins it first, so the command and everything it
    starts are counted and found there; ``RLIMIT_NPROC`` is then left alone.
    """
    pairs = limits.rlimits(nproc=cgroup is None)

    def apply() -> None:
        if cgroup is not None:
            cgroup.attach_current_process()
        for which, (soft, hard) in pairs:
            _, current_hard = resource.getrlimit(which)
            if current_hard != resource.RLIM_INFINITY:
                # An unprivileged process may lower a hard limit, never raise it.
                soft, hard = min(soft, current_hard), min(hard, current_hard)
            resource.setrlimit(which, (soft, hard))
        # The engine creates its files 0600 (umask 077); what a command writes in the
        # folders it was granted should look like what the user would have written.
        os.umask(0o022)

    return apply

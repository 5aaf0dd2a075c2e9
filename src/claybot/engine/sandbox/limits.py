"""Resource limits for a sandboxed command, set with ``setrlimit`` in the child.

Both backends apply them: under bubblewrap they are inherited through ``bwrap``
by everything the command starts.
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class ResourceLimits:
    cpu_s: int  # CPU time; SIGXCPU at the soft limit, SIGKILL one second later
    memory_bytes: int  # address space (RLIMIT_AS): virtual memory, not resident
    file_size_bytes: int  # largest file the command may write (SIGXFSZ past it)
    processes: int  # RLIMIT_NPROC: counts every process of the engine's user, not ours only

    def rlimits(self) -> list[tuple[int, tuple[int, int]]]:
        """``(resource, (soft, hard))`` pairs, in the order they are applied."""
        return [
            (resource.RLIMIT_CPU, (self.cpu_s, self.cpu_s + 1)),
            (resource.RLIMIT_AS, (self.memory_bytes, self.memory_bytes)),
            (resource.RLIMIT_FSIZE, (self.file_size_bytes, self.file_size_bytes)),
            (resource.RLIMIT_NPROC, (self.processes, self.processes)),
            (resource.RLIMIT_CORE, (0, 0)),  # a crash must not dump the memory to disk
        ]


def limits_applier(limits: ResourceLimits) -> Callable[[], None]:
    """A ``preexec_fn``: runs in the forked child before ``exec``, so it must stay this small."""
    pairs = limits.rlimits()

    def apply() -> None:
        for which, (soft, hard) in pairs:
            _, current_hard = resource.getrlimit(which)
            if current_hard != resource.RLIM_INFINITY:
                # An unprivileged process may lower a hard limit, never raise it.
                soft, hard = min(soft, current_hard), min(hard, current_hard)
            resource.setrlimit(which, (soft, hard))

    return apply

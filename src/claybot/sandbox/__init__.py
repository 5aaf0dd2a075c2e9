"""The sandbox agents' commands run in: bubblewrap, or nothing runs.

``policy`` builds the argv (pure), ``limits`` holds the resource limits,
``cgroup`` makes one pids cgroup per command, and ``exec`` probes the machine
(``Sandbox``), spawns, caps, times out and kills (``SandboxRunner``).
"""

from claybot.sandbox.exec import (
    CapturedOutput,
    ExecResult,
    Sandbox,
    SandboxConfig,
    SandboxRunner,
    SandboxSupport,
)
from claybot.sandbox.limits import DEFAULT_LIMITS, MIB, ResourceLimits
from claybot.sandbox.policy import (
    SANDBOX_MODES,
    Backend,
    EgressRoute,
    NetworkMode,
    SandboxMode,
    SandboxPolicy,
    SandboxUnavailable,
    bwrap_argv,
    private_paths,
    protected_paths,
    sandbox_environment,
    secret_paths,
    unconfined_argv,
)

__all__ = [
    "DEFAULT_LIMITS",
    "MIB",
    "SANDBOX_MODES",
    "Backend",
    "CapturedOutput",
    "EgressRoute",
    "ExecResult",
    "NetworkMode",
    "ResourceLimits",
    "Sandbox",
    "SandboxConfig",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxRunner",
    "SandboxSupport",
    "SandboxUnavailable",
    "bwrap_argv",
    "private_paths",
    "protected_paths",
    "sandbox_environment",
    "secret_paths",
    "unconfined_argv",
]

"""The sandbox commands run in: bubblewrap when it works here, else resource limits only.

``policy`` builds the argv (pure), ``limits`` holds the resource limits and
``exec`` spawns, caps, times out and kills.
"""

from claybot.engine.sandbox.exec import (
    CapturedOutput,
    ExecResult,
    SandboxConfig,
    SandboxRunner,
)
from claybot.engine.sandbox.limits import MIB, ResourceLimits
from claybot.engine.sandbox.policy import (
    Backend,
    SandboxMode,
    SandboxPolicy,
    SandboxUnavailable,
    bwrap_argv,
    rlimit_argv,
    sandbox_environment,
    secret_paths,
)

__all__ = [
    "MIB",
    "Backend",
    "CapturedOutput",
    "ExecResult",
    "ResourceLimits",
    "SandboxConfig",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxRunner",
    "SandboxUnavailable",
    "bwrap_argv",
    "rlimit_argv",
    "sandbox_environment",
    "secret_paths",
]

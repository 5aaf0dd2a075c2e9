"""What every check reads: the home, the environment, the limits, and the config files
as the engine's own loaders read them (once, however many checks need them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from claybot.config.auth import AuthFile
from claybot.config.home import HomePaths
from claybot.config.settings import Settings
from claybot.config.store import ConfigError, ConfigStore

MIB = 1024 * 1024
DEFAULT_DISK_WARN_MB = 1024
DEFAULT_DISK_FAIL_MB = 100
# Short on purpose: a probe that waits longer than this is as good as unreachable.
DEFAULT_PROBE_TIMEOUT_S = 3.0
# Loading a GGUF with llama.cpp: the 135M model takes about a second.
DEFAULT_MODEL_LOAD_TIMEOUT_S = 60.0
CPUINFO = Path("/proc/cpuinfo")
# Where the CPU flags are read from instead of /proc/cpuinfo (another machine's copy).
CPUINFO_ENV = "CLAYBOT_CPUINFO"


@dataclass(frozen=True)
class Limits:
    disk_warn_bytes: int = DEFAULT_DISK_WARN_MB * MIB
    disk_fail_bytes: int = DEFAULT_DISK_FAIL_MB * MIB
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S
    model_load_timeout_s: float = DEFAULT_MODEL_LOAD_TIMEOUT_S


@dataclass(frozen=True)
class DoctorContext:
    paths: HomePaths
    env: Mapping[str, str]
    limits: Limits
    settings: Settings | None  # None: settings.json does not load (settings_error says why)
    settings_error: str | None
    auth: AuthFile | None
    auth_error: str | None

    @property
    def cpuinfo(self) -> Path:
        return Path(self.env.get(CPUINFO_ENV) or CPUINFO)


def load_context(paths: HomePaths, env: Mapping[str, str], limits: Limits) -> DoctorContext:
    """Read settings.json and auth.json once; a file that does not load is kept as its error."""
    store = ConfigStore(paths)
    settings: Settings | None = None
    auth: AuthFile | None = None
    settings_error = auth_error = None
    try:
        settings = store.read_settings()
    except (ConfigError, OSError) as exc:
        settings_error = str(exc)
    try:
        auth = store.read_auth()
    except (ConfigError, OSError) as exc:
        auth_error = str(exc)
    return DoctorContext(paths, env, limits, settings, settings_error, auth, auth_error)

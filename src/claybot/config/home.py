"""Where an engine keeps its files."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

HOME_ENV = "CLAYBOT_HOME"
DEFAULT_HOME = "~/.claybot"


def resolve_home(cli_home: Path | str | None, env: Mapping[str, str] | None = None) -> Path:
    """``--home`` wins, then ``$CLAYBOT_HOME``, then ``~/.claybot``."""
    environ = os.environ if env is None else env
    chosen = cli_home or environ.get(HOME_ENV) or DEFAULT_HOME
    return Path(chosen).expanduser().resolve()


@dataclass(frozen=True)
class HomePaths:
    home: Path

    @property
    def settings(self) -> Path:
        return self.home / "settings.json"

    @property
    def auth(self) -> Path:
        return self.home / "auth.json"

    @property
    def socket(self) -> Path:
        return self.home / "claybot.sock"

    @property
    def pid(self) -> Path:
        return self.home / "claybot.pid"

    @property
    def agents(self) -> Path:
        return self.home / "agents"

    @property
    def database(self) -> Path:
        return self.home / "claybot.db"

    @property
    def files(self) -> Path:
        return self.home / "files"

    @property
    def workspace(self) -> Path:
        return self.home / "workspace"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def plugins(self) -> Path:
        return self.home / "plugins"

    def ensure(self) -> None:
        """Create the home (0700: the socket inside is the owner's) and its folders."""
        self.home.mkdir(parents=True, exist_ok=True)
        os.chmod(self.home, 0o700)
        for folder in (self.agents, self.files, self.workspace, self.logs, self.plugins):
            folder.mkdir(exist_ok=True)

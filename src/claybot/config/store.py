"""Reading and writing settings.json and auth.json.

Writes are atomic; auth.json is 0600. A file that does not validate is reported
with the file and the field and is never silently replaced by defaults.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from claybot.config.auth import AuthFile
from claybot.config.home import HomePaths
from claybot.config.settings import Settings
from claybot.durable.atomic import atomic_write_bytes
from claybot.kernel.errors import ClayError

M = TypeVar("M", bound=BaseModel)


class ConfigError(ClayError):
    """A configuration file exists but cannot be used.

    The request was fine and the owner's file is not, so the API answers 500, naming
    the file and the problem (field paths and messages, never the values).
    """

    code = "config_invalid"
    status = 500

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def describe_validation_error(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(root)"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def _read_model(path: Path, model: type[M]) -> M | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(path, f"not valid JSON ({exc})") from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(path, describe_validation_error(exc)) from exc


def _dump(model: BaseModel) -> bytes:
    data = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return json.dumps(data, indent=2, ensure_ascii=False).encode() + b"\n"


class ConfigStore:
    def __init__(self, paths: HomePaths) -> None:
        self.paths = paths

    def read_settings(self) -> Settings:
        return _read_model(self.paths.settings, Settings) or Settings()

    def write_settings(self, settings: Settings) -> None:
        atomic_write_bytes(self.paths.settings, _dump(settings), mode=0o600)

    def read_auth(self) -> AuthFile:
        return _read_model(self.paths.auth, AuthFile) or AuthFile({})

    def write_auth(self, auth: AuthFile) -> None:
        atomic_write_bytes(self.paths.auth, _dump(auth), mode=0o600)

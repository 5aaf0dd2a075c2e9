"""Structured logs: JSON lines in ``<home>/logs/engine.log``, warnings on stderr.

Every record carries an ``action``; secrets never reach a log because no code
logs credentials, and the formatter only copies known-safe ``extra`` fields.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
from typing import Any

from claybot.config.home import HomePaths

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(paths: HomePaths, level: int = logging.INFO) -> None:
    paths.logs.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger("claybot")
    root.setLevel(level)
    root.propagate = False
    file_handler = logging.handlers.RotatingFileHandler(
        paths.logs / "engine.log", maxBytes=10 * 1024 * 1024, backupCount=3
    )
    file_handler.setFormatter(JsonFormatter())
    stderr_handler = logging.StreamHandler()
    stderr_handler.setLevel(logging.WARNING)
    stderr_handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.handlers = [file_handler, stderr_handler]

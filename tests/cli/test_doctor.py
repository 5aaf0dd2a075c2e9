"""`claybot doctor` on a temporary home, as a user runs it: the command, the home's files,
the config files, the providers, the port, the database and the disk.

Each check is shown passing and failing on a real environment (a chmod 644 auth.json,
a provider at a closed port and at a live loopback server, a socket holding the port,
a real engine holding it, a damaged database), not on mocks. The machine's side
(the local model, the sandbox, `claude`, Telegram) is in test_doctor_machine.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from claybot.config.home import HomePaths
from claybot.db.database import HEAD_REVISION, alembic_config, create_database_engine, migrate
from tests.cli.doctor_run import doctor, doctor_text, free_port
from tests.cli.test_cli import cli
from tests.conftest import ECHO_SETTINGS, EngineProcess, write_settings
from tests.providers.fake_anthropic import FakeAnthropic
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import LoopbackServer

pytestmark = pytest.mark.slow

SECRET = "sk-doctor-secret-0123456789"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def run_fix(command: str) -> None:
    """Run a fix exactly as printed (``claybot`` is this interpreter's)."""
    command = command.replace("claybot ", f"{sys.executable} -m claybot ", 1)
    subprocess.run(["sh", "-c", command], check=True, capture_output=True, timeout=60)


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses connections: bound, never listening."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield int(bound.getsockname()[1])


# -- the command ------------------------------------------------------------------------


def test_help_explains_the_checks_and_the_options(paths: HomePaths) -> None:
    result = cli(paths, "doctor", "--help")
    assert result.returncode == 0
    for words in ("--fix", "--json", "--only", "--disk-warn-mb", "bubblewrap", "Exits 1 when"):
        assert words in result.stdout, words


def test_bad_options_are_clear_errors(paths: HomePaths) -> None:
    unknown = cli(paths, "doctor", "--only", "nonsense")
    assert unknown.returncode == 1
    assert "unknown check nonsense: choose from home, config" in unknown.stderr
    upside_down = cli(paths, "doctor", "--disk-warn-mb", "10", "--disk-fail-mb", "20")
    assert upside_down.returncode == 1 and "must not exceed" in upside_down.stderr
    assert "Traceback" not in unknown.stderr + upside_down.stderr


def test_a_fresh_machine_without_an_engine_is_fixed_and_passes(paths: HomePaths) -> None:
    # What `make run` gives: no settings (the local model), no engine, nothing created yet.
    write_settings(paths, {"engine": {"port": free_port()}})
    first = doctor(paths)
    assert first.code == 1  # the test's home is 0755: others can read it
    groups = {check.split(".")[0] for check in first.checks()}
    assert groups == {
        "home", "config", "provider", "local", "sandbox", "port", "database", "claude", "disk"
    }  # fmt: skip
    assert first.status("home.modes") == "fail" and first.status("database") == "warn"
    fixed = doctor(paths, "--fix")
    assert fixed.code == 0, fixed.findings
    assert [f["check"] for f in fixed.findings if f["status"] == "fail"] == []
    assert fixed.status("local.load") == "ok" and fixed.status("database") == "ok"


def test_with_the_engine_running_everything_passes(
    engine_process: EngineProcess, paths: HomePaths
) -> None:
    port = free_port()
    write_settings(paths, {**ECHO_SETTINGS, "engine": {"port": port}})
    engine_process.start(port=port)
    report = doctor(paths)
    assert report.code == 0, report.findings
    assert report["port"]["detail"] == (
        f"127.0.0.1:{port} is held by this home's engine (pid {engine_process.process.pid})"
    )
    assert report.status("database") == "ok" and report.status("home.modes") == "ok"
    assert report.status("provider.scripted") == "ok"
    # Whoever reaches the socket can mint API keys: open to others, it fails; --fix closes
    # it under the running engine.
    paths.socket.chmod(0o666)
    opened = doctor(paths, "--only", "home")
    assert opened.code == 1
    assert opened["home.modes"]["detail"] == "others can reach claybot.sock (0666)"
    assert doctor(paths, "--only", "home", "--fix").code == 0
    assert mode(paths.socket) == 0o600
    with engine_process.client() as client:
        assert client.get("/v1/engine/status").status_code == 200
    engine_process.terminate()


def test_the_human_output_marks_each_finding_and_its_fix(paths: HomePaths) -> None:
    result = doctor_text(paths, "--only", "home", "--only", "disk")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert any(line.startswith("✗ fail  home.modes") for line in lines)
    assert any(line.startswith("✓ ok    disk") for line in lines)
    assert any(line.strip() == f"fix: chmod 700 {paths.home}" for line in lines)
    assert "failure(s)" in lines[-2] and "claybot doctor --fix" in lines[-1]


# -- home: folders and file modes ----------------------------------------------------------


def test_a_home_others_can_read_fails_and_fix_makes_it_private(paths: HomePaths) -> None:
    paths.home.chmod(0o755)
    report = doctor(paths, "--only", "home")
    assert report.code == 1
    assert report.status("home.folders") == "warn"  # agents/, logs/ ... not made yet
    assert report["home.modes"]["detail"] == "others can reach the home (0755)"
    fixed = doctor(paths, "--only", "home", "--fix")
    assert fixed.code == 0
    assert fixed.status("home.folders") == "ok" and fixed.status("home.modes") == "ok"
    assert mode(paths.home) == 0o700
    assert all(mode(folder) == 0o700 for folder in paths.private_folders)


def test_a_readable_auth_json_fails_and_the_printed_chmod_fixes_it(paths: HomePaths) -> None:
    paths.ensure()
    paths.auth.write_text(json.dumps({"openai": {"type": "apiKey", "apiKey": SECRET}}))
    paths.auth.chmod(0o644)
    report = doctor(paths, "--only", "home")
    assert report.code == 1
    assert report["home.modes"]["detail"] == "others can reach auth.json (0644)"
    assert report["home.modes"]["fix"] == f"chmod 600 {paths.auth}"
    run_fix(report["home.modes"]["fix"])
    assert mode(paths.auth) == 0o600
    assert doctor(paths, "--only", "home").status("home.modes") == "ok"
    assert SECRET not in report.stdout


def test_a_readable_log_inside_a_private_home_is_only_a_warning(paths: HomePaths) -> None:
    paths.ensure()
    log = paths.logs / "engine.log"
    log.write_text("{}\n")
    log.chmod(0o644)
    report = doctor(paths, "--only", "home")
    assert report.code == 0
    assert report.status("home.modes") == "warn"
    assert report["home.modes"]["fix"] == f"chmod 600 {log}"
    assert doctor(paths, "--only", "home", "--fix").status("home.modes") == "ok"
    assert mode(log) == 0o600


# -- config: settings.json, auth.json, plugin settings --------------------------------------


def test_valid_config_files_pass(paths: HomePaths) -> None:
    write_settings(paths, ECHO_SETTINGS)
    paths.auth.write_text(json.dumps({"openai": {"type": "apiKey", "apiKey": SECRET}}))
    report = doctor(paths, "--only", "config")
    assert report.code == 0
    assert report["config.settings"]["detail"] == "settings.json is valid"
    assert report["config.auth"]["detail"] == "auth.json is valid"


def test_invalid_settings_report_the_loaders_error(paths: HomePaths) -> None:
    paths.home.mkdir(exist_ok=True)
    paths.settings.write_text('{"engine": {"port": "seventy"}}')
    report = doctor(paths, "--only", "config", "--only", "provider", "--only", "port")
    assert report.code == 1
    finding = report["config.settings"]
    assert finding["detail"].startswith(f"{paths.settings}: engine.port: Input should be")
    assert finding["fix"].endswith(str(paths.settings))
    # What needs the settings is not guessed at from a file the engine would refuse.
    assert report.checks() == ["config.settings", "config.auth"]
    paths.settings.write_text("{not json")
    broken = doctor(paths, "--only", "config")
    assert "not valid JSON" in broken["config.settings"]["detail"]


def test_invalid_auth_is_reported_without_its_secrets(paths: HomePaths) -> None:
    paths.home.mkdir(exist_ok=True)
    paths.auth.write_text(json.dumps({"openai": {"type": "password", "apiKey": SECRET}}))
    report = doctor(paths, "--only", "config")
    assert report.code == 1
    assert report["config.auth"]["detail"].startswith(f"{paths.auth}: openai.type: Input should")
    assert SECRET not in report.stdout + report.stderr


def test_invalid_plugin_settings_report_the_plugins_own_error(paths: HomePaths) -> None:
    plugin = {"instanceId": "sh", "pluginId": "shell", "settings": {"sandbox": "rlimit"}}
    write_settings(paths, {"plugins": [plugin]})
    report = doctor(paths, "--only", "config")
    assert report.code == 1
    assert (
        "sh: sandbox: Value error, 'rlimit' no longer exists" in report["config.plugins"]["detail"]
    )
    write_settings(paths, {"plugins": [{**plugin, "settings": {}}]})
    assert doctor(paths, "--only", "config")["config.plugins"]["detail"] == (
        "settings valid for sh (shell)"
    )


def test_a_setup_left_half_done_is_named_with_the_commands_that_finish_it(
    paths: HomePaths,
) -> None:
    # What an interrupted `claybot init` used to leave: the keys and the bot token saved,
    # the provider and the Telegram instance that use them not.
    write_settings(paths, {"providers": [{"id": "openai"}, {"id": "local"}]})
    paths.auth.write_text(
        json.dumps(
            {
                "openai": {"type": "apiKey", "apiKey": SECRET},
                "anthropic": {"type": "apiKey", "apiKey": SECRET},
                "telegram": {"type": "token", "token": "123456789:AAsecret"},
            }
        )
    )
    report = doctor(paths, "--only", "config")
    assert report.code == 0  # the engine runs; the bot and the key do nothing
    finding = report["config.credentials"]
    assert finding["status"] == "warn"
    assert finding["detail"] == (
        "nothing uses what auth.json holds (a setup that stopped half-way?): a key for "
        "'anthropic', but no provider 'anthropic' in settings.json; a token for 'telegram', "
        "but no plugin instance 'telegram' in settings.json"
    )
    assert finding["fix"] == (
        "claybot init, or claybot providers add anthropic (--type TYPE unless 'anthropic' is "
        "one), or claybot auth remove anthropic; claybot init (it connects the Telegram bot), "
        "or claybot plugins load telegram --setting allowedUserIds=[YOUR_TELEGRAM_ID], or "
        "claybot auth remove telegram"
    )
    assert SECRET not in report.stdout and "AAsecret" not in report.stdout
    # The fixes it names, run: nothing is left unused.
    for command in (
        ("providers", "add", "anthropic"),
        ("plugins", "load", "telegram", "--setting", "allowedUserIds=[42]"),
    ):
        done = cli(paths, *command)
        assert done.returncode == 0, done.stderr
    fixed = doctor(paths, "--only", "config")
    assert fixed["config.credentials"] == {
        "check": "config.credentials",
        "status": "ok",
        "detail": "every auth.json entry is used",
        "fix": None,
    }


# -- providers: keys and endpoints -------------------------------------------------------------


def test_a_provider_with_a_key_and_a_live_endpoint_passes_without_a_model_call(
    paths: HomePaths,
) -> None:
    vendor = FakeOpenAI()
    with LoopbackServer(vendor):
        write_settings(
            paths, {"providers": [{"id": "openai", "options": {"baseUrl": vendor.api_base}}]}
        )
        paths.auth.write_text(json.dumps({"openai": {"type": "apiKey", "apiKey": SECRET}}))
        report = doctor(paths, "--only", "provider")
    assert report.code == 0
    assert report["provider.openai.key"]["detail"] == "key from auth.json (OpenAI-compatible)"
    assert report["provider.openai.endpoint"]["detail"] == (
        f"{vendor.base_url} answers (HTTP 404 to a GET)"
    )
    assert vendor.requests == []  # no chat completion: nothing was paid for


def test_a_provider_at_a_closed_port_fails(paths: HomePaths, refusing_port: int) -> None:
    url = f"http://127.0.0.1:{refusing_port}/v1"
    ollama = {"id": "ollama", "type": "openai", "options": {"baseUrl": url}}
    write_settings(paths, {"providers": [ollama]})
    report = doctor(paths, "--only", "provider")
    assert report.code == 1
    assert report["provider.ollama.key"]["detail"] == "no key needed (OpenAI-compatible)"
    endpoint = report["provider.ollama.endpoint"]
    assert endpoint["status"] == "fail"
    assert endpoint["detail"].startswith(f"http://127.0.0.1:{refusing_port} does not answer")
    assert "`claybot providers disable ollama`" in endpoint["fix"]


def test_a_provider_without_its_key_fails_and_the_environment_key_passes(
    paths: HomePaths,
) -> None:
    write_settings(paths, {"providers": [{"id": "anthropic"}, {"id": "off", "enabled": False}]})
    missing = doctor(paths, "--only", "provider")
    assert missing.code == 1
    assert "no API key" in missing["provider.anthropic.key"]["detail"]
    assert missing["provider.anthropic.key"]["fix"] == "claybot auth set anthropic apiKey"
    assert missing["provider.off"]["detail"] == "disabled: not checked"
    vendor = FakeAnthropic()
    with LoopbackServer(vendor):
        env = {"ANTHROPIC_API_KEY": SECRET, "ANTHROPIC_BASE_URL": vendor.base_url}
        found = doctor(paths, "--only", "provider", env=env)
    assert found.code == 0
    assert found["provider.anthropic.key"]["detail"] == "key from $ANTHROPIC_API_KEY (Anthropic)"
    assert found.status("provider.anthropic.endpoint") == "ok"
    assert vendor.requests == []
    assert SECRET not in found.stdout


# -- the port ------------------------------------------------------------------------------


def test_a_free_port_passes_and_one_held_by_another_program_fails(paths: HomePaths) -> None:
    port = free_port()
    write_settings(paths, {"engine": {"port": port}})
    assert doctor(paths, "--only", "port")["port"]["detail"] == f"127.0.0.1:{port} is free"
    with socket.socket() as other:
        other.bind(("127.0.0.1", port))
        other.listen()
        report = doctor(paths, "--only", "port")
    assert report.code == 1
    assert report["port"]["detail"] == (
        f"127.0.0.1:{port} is in use by another program (not this home's engine)"
    )
    assert report["port"]["fix"].startswith("claybot start --port ")


def test_the_port_held_by_another_homes_engine_fails(
    engine_process: EngineProcess, paths: HomePaths
) -> None:
    port = free_port()
    engine_process.start(port=port)  # the engine of `paths`, on `port`
    other = HomePaths(Path(f"{paths.home}-other"))
    try:
        write_settings(other, {"engine": {"port": port}})
        report = doctor(other, "--only", "port")
    finally:
        subprocess.run(["rm", "-rf", str(other.home)], check=False)
    assert report.code == 1 and "in use by another program" in report["port"]["detail"]
    engine_process.terminate()


# -- the database ---------------------------------------------------------------------------


def test_a_missing_sqlite_database_warns_and_fix_creates_it_at_head(paths: HomePaths) -> None:
    paths.ensure()
    report = doctor(paths, "--only", "database")
    assert report.code == 0 and report.status("database") == "warn"
    assert report["database"]["fix"] == "claybot doctor --fix"
    assert not paths.database.exists()  # checking changed nothing
    fixed = doctor(paths, "--only", "database", "--fix")
    assert fixed["database"]["detail"] == (
        f"{paths.database}: quick check ok; schema at revision {HEAD_REVISION} (current)"
    )
    assert mode(paths.database) == 0o600


def test_a_database_behind_head_warns_and_fix_migrates_it(paths: HomePaths) -> None:
    paths.ensure()
    from alembic import command

    command.upgrade(alembic_config(f"sqlite+aiosqlite:///{paths.database}"), "0001")
    report = doctor(paths, "--only", "database")
    assert report.status("database") == "warn"
    assert f"schema at revision 0001, behind {HEAD_REVISION}" in report["database"]["detail"]
    assert doctor(paths, "--only", "database", "--fix").status("database") == "ok"


def test_a_damaged_or_newer_sqlite_database_fails(paths: HomePaths) -> None:
    paths.ensure()
    paths.database.write_bytes(b"this is not a database, just bytes " * 200)
    damaged = doctor(paths, "--only", "database", "--fix")  # --fix must not touch it
    assert damaged.code == 1
    assert (
        "is not a usable SQLite database: file is not a database" in damaged["database"]["detail"]
    )
    assert ".recover" in damaged["database"]["fix"]
    assert paths.database.read_bytes().startswith(b"this is not a database")
    paths.database.unlink()
    asyncio.run(_migrated(f"sqlite+aiosqlite:///{paths.database}"))
    import sqlite3

    with sqlite3.connect(paths.database) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '9999'")
    newer = doctor(paths, "--only", "database")
    assert newer.code == 1 and "a newer ClayBot migrated it" in newer["database"]["detail"]


async def _migrated(url: str) -> None:
    engine = create_database_engine(url)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()


@pytest.mark.postgres
async def test_postgresql_at_head_passes_and_an_empty_one_warns(
    paths: HomePaths, fresh_postgres_url: str
) -> None:
    env = {"CLAYBOT_DATABASE_URL": fresh_postgres_url}
    empty = await asyncio.to_thread(doctor, paths, "--only", "database", env=env)
    assert empty.code == 0 and empty.status("database") == "warn"
    assert "no schema yet" in empty["database"]["detail"]
    await _migrated(fresh_postgres_url)
    report = await asyncio.to_thread(doctor, paths, "--only", "database", env=env)
    assert report.code == 0
    assert report["database"]["detail"].endswith(
        f"answers; schema at revision {HEAD_REVISION} (current)"
    )


def test_an_unreachable_postgresql_fails_without_its_password(
    paths: HomePaths, refusing_port: int
) -> None:
    url = f"postgresql://claybot:{SECRET}@127.0.0.1:{refusing_port}/claybot"
    report = doctor(paths, "--only", "database", env={"CLAYBOT_DATABASE_URL": url})
    assert report.code == 1
    detail = report["database"]["detail"]
    assert detail.startswith(
        f"PostgreSQL at postgresql+asyncpg://claybot:***@127.0.0.1:{refusing_port}"
    )
    assert "does not answer" in detail and SECRET not in report.stdout


# -- free disk -------------------------------------------------------------------------------


def test_free_disk_against_the_thresholds(paths: HomePaths) -> None:
    free_mb = os.statvfs(paths.home).f_bavail * os.statvfs(paths.home).f_frsize // 2**20
    plenty = doctor(paths, "--only", "disk", "--disk-warn-mb", "1", "--disk-fail-mb", "0")
    assert plenty.code == 0 and plenty.status("disk") == "ok"
    beyond = str(free_mb * 2 + 1024)
    low = doctor(paths, "--only", "disk", "--disk-warn-mb", beyond, "--disk-fail-mb", "0")
    assert low.code == 0 and low.status("disk") == "warn"
    full = doctor(paths, "--only", "disk", "--disk-warn-mb", beyond, "--disk-fail-mb", beyond)
    assert full.code == 1 and full.status("disk") == "fail"
    assert "du -xsh" in full["disk"]["fix"]
